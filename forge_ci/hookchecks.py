"""Are the deployment's hooks in place? Checked before every push (fail closed).

Without ``reference-transaction`` a push would move refs that no event records; without
``pre-receive`` it could write forge-ci's own namespace. So a missing, non-executable or
tamperable hook refuses the push before ``git receive-pack`` starts. So does a git older than
2.28, which never runs ``reference-transaction``: pushes would succeed and record nothing.
"""

from __future__ import annotations

import functools
import os
import re
import stat
import subprocess
from pathlib import Path

from forge_ci.errors import Unavailable

REQUIRED_HOOKS = ("pre-receive", "reference-transaction")
#: git runs the reference-transaction hook from this version on.
MIN_GIT = (2, 28)


@functools.cache
def git_problem() -> str | None:
    """What is wrong with this machine's ``git`` for recording pushes (None: fine).

    Asked once per process: upgrading git needs a restart of the SSH server to be noticed.
    """
    try:
        result = subprocess.run(
            ["git", "--version"], capture_output=True, text=True, timeout=30, check=True
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"git cannot be run ({exc})"
    found = re.search(r"(\d+)\.(\d+)", result.stdout)
    if found is None:
        return f"cannot tell git's version from {result.stdout.strip()[:100]!r}"
    if (int(found[1]), int(found[2])) < MIN_GIT:
        return (
            f"git {found[0]} is too old: recording pushes needs the reference-transaction "
            f"hook of git {MIN_GIT[0]}.{MIN_GIT[1]} or newer; an operator must upgrade git"
        )
    return None


def hook_problems(hooks_dir: Path) -> list[str]:
    """What is wrong with the installed hooks, one line each (empty: ready)."""
    problems = []
    for name in REQUIRED_HOOKS:
        path = hooks_dir / name
        try:
            info = path.stat()
        except FileNotFoundError:
            problems.append(f"{name} is missing")
            continue
        except OSError as exc:
            problems.append(f"{name} cannot be read ({exc.strerror})")
            continue
        if not stat.S_ISREG(info.st_mode):
            problems.append(f"{name} is not a regular file")
        elif not os.access(path, os.X_OK):
            problems.append(f"{name} is not executable")
        elif info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            # Anyone who can rewrite a hook runs code in every push: refuse rather than trust it.
            problems.append(f"{name} is writable by group or others")
    return problems


def require_hooks(hooks_dir: Path) -> None:
    """Raise Unavailable, naming each problem and the fix, unless git and every hook are ready."""
    problem = git_problem()
    if problem is not None:
        raise Unavailable(f"pushes are refused: {problem}")
    problems = hook_problems(hooks_dir)
    if problems:
        raise Unavailable(
            "pushes are refused: the server's git hooks are not ready ("
            + "; ".join(problems)
            + "); an operator must run `forge-ci hooks install`"
        )
