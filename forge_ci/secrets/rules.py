"""What a secret or variable may be: names, values, scopes, versions, and the limits.

Names are case-insensitive and stored uppercase: at most 100 ASCII letters, digits or
underscores, not starting with a digit, without the reserved ``GITHUB_``, ``FORGE_CI_`` and
``RUNNER_`` prefixes (the same rule the workflow parser applies to ``${{ secrets.NAME }}``).
Versions travel as canonical decimal strings: ``0`` creates, the listed version updates or
deletes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from forge_ci.errors import InvalidInput
from forge_ci.workflow.templates import secret_name_problem

MAX_SECRETS = 64
MAX_SECRET_BYTES = 16_384
#: GitHub's limits for configuration variables.
MAX_VARIABLES = 500
MAX_VARIABLE_BYTES = 48 * 1024
MAX_BRANCH = 255
WORKFLOW_DIR = ".github/workflows"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_VERSION = re.compile(r"0|[1-9][0-9]{0,18}")
_WORKFLOW_FILE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@+-]{0,200}\.ya?ml")
_BRANCH = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./+@-]{0,254}")


@dataclass(frozen=True)
class Kind:
    """Secrets or variables: the words and limits that differ between them."""

    word: str
    max_entries: int
    max_value_bytes: int


SECRET = Kind("secret", MAX_SECRETS, MAX_SECRET_BYTES)
VARIABLE = Kind("variable", MAX_VARIABLES, MAX_VARIABLE_BYTES)


def normalize_name(kind: Kind, name: str) -> str:
    """The stored (uppercase) form of ``name``, or InvalidInput naming what is wrong."""
    if not _NAME.fullmatch(name):
        shown = name[:40] + ("..." if len(name) > 40 else "")
        raise InvalidInput(
            f"{kind.word} name {shown!r} must consist of ASCII letters, digits and "
            "underscores and must not start with a digit"
        )
    # GITHUB_TOKEN may be referenced (it is the job token) but never stored.
    problem = secret_name_problem(name) or (
        "the secret name GITHUB_TOKEN uses the reserved prefix GITHUB_ (it is the job token)"
        if name.upper() == "GITHUB_TOKEN"
        else None
    )
    if problem is not None:
        raise InvalidInput(problem.replace("secret name", f"{kind.word} name"))
    return name.upper()


def check_value(kind: Kind, value: str) -> str:
    """A value of 1 to ``kind.max_value_bytes`` UTF-8 bytes without NUL."""
    size = len(value.encode("utf-8", "surrogatepass"))
    if size == 0:
        raise InvalidInput(f"the {kind.word} value is empty; a value has at least 1 byte")
    if size > kind.max_value_bytes:
        raise InvalidInput(
            f"the {kind.word} value is {size} bytes; the limit is {kind.max_value_bytes}"
        )
    if "\x00" in value:
        raise InvalidInput(f"the {kind.word} value contains a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"the {kind.word} value is not valid UTF-8") from None
    return value


def decode_value(kind: Kind, data: bytes) -> str:
    """A value read from a file or standard input, exactly as given (no newline stripped)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"the {kind.word} value is not valid UTF-8 (byte {exc.start})") from None
    return check_value(kind, text)


def parse_version(text: str) -> int:
    """``0`` (create) or the decimal version given by the list."""
    if not isinstance(text, str) or not _VERSION.fullmatch(text) or int(text) >= 2**63:
        raise InvalidInput(
            f"version {str(text)[:30]!r} must be a decimal number: 0 to create, or the "
            "version shown by the list to update or delete"
        )
    return int(text)


def check_branch(branch: str) -> str:
    if (
        not _BRANCH.fullmatch(branch)
        or ".." in branch
        or branch.endswith((".lock", "/", "."))
        or "//" in branch
        or branch.startswith("forge-ci/")
    ):
        raise InvalidInput(f"{branch[:80]!r} is not a branch name (give one such as main)")
    return branch


def check_workflow_path(path: str) -> str:
    directory, _, name = path.rpartition("/")
    if directory != WORKFLOW_DIR or not _WORKFLOW_FILE.fullmatch(name):
        raise InvalidInput(
            f"the workflow {path[:120]!r} must be a file directly under {WORKFLOW_DIR}/ ending "
            "in .yml or .yaml, such as .github/workflows/publish.yml"
        )
    return path


def scope_text(branch: str | None, workflow_path: str | None) -> str:
    """The scope as one line: ``main .github/workflows/x.yml``, or ``""`` for everywhere."""
    return "" if branch is None else f"{branch} {workflow_path}"
