"""The benchmarks' steal meter: /proc/stat's cpu line read as the kernel writes it."""

from __future__ import annotations

from pathlib import Path

from forge_ci_testing.machine import StealMeter, cpu_times

# cpu user nice system idle iowait irq softirq steal guest guest_nice
LINE = "cpu  {user} 0 {system} {idle} 0 0 0 {steal} {guest} 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n"


def write(path: Path, user: int, system: int, idle: int, steal: int, guest: int = 0) -> None:
    path.write_text(LINE.format(user=user, system=system, idle=idle, steal=steal, guest=guest))


def test_steal_and_total_come_from_the_all_cpus_line(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    write(stat, user=100, system=50, idle=800, steal=50, guest=30)
    # guest time is already part of user time: counted once.
    assert cpu_times(stat) == (50, 1000)


def test_the_share_is_of_the_time_between_creation_and_reading(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    write(stat, user=100, system=50, idle=800, steal=50)
    meter = StealMeter(stat)
    write(stat, user=400, system=50, idle=1200, steal=350)  # +1,000 jiffies, 300 of them stolen
    assert meter.share() == 0.3


def test_no_time_elapsed_or_no_proc_is_no_steal(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    write(stat, user=1, system=1, idle=1, steal=1)
    assert StealMeter(stat).share() == 0.0
    missing = tmp_path / "missing"
    assert cpu_times(missing) == (0, 0)
    assert StealMeter(missing).share() == 0.0


def test_this_machine_reports_a_share_between_0_and_1() -> None:
    meter = StealMeter()
    sum(range(200_000))
    assert 0.0 <= meter.share() <= 1.0
