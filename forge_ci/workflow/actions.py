"""Action references (``uses:``) and the checks of a step's ``with`` against an action's inputs.

Pure code, like the rest of the workflow engine. Three spellings are accepted::

    OWNER/REPO@REF          an action at the root of a repository (REF: tag, branch or commit SHA)
    OWNER/REPO/PATH@REF     an action in a subfolder of that repository
    ./PATH                  an action in the run's own commit (``./`` alone: the root)

``docker://IMAGE`` is refused (jobs have no Docker), and so is anything else. Which commit a
reference means is decided once, at run creation (``forge_ci.runs.actions``), never here.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from forge_ci.records import record
from forge_ci.workflow.diagnostics import did_you_mean

#: A GitHub owner (user or organisation) name; forge user names are a lowercase subset.
_OWNER = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}\Z")
_REPO = re.compile(r"[A-Za-z0-9._-]{1,100}\Z")
_SEGMENT = re.compile(r"[A-Za-z0-9._@+=,-][A-Za-z0-9 ._@+=,-]*\Z")
_REF = re.compile(r"[A-Za-z0-9._/+-]{1,255}\Z")
_SHA = re.compile(r"[0-9a-f]{40}\Z")
MAX_REFERENCE = 512


class ReferenceInvalid(ValueError):
    """A ``uses`` value forge-ci cannot run; the message says why and what is accepted."""


@record(frozen=True)
class ActionReference:
    """One parsed ``uses`` value. ``local`` references have no owner, repo or ref."""

    text: str
    local: bool
    owner: str = ""
    repo: str = ""
    #: The folder inside the repository (or the run's commit), ``""`` for the root.
    path: str = ""
    ref: str = ""

    @property
    def repository(self) -> str:
        """``OWNER/REPO`` ("" for a local action)."""
        return f"{self.owner}/{self.repo}" if not self.local else ""

    @property
    def ref_is_sha(self) -> bool:
        return bool(_SHA.match(self.ref))


def _check_path(path: str, text: str) -> str:
    if path in ("", "."):
        return ""
    parts = path.split("/")
    for part in parts:
        if part in ("", ".", "..") or not _SEGMENT.match(part) or part.lower() == ".git":
            raise ReferenceInvalid(
                f"uses: {text}: the path {path!r} must be a relative folder without '.', '..', "
                "'.git' or empty parts"
            )
    return "/".join(parts)


@functools.lru_cache(maxsize=1024)
def parse_reference(text: str) -> ActionReference:
    """The reference ``text`` as written in ``uses``; ReferenceInvalid says why it is refused.

    Remembered by text (the answer is immutable; a refusal is raised afresh each time): the same
    few actions are used by many steps and files.
    """
    if len(text) > MAX_REFERENCE:
        raise ReferenceInvalid(f"uses is {len(text)} characters; the limit is {MAX_REFERENCE}")
    if text.lower().startswith("docker://"):
        raise ReferenceInvalid(
            f"uses: {text}: Docker container actions are not supported (jobs run without "
            "Docker); use a node or composite action, or a run step"
        )
    if text.startswith("./") or text == ".":
        path = text[2:].rstrip("/") if text != "." else ""
        return ActionReference(text, True, path=_check_path(path, text))
    if text.startswith(("/", "../")) or "\\" in text:
        raise ReferenceInvalid(
            f"uses: {text}: a local action is written ./PATH (relative to the repository root)"
        )
    name, at, ref = text.rpartition("@")
    if not at:
        raise ReferenceInvalid(
            f"uses: {text} needs a version: OWNER/REPO@REF, OWNER/REPO/PATH@REF (REF: a tag, "
            "branch or full commit SHA) or ./PATH"
        )
    parts = name.split("/")
    if len(parts) < 2:
        raise ReferenceInvalid(f"uses: {text}: expected OWNER/REPO@REF or OWNER/REPO/PATH@REF")
    owner, repo = parts[0], parts[1]
    if not _OWNER.match(owner):
        raise ReferenceInvalid(f"uses: {text}: {owner!r} is not a valid owner name")
    if not _REPO.match(repo) or repo in (".", ".."):
        raise ReferenceInvalid(f"uses: {text}: {repo!r} is not a valid repository name")
    if (
        not _REF.match(ref)
        or ref.startswith(("/", "-", "."))
        or ref.endswith(("/", ".lock", "."))
        or ".." in ref
        or "//" in ref
    ):
        raise ReferenceInvalid(f"uses: {text}: {ref!r} is not a tag, branch or commit SHA")
    if ref.startswith("refs/"):
        raise ReferenceInvalid(
            f"uses: {text}: write the tag or branch name (like @v4 or @main), not {ref!r}"
        )
    path = _check_path("/".join(parts[2:]), text)
    return ActionReference(text, False, owner=owner, repo=repo, path=path, ref=ref)


def input_problems(
    action: str, inputs: Iterable[str], given: Iterable[str]
) -> list[tuple[str, str]]:
    """``(key, message)`` for every key of ``given`` (a step's ``with``) the action lacks.

    Input names compare without regard to case, as on GitHub. The message names the action,
    its inputs, and the closest one ("did you mean").
    """
    names = list(inputs)
    lowered = {name.lower() for name in names}
    shown = ", ".join(names) if names else "none"
    found = []
    for key in given:
        if key.lower() in lowered:
            continue
        hint = did_you_mean(key, names)
        found.append(
            (key, f"with.{key}: {action} has no input '{key}'{hint} (its inputs: {shown})")
        )
    return found
