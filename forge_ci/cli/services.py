"""``forge-ci ssh`` and ``forge-ci worker``: the long-running front doors.

Each imports its front door inside the command (the dependency rule: the core never imports a
front door at module level, so ``forge-ci user list`` loads neither paramiko nor RQ).
"""

from __future__ import annotations

import logging

import click

from forge_ci.cli.common import check_database, settings


def _log_to_stderr() -> None:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )


@click.command("ssh")
def ssh_command() -> None:
    """Serve git over SSH on FORGE_CI_SSH_LISTEN until SIGTERM (pushes, clones, fetches)."""
    from ssh.server import serve

    check_database()
    _log_to_stderr()
    serve(settings())


@click.command("worker")
@click.option("--burst", is_flag=True, help="Scan once, run every queued job, then exit.")
@click.option(
    "--scan-interval",
    type=click.FloatRange(min=1.0),
    default=30.0,
    show_default=True,
    help="Seconds between database scans for events Redis does not hold.",
)
@click.option(
    "--processes",
    type=click.IntRange(1, 64),
    default=2,
    show_default=True,
    help="Worker processes; each runs one job at a time, so one hung job stalls only its own.",
)
@click.option(
    "--no-sweeper",
    is_flag=True,
    hidden=True,
    help="Leave the lease sweeper to another process of the pool.",
)
def worker_command(burst: bool, scan_interval: float, processes: int, no_sweeper: bool) -> None:
    """Run RQ jobs (push events) and scan the database for events that were never enqueued."""
    from worker.main import run

    check_database()
    _log_to_stderr()
    if processes > 1 and not burst:
        from worker.pool import run_pool

        raise SystemExit(run_pool(processes, scan_interval))
    run(settings(), burst=burst, scan_interval=scan_interval, sweeper=not no_sweeper)
