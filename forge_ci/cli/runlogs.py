"""``forge-ci run logs OWNER/NAME NUMBER [--job J] [--follow]`` and ``forge-ci run watch``.

Lines are printed as ``<job key> | <text>``, which defuses workflow commands such as
``::error::`` (see :mod:`forge_ci.coordinator.follow`, shared with ``ssh git@HOST run logs``).
With ``--follow`` the command keeps printing until the run has completed, then exits 0 only
when it succeeded; any other ending (failure, cancelled, lost, timed out, skipped, anything
unknown) exits 1 and says which.
"""

from __future__ import annotations

import click

from forge_ci.authz import Actor
from forge_ci.cli.common import open_database, settings

EXIT_UNSUCCESSFUL = 1


def _print_logs(
    full_name: str, number: int, follow: bool, job: str | None, interval: float
) -> None:
    from forge_ci.coordinator.follow import follow_logs, verdict_line

    database = open_database()
    try:
        outcome = follow_logs(
            database.session,
            Actor.operator(),
            full_name,
            number,
            follow=follow,
            echo=click.echo,
            job=job,
            interval=interval,
        )
    finally:
        database.dispose()
    if not follow:
        return
    click.echo(verdict_line(full_name, number, outcome), err=True)
    if not outcome.succeeded:
        raise click.exceptions.Exit(EXIT_UNSUCCESSFUL)


@click.command("logs")
@click.argument("full_name", metavar="OWNER/NAME")
@click.argument("number", type=int)
@click.option("--job", help="Only this job's logs (its key, as run show lists it).")
@click.option(
    "--follow", is_flag=True, help="Keep printing until the run ends; exit 0 only on success."
)
@click.option("--interval", type=float, default=1.0, hidden=True)
def logs(full_name: str, number: int, job: str | None, follow: bool, interval: float) -> None:
    """Print the logs of run NUMBER of OWNER/NAME."""
    _print_logs(full_name, number, follow, job, interval)


@click.command("watch")
@click.argument("full_name", metavar="OWNER/NAME")
@click.option("--interval", type=float, default=1.0, hidden=True)
def watch(full_name: str, interval: float) -> None:
    """Follow the newest run of OWNER/NAME until it ends; exit 0 only on success."""
    from forge_ci.coordinator.follow import NoRunToWatch, watch_target

    database = open_database()
    try:
        number = watch_target(
            database.session,
            Actor.operator(),
            full_name,
            settings().public_url,
            note=lambda line: click.echo(line, err=True),
            interval=interval,
        )
    except NoRunToWatch as exc:
        click.echo(exc.reason, err=True)
        raise click.exceptions.Exit(EXIT_UNSUCCESSFUL) from None
    finally:
        database.dispose()
    click.echo(f"following run #{number} of {full_name}", err=True)
    _print_logs(full_name, number, True, None, interval)
