"""``defaults.run`` (shell and working directory) and the rules for working directories.

Defaults apply workflow < job < step. An omitted shell stays unspecified in the plan, because
GitHub's implicit shell (``bash -e {0}`` when bash exists) differs from explicitly selecting
``bash`` (``bash --noprofile --norc -eo pipefail {0}``); the runner decides.

Working directories are relative paths inside the workspace (a step's and a job's default may
be an expression, checked by the runner instead): no leading '/', '~' or drive, no '..', no
backslashes, no control characters. Empty components mean nothing to a path (``app/`` and
``a//b`` are ``app`` and ``a/b`` to the system GitHub's runner hands them to), so they are
dropped (:func:`normal_directory`). The runner must still enforce containment at run time,
because a checked-in symlink can point anywhere.
"""

from __future__ import annotations

import re

from forge_ci.records import record
from forge_ci.workflow.checkout import normalize_path
from forge_ci.workflow.diagnostics import Problems
from forge_ci.workflow.nodes import Mapping, Node, describe
from forge_ci.workflow.templates import ExpressionChecker, Scope, Template
from forge_ci.workflow.values import string

#: GitHub's shell names (compared without regard to case); any other shell is a command
#: template with ``{0}`` for the script file (``bash -l {0}``), run by the runner as written.
SHELLS = ("bash", "sh", "python", "pwsh", "powershell", "cmd")
#: Shells that expand ``${NAME}``: untrusted values may reach their scripts as variables.
POSIX_SHELLS = frozenset({"bash", "sh", "dash", "zsh", "ksh"})
MAX_SHELL_LENGTH = 200


def is_posix_shell(shell: str | None) -> bool:
    """Whether the resolved ``shell`` (None: the default, bash) reads ``${NAME}`` as a variable."""
    if not shell:
        return True
    if "{0}" not in shell:
        return shell in ("bash", "sh")
    program = shell.split()[0].rsplit("/", 1)[-1]
    return program in POSIX_SHELLS


_DRIVE = re.compile(r"[A-Za-z]:")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


@record(frozen=True)
class RunDefaults:
    """Shell and working directory of one level; ``None`` means "not set at this level"."""

    shell: str | None = None
    working_directory: str | Template | None = None

    def under(self, inner: RunDefaults) -> RunDefaults:
        """These defaults overridden by a more specific level."""
        return RunDefaults(
            inner.shell if inner.shell is not None else self.shell,
            inner.working_directory
            if inner.working_directory is not None
            else self.working_directory,
        )


def working_directory_problem(path: str) -> str | None:
    """Why ``path`` cannot be a working directory, or ``None`` when it can."""
    if not path:
        return "working-directory must not be empty"
    if _CONTROL.search(path):
        return "working-directory must not contain control characters"
    if "\\" in path:
        return "working-directory must use '/' and no backslashes"
    if path.startswith(("/", "~")):
        return f"working-directory must be relative to the workspace, not '{path}'"
    if _DRIVE.match(path):
        return f"working-directory must not start with a drive ('{path}')"
    parts = path.split("/")
    if ".." in parts:
        return f"working-directory must not leave the workspace with '..' ('{path}')"
    return None


def normal_directory(path: str) -> str:
    """A valid working directory without empty components (``./a//b/`` -> ``a/b``)."""
    return normalize_path(path) or "."


def shell(node: Node, checker: ExpressionChecker, problems: Problems) -> str | None:
    """A ``shell`` value (literal): one of :data:`SHELLS` or a command template with ``{0}``."""
    scalar = string(node, "shell", problems)
    text = checker.literal(scalar, "shell") if scalar is not None else None
    if scalar is None or text is None:
        return None
    if text.lower() in SHELLS:
        return text.lower()
    if "{0}" not in text or len(text) > MAX_SHELL_LENGTH or _CONTROL.search(text):
        problems.at(
            scalar,
            f"shell '{text[:60]}' is not supported; use {', '.join(SHELLS)} or a command with "
            f"{{0}} for the script (like bash -l {{0}}), at most {MAX_SHELL_LENGTH} characters",
        )
        return None
    return text.strip()


def working_directory(
    node: Node, checker: ExpressionChecker, problems: Problems, scope: Scope | None = None
) -> str | Template | None:
    """A ``working-directory`` value, checked by :func:`working_directory_problem`.

    With ``scope`` (a step's own working-directory) it may hold expressions, as on GitHub; the
    runner evaluates them and keeps the directory inside the workspace (an absolute path
    is accepted there when it lies inside the workspace, like ``${{ github.workspace }}/build``).
    """
    scalar = string(node, "working-directory", problems)
    if scalar is not None and scope is not None and "${{" in scalar.value:
        return checker.template(scalar, scope)
    text = checker.literal(scalar, "working-directory") if scalar is not None else None
    if scalar is None or text is None:
        return None
    problem = working_directory_problem(text)
    if problem:
        problems.at(scalar, problem)
        return None
    return normal_directory(text)


def parse_run_defaults(
    node: Node,
    where: str,
    checker: ExpressionChecker,
    problems: Problems,
    scope: Scope | None = None,
) -> RunDefaults:
    """``defaults`` of a workflow or job (``where`` names it in messages).

    A job's ``scope`` lets its working-directory hold expressions (GitHub: github, needs,
    strategy, matrix, env, vars, inputs); the workflow's takes none, as on GitHub."""
    if not isinstance(node, Mapping):
        problems.at(node, f"{where} must be a mapping, not {describe(node)}")
        return RunDefaults()
    run: Node | None = None
    for key, value in node.items:
        if key.value == "run":
            run = value
        else:
            hint = problems.hint(key.value, ["run"])
            problems.at(key, f"'{key.value}' is not a {where} key{hint}")
    if run is None:
        return RunDefaults()
    if not isinstance(run, Mapping):
        problems.at(run, f"{where}.run must be a mapping, not {describe(run)}")
        return RunDefaults()
    chosen_shell: str | None = None
    directory: str | Template | None = None
    for key, value in run.items:
        if key.value == "shell":
            chosen_shell = shell(value, checker, problems)
        elif key.value == "working-directory":
            directory = working_directory(value, checker, problems, scope)
        else:
            hint = problems.hint(key.value, ("shell", "working-directory"))
            problems.at(key, f"'{key.value}' is not a {where}.run key{hint}")
    return RunDefaults(chosen_shell, directory)
