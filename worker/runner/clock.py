"""The runner's clock: monotonic seconds that keep counting while the machine is suspended.

Leases and deadlines are measured on it, never on wall-clock time, which can jump. Linux's
``CLOCK_BOOTTIME`` includes suspended time, so a laptop that slept through a lease does not
believe it still holds one; elsewhere ``time.monotonic`` is the fallback.
"""

from __future__ import annotations

import time

_CLOCK = getattr(time, "CLOCK_BOOTTIME", None)


def now() -> float:
    """Seconds on the runner's clock (only differences mean anything)."""
    if _CLOCK is not None:
        return time.clock_gettime(_CLOCK)
    return time.monotonic()
