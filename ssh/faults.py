"""Fault points for the crash tests (``FORGE_CI_TEST_FAULTS``).

Inert unless the settings carry the named fault, which they only do with ``FORGE_CI_TESTING=1``.
A pause writes ``<run dir>/fault-<name>`` (holding this process id) and waits until the file is
removed, so a test can kill the server at exactly that point, or change the world and let it go
on. A fault can only hold a push up; none skips a check (the benchmark's push without hooks is
not a fault: see ``ServerContext.unhooked``).
"""

from __future__ import annotations

import logging
import os
import time

from forge_ci.settings import Settings

log = logging.getLogger(__name__)


def pause_at(settings: Settings, name: str) -> None:
    """Block here while the test holds this fault point (no-op when it is not configured)."""
    if settings.test_fault(name) is None:
        return
    marker = settings.run_dir / f"fault-{name}"
    log.warning("test fault %s: pausing until %s is removed", name, marker)
    marker.write_text(str(os.getpid()))
    while marker.exists():
        time.sleep(0.01)
