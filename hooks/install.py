"""Installing the deployment's hooks into ``settings.hooks_dir`` (``forge-ci hooks install``).

Every managed repository's ``core.hooksPath`` points at that one directory (set at creation,
re-asserted before each push), so hooks never come from a pushed repository. Each hook file is a
three-line launcher for ``hooks/run.py``::

    #!<this Python> -SI            no site-packages scan, no PYTHON* variables, no user site
    sys.path.insert(0, <the directory holding forge_ci/ and hooks/>)
    from hooks.run import main

``-S -I`` is what keeps a hook's start-up in the low milliseconds; it also means a pusher's
environment cannot steer which code the hook runs.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from forge_ci.errors import ConfigurationError
from forge_ci.hookchecks import REQUIRED_HOOKS
from forge_ci.settings import Settings

#: Linux reads at most this many bytes of a "#!" line (BINPRM_BUF_SIZE).
_MAX_SHEBANG = 255


def code_root() -> Path:
    """The directory that holds the ``hooks`` and ``forge_ci`` packages."""
    return Path(__file__).resolve().parents[1]


def hook_script(python: str, root: Path) -> str:
    """The text of one hook launcher."""
    shebang = f"#!{python} -SI"
    if len(shebang) > _MAX_SHEBANG or any(c.isspace() for c in python):
        raise ConfigurationError(
            f"cannot write git hooks for the Python at {python!r}: its path must have no spaces "
            f"and fit in a {_MAX_SHEBANG}-byte #! line"
        )
    return (
        f"{shebang}\n"
        "# forge-ci deployment hook, written by `forge-ci hooks install`: do not edit.\n"
        "import sys\n"
        f"sys.path.insert(0, {str(root)!r})\n"
        "from hooks.run import main\n"
        "sys.exit(main(sys.argv))\n"
    )


def install_hooks(settings: Settings, python: str | None = None) -> list[Path]:
    """(Re)write every hook into the hooks directory, atomically; return the paths written."""
    directory = settings.hooks_dir
    directory.mkdir(parents=True, exist_ok=True)
    text = hook_script(python or sys.executable, code_root())
    written = []
    for name in REQUIRED_HOOKS:
        path = directory / name
        temporary = directory / f".{name}.tmp-{os.getpid()}"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o755)
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.chmod(temporary, 0o755)  # whatever the umask was
        os.replace(temporary, path)
        written.append(path)
    return written
