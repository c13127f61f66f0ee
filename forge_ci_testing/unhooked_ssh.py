"""``python -m forge_ci_testing.unhooked_ssh OWNER/NAME...``: ``forge-ci ssh`` for the benchmark.

The push benchmark (bench/push_overhead.py) compares a push with the deployment's hooks against
the same push, by the same server process, without them. Pushes to the repositories named here
run without hooks and record nothing; every other repository is served exactly as by
``forge-ci ssh``. This is the only way to start such a server: it is set in Python, never by a
setting or environment variable, so a deployed ``forge-ci ssh`` always requires its hooks.
"""

from __future__ import annotations

import sys

from forge_ci.settings import load_settings
from ssh.server import serve


def main(argv: list[str]) -> None:
    if not argv:
        raise SystemExit("usage: python -m forge_ci_testing.unhooked_ssh OWNER/NAME...")
    serve(load_settings(), unhooked=frozenset(argv))


if __name__ == "__main__":
    main(sys.argv[1:])
