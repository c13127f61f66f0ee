"""What the machine itself took from a measurement: the hypervisor's steal time.

On a shared virtual machine the host can run other guests on "our" CPUs; Linux counts that time
as *steal* in /proc/stat. Here it reached 27% in some minutes and 0% in others: a benchmark
that prints the steal share of its run lets the reader tell a slower program from a busier host
(not every slowdown shows as steal: bench/README.md, "Ninth round").
"""

from __future__ import annotations

from pathlib import Path

STAT = Path("/proc/stat")


def cpu_times(stat: Path = STAT) -> tuple[int, int]:
    """(steal, total) jiffies of all CPUs so far; (0, 0) where /proc/stat is missing."""
    try:
        line = stat.read_text().splitlines()[0]
    except OSError:
        return 0, 0
    # cpu user nice system idle iowait irq softirq steal guest guest_nice
    fields = [int(value) for value in line.split()[1:]]
    steal = fields[7] if len(fields) > 7 else 0
    # guest and guest_nice are already counted in user and nice.
    return steal, sum(fields[:8])


class StealMeter:
    """The steal share of all CPUs' time from its creation to each :meth:`share` (0.0 to 1.0)."""

    def __init__(self, stat: Path = STAT) -> None:
        self._stat = stat
        self._steal, self._total = cpu_times(stat)

    def share(self) -> float:
        steal, total = cpu_times(self._stat)
        elapsed = total - self._total
        return (steal - self._steal) / elapsed if elapsed > 0 else 0.0
