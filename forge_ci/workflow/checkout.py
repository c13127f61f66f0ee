"""The inputs (``with``) of the built-in checkout, ``actions/checkout@<any ref>``.

The checkout is never downloaded: forge-ci runs its own equivalent, which understands the inputs
below. They are read as ``actions/checkout`` reads them (every value is text; booleans are
``true``/``false`` in the three casings ``core.getBooleanInput`` accepts) and normalized into
the plan's ``with`` object, which always carries every key::

    fetch-depth   "1"     0 = all history of the checked-out commit, N = the N latest commits
    ref           ""      "" = the run's commit; else a branch or tag of the same repository or
                          the run's own commit SHA; resolved and pinned at run creation
    path          ""      a relative directory under the workspace
    clean         "true"  empty the target directory first (false: keep untracked files)
    fetch-tags    "false" also fetch the tags on the fetched history (fetch-depth 0 always does)

``persist-credentials`` is accepted and kept in ``with`` only when written (there are no
credentials to persist; the runner says so in the step's log), ``submodules: true`` and
``recursive`` with a notice (the run's source carries no submodule contents), ``token`` with a
notice (never evaluated: no credentials are needed), ``lfs`` only as false, ``sparse-checkout``
is refused, and every other input is refused with the
list of supported ones. Values are literal, but for ``ref``, which may use the contexts known when
the run is created.
"""

from __future__ import annotations

import re

from forge_ci.workflow.diagnostics import Problems
from forge_ci.workflow.nodes import Mapping, Node, Scalar, describe, is_null
from forge_ci.workflow.templates import STEP_CONTEXTS, ExpressionChecker, Scope, Template

DEFAULTS = {
    "fetch-depth": "1",
    "ref": "",
    "path": "",
    "clean": "true",
    "fetch-tags": "false",
}
#: Accepted as written, with no effect.
ACCEPTED = ("persist-credentials",)
#: Accepted only as false.
ONLY_FALSE = ("lfs",)
#: Accepted with a notice and never evaluated: the checkout needs no credentials.
UNUSED = ("token",)
SUPPORTED = (*DEFAULTS, *ACCEPTED, "submodules", *UNUSED, *ONLY_FALSE)
TOKEN_NOTICE = (
    "with.token is not used: the built-in checkout reads the run's own repository, "
    "which needs no credentials"
)
SUBMODULES_NOTICE = (
    "with.submodules: submodules are not checked out on forge-ci; their folders stay empty"
)
MAX_FETCH_DEPTH = 1_000_000
MAX_PATH_LENGTH = 255
_BOOLEANS = {
    "true": True,
    "True": True,
    "TRUE": True,
    "false": False,
    "False": False,
    "FALSE": False,
}
_SHA = re.compile(r"[0-9a-f]{40}\Z")
#: Names the runner owns at the top of the workspace, and git's own directory anywhere.
_RESERVED = frozenset({".home", ".tmp"})


def supported_list() -> str:
    """The supported inputs, for error messages."""
    return ", ".join(SUPPORTED)


#: What ``with.ref`` may read: it is evaluated and pinned when the run is created.
REF_CONTEXTS = frozenset({"github", "inputs", "vars", "matrix", "strategy"})


def parse_checkout_with(
    uses: str,
    node: Node | None,
    checker: ExpressionChecker,
    problems: Problems,
    scope: Scope | None = None,
) -> dict[str, str | Template]:
    """The normalized inputs of one checkout step (``node`` is its ``with``, or None).

    ``with.ref`` may hold expressions over :data:`REF_CONTEXTS` (``scope`` gives the job's
    matrix keys); it is kept as written and evaluated at run creation
    (forge_ci.runs.checkouts), where the ref it names is pinned. ``with.path`` may use
    the step contexts (``${{ env.SRC }}``, ``${{ steps.paths.outputs.dir }}``): it stays a
    :class:`Template` for the plan, which fills in the matrix; the runner evaluates the rest and
    refuses a result outside the workspace, as it refuses a literal one."""
    inputs: dict[str, str | Template] = dict(DEFAULTS)
    if node is None:
        return inputs
    if not isinstance(node, Mapping):
        problems.at(node, f"with must be a mapping of inputs, not {describe(node)}")
        return inputs
    seen: dict[str, Scalar] = {}
    for key, value in node.items:
        name = key.value
        if name.lower() in seen:
            problems.at(key, f"with.{name} is given twice (line {seen[name.lower()].line})")
            continue
        seen[name.lower()] = key
        if name not in SUPPORTED:
            problems.at(key, _refusal(uses, name, problems))
            continue
        if name in UNUSED:
            if isinstance(value, Scalar) and "${{" in value.value:
                every = (scope or Scope(name, frozenset())).narrowed(
                    f"with.{name}", STEP_CONTEXTS, any_secret=True
                )
                checker.template(value, every)  # checked, never evaluated
            problems.notice(value, TOKEN_NOTICE)
            continue
        if name == "path" and isinstance(value, Scalar) and "${{" in value.value:
            # The step contexts, as on GitHub: the plan fills in the matrix (and gives the step
            # the job's env when the path reads it), the runner the rest, and the runner checks
            # the result as it checks a literal path (worker/runner/gitcheckout.py).
            path_scope = (scope or Scope("with.path", STEP_CONTEXTS)).narrowed(
                "with.path", STEP_CONTEXTS
            )
            template = checker.template(value, path_scope)
            if template is not None:
                inputs[name] = template
            continue
        if name == "ref" and isinstance(value, Scalar) and "${{" in value.value:
            ref_scope = (scope or Scope("with.ref", REF_CONTEXTS)).narrowed(
                "with.ref", REF_CONTEXTS
            )
            if checker.template(value, ref_scope) is not None:
                inputs[name] = value.value
            continue
        text = _text(value, name, checker, problems)
        if text is None:
            continue
        if name in ACCEPTED:
            flag = _boolean(value, text, name, problems)
            if flag is not None:
                inputs[name] = "true" if flag else "false"  # the runner shows a notice
        elif name == "submodules":
            wanted = text.strip()
            if wanted not in _BOOLEANS and wanted != "recursive":
                problems.at(
                    value, f"with.submodules must be true, false or recursive, not {text!r}"
                )
            elif wanted == "recursive" or _BOOLEANS[wanted]:
                # Accepted and visibly not done: the run's source has no submodule contents.
                problems.notice(value, SUBMODULES_NOTICE)
        elif name in ONLY_FALSE:
            if _BOOLEANS.get(text.strip(), True):
                problems.at(
                    value,
                    f"with.{name}: {text!r} is not supported; the built-in checkout "
                    f"takes only {name}: false",
                )
        elif name == "fetch-depth":
            depth = _depth(value, text, problems)
            if depth is not None:
                inputs[name] = str(depth)
        elif name in ("clean", "fetch-tags"):
            flag = _boolean(value, text, name, problems)
            if flag is not None:
                inputs[name] = "true" if flag else "false"
        elif name == "path":
            problem = path_problem(text)
            if problem:
                problems.at(value, f"with.path: {problem}")
            else:
                inputs[name] = normalize_path(text)
        else:  # ref
            problem = ref_problem(text)
            if problem:
                problems.at(value, f"with.ref: {problem}")
            else:
                inputs[name] = text
    return inputs


def _refusal(uses: str, name: str, problems: Problems) -> str:
    if name == "sparse-checkout" or name == "sparse-checkout-cone-mode":
        why = "sparse checkouts are not supported; the whole tree is checked out"
    elif name in ("repository", "ssh-key", "ssh-known-hosts", "ssh-strict", "ssh-user"):
        why = "the checkout reads only the run's own repository, with no credentials"
    else:
        why = "the built-in checkout does not know it"
    hint = problems.hint(name, SUPPORTED)
    return (
        f"with.{name} is not supported by the built-in checkout ({uses}): {why}{hint}; "
        f"supported inputs: {supported_list()}"
    )


def _text(node: Node, name: str, checker: ExpressionChecker, problems: Problems) -> str | None:
    if not isinstance(node, Scalar):
        problems.at(node, f"with.{name} must be a value, not {describe(node)}")
        return None
    if is_null(node):
        return ""
    return checker.literal(node, f"with.{name} of the built-in checkout")


def _boolean(node: Node, text: str, name: str, problems: Problems) -> bool | None:
    flag = _BOOLEANS.get(text.strip())
    if flag is None:
        problems.at(node, f"with.{name} must be true or false, not {text!r}")
    return flag


def _depth(node: Node, text: str, problems: Problems) -> int | None:
    stripped = text.strip()
    if stripped.isascii() and stripped.isdigit() and int(stripped) <= MAX_FETCH_DEPTH:
        return int(stripped)
    problems.at(
        node,
        f"with.fetch-depth must be 0 (all history) or a number of commits up to "
        f"{MAX_FETCH_DEPTH}, not {text!r}",
    )
    return None


def path_problem(text: str) -> str | None:
    """Why ``text`` cannot be the checkout's directory, or None (empty = the workspace)."""
    if len(text) > MAX_PATH_LENGTH:
        return f"the path is longer than {MAX_PATH_LENGTH} characters"
    if "\\" in text or "\0" in text or any(ord(char) < 32 for char in text):
        return f"{text!r} must be a plain relative path with '/' separators"
    if text.startswith("/"):
        return f"{text!r} must be relative to the workspace"
    parts = [part for part in text.split("/") if part not in ("", ".")]
    if any(part == ".." for part in parts):
        return f"{text!r} must stay inside the workspace (no '..')"
    if any(part.lower() == ".git" for part in parts):
        return f"{text!r} must not name a .git directory"
    if parts and parts[0] in _RESERVED:
        return f"{text!r} is reserved: the runner keeps HOME in .home and TMPDIR in .tmp"
    return None


def normalize_path(text: str) -> str:
    """``./a//b/`` -> ``a/b``; the workspace itself is ``""``."""
    return "/".join(part for part in text.split("/") if part not in ("", "."))


def ref_problem(text: str) -> str | None:
    """Why ``text`` cannot name a commit of the run's repository, or None (checked offline)."""
    if not text:
        return None
    if len(text) > 255:
        return "the ref is longer than 255 characters"
    bad = any(ord(char) <= 32 or ord(char) == 127 or char in "~^:?*[\\" for char in text)
    if bad or ".." in text or "@{" in text or text.endswith((".", "/", ".lock")):
        return f"{text!r} is not a valid branch, tag or commit name"
    return None


def is_commit_sha(text: str) -> bool:
    """A full lowercase commit SHA, as the plan stores a pinned ref."""
    return bool(_SHA.match(text))
