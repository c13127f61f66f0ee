"""Are the deployment's hooks in place? Checked before every push (fail closed).

Without ``pre-receive`` a push would move refs that no intent records, or write forge-ci's own
namespace. So a missing, non-executable or tamperable hook refuses the push before
``git receive-pack`` starts. So does a ``reference-transaction`` hook left by an earlier forge-ci:
git would start it twice for every ref of a push, and this version no longer answers it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from forge_ci.errors import Unavailable

REQUIRED_HOOKS = ("pre-receive",)
#: Hooks earlier versions installed; ``forge-ci hooks install`` removes them.
RETIRED_HOOKS = ("reference-transaction",)


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
    for name in RETIRED_HOOKS:
        if os.path.lexists(hooks_dir / name):
            problems.append(f"{name} is left from an earlier forge-ci version")
    return problems


def require_hooks(hooks_dir: Path) -> None:
    """Raise Unavailable, naming each problem and the fix, unless every hook is ready."""
    problems = hook_problems(hooks_dir)
    if problems:
        raise Unavailable(
            "pushes are refused: the server's git hooks are not ready ("
            + "; ".join(problems)
            + "); an operator must run `forge-ci hooks install`"
        )
