"""How a ``run`` script is started: the shell's argv, with the script in a file.

GitHub's shells, without custom templates::

    (implicit)  bash --noprofile --norc -e <script>
    bash        bash --noprofile --norc -e -o pipefail <script>
    sh          sh -e <script>

The script is written by the runner to a new file outside the workspace and passed as an
argument, so its text never appears in argv. Shells are looked up on the image's fixed ``PATH``,
never on one a step changed.
"""

from __future__ import annotations

import os
import shutil

from worker.runner.environment import BASE_PATH

SHELLS = ("", "bash", "sh")


class ShellError(Exception):
    """The step's shell cannot be started."""


def shell_argv(shell: str, script_path: str) -> list[str]:
    """The argv that runs ``script_path`` with ``shell`` (``""``: the implicit default)."""
    if shell not in SHELLS:
        raise ShellError(f"shell {shell[:40]!r} is not supported; use bash or sh")
    program = "sh" if shell == "sh" else "bash"
    found = shutil.which(program, path=BASE_PATH)
    if found is None:
        raise ShellError(f"{program} is not installed in the job image")
    if shell == "sh":
        return [found, "-e", script_path]
    options = ["-e", "-o", "pipefail"] if shell == "bash" else ["-e"]
    return [found, "--noprofile", "--norc", *options, script_path]


def write_script(directory: str, step_number: int, text: str) -> str:
    """Write the script of step ``step_number`` to a new file and return its path."""
    path = os.path.join(directory, f"step-{step_number}.sh")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
        handle.write(text)
    return path
