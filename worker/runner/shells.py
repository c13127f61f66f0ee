"""How a ``run`` script is started: the shell's argv, with the script in a file.

GitHub's shells::

    (implicit)  bash --noprofile --norc -e <script>
    bash        bash --noprofile --norc -e -o pipefail <script>
    sh          sh -e <script>
    python      python <script>.py        (python3 when the image has no python)
    pwsh        pwsh -command ". '<script>.ps1'"
    cmd, powershell                       Windows only: the step fails with a message
    a template  its words, {0} replaced by the script (``bash -l {0}``, ``Rscript {0}``)

A program the image does not have fails the step with a message naming it.

The script is written by the runner to a new file outside the workspace and passed as an
argument, so its text never appears in argv. Shells are looked up on the image's fixed ``PATH``,
never on one a step changed.
"""

from __future__ import annotations

import os
import shlex
import shutil

from worker.runner.environment import BASE_PATH

SHELLS = ("", "bash", "sh", "python", "pwsh")
WINDOWS_SHELLS = ("cmd", "powershell")
_SUFFIXES = {"python": ".py", "pwsh": ".ps1"}


class ShellError(Exception):
    """The step's shell cannot be started."""


def _program(name: str) -> str:
    found = shutil.which(name, path=BASE_PATH)
    if found is None:
        raise ShellError(f"{name} is not installed in the job image")
    return found


def shell_argv(shell: str, script_path: str) -> list[str]:
    """The argv that runs ``script_path`` with ``shell`` (``""``: the implicit default)."""
    if shell in WINDOWS_SHELLS:
        raise ShellError(f"shell {shell} runs only on Windows; forge-ci jobs run on Linux")
    if "{0}" in shell:
        try:
            words = shlex.split(shell)
        except ValueError as exc:
            raise ShellError(f"shell {shell[:60]!r} cannot be read: {exc}") from None
        if not words:
            raise ShellError("the shell template is empty")
        return [_program(words[0]), *(word.replace("{0}", script_path) for word in words[1:])]
    if shell not in SHELLS:
        raise ShellError(f"shell {shell[:40]!r} is not supported")
    if shell == "python":
        try:
            return [_program("python"), script_path]
        except ShellError:
            return [_program("python3"), script_path]
    if shell == "pwsh":
        return [_program("pwsh"), "-command", f". '{script_path}'"]
    found = _program("sh" if shell == "sh" else "bash")
    if shell == "sh":
        return [found, "-e", script_path]
    options = ["-e", "-o", "pipefail"] if shell == "bash" else ["-e"]
    return [found, "--noprofile", "--norc", *options, script_path]


def script_suffix(shell: str) -> str:
    """The script file's extension (GitHub's: python and pwsh need theirs)."""
    return _SUFFIXES.get(shell, ".sh")


def write_script(directory: str, step_number: int, text: str, suffix: str = ".sh") -> str:
    """Write the script of step ``step_number`` to a new file and return its path."""
    path = os.path.join(directory, f"step-{step_number}{suffix}")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
        handle.write(text)
    return path
