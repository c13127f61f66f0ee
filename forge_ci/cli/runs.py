"""``forge-ci run``: list, show, dispatch, cancel and rerun workflow runs.

The operator acts as a site administrator; the same use cases serve the web and SSH front doors.
"""

from __future__ import annotations

import click

from forge_ci import states
from forge_ci.authz import Actor
from forge_ci.cli.common import echo_json, echo_table, session_scope, settings


@click.group()
def run() -> None:
    """List, show, dispatch, cancel and rerun workflow runs."""


@run.command("list")
@click.argument("full_name", metavar="OWNER/NAME")
@click.option("--limit", default=50, show_default=True, help="How many runs, newest first.")
@click.option("--branch", help="Only runs of this branch.")
@click.option(
    "--workflow", "workflow_path", metavar="PATH", help="Only runs of this workflow file."
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
def run_list(
    full_name: str, limit: int, branch: str | None, workflow_path: str | None, as_json: bool
) -> None:
    """List the runs of OWNER/NAME, newest first."""
    from forge_ci.coordinator.run_report import LIST_COLUMNS, list_rows
    from forge_ci.runs.queries import list_runs

    with session_scope(read_only=True) as session:
        rows = [
            view.as_dict(with_jobs=False)
            for view in list_runs(
                session, Actor.operator(), full_name, limit, branch=branch, workflow=workflow_path
            )
        ]
    if as_json:
        echo_json(rows)
    else:
        echo_table(list_rows(rows), LIST_COLUMNS)


@run.command("show")
@click.argument("full_name", metavar="OWNER/NAME")
@click.argument("number", type=int)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object.")
def run_show(full_name: str, number: int, as_json: bool) -> None:
    """Show run NUMBER of OWNER/NAME with its jobs, and why each queued job waits."""
    from forge_ci.coordinator.run_report import report_lines, run_report

    with session_scope(read_only=True) as session:
        data = run_report(session, Actor.operator(), full_name, number)
    if as_json:
        echo_json(data)
        return
    for line in report_lines(data):
        click.echo(line)


@run.command("dispatch")
@click.argument("full_name", metavar="OWNER/NAME")
@click.option("--branch", required=True, help="An existing branch (not a tag or revision).")
@click.option(
    "--workflow",
    "workflow_path",
    required=True,
    metavar="PATH",
    help="The workflow file, e.g. .github/workflows/ci.yml.",
)
@click.option(
    "--input",
    "input_pairs",
    multiple=True,
    metavar="NAME=VALUE",
    help="A workflow_dispatch input (repeatable); booleans take true or false.",
)
def run_dispatch(
    full_name: str, branch: str, workflow_path: str, input_pairs: tuple[str, ...]
) -> None:
    """Run a workflow that declares workflow_dispatch on BRANCH of OWNER/NAME."""
    from forge_ci.runs.dispatch import dispatch_run, input_values

    inputs = input_values(input_pairs)
    with session_scope() as session:
        created = dispatch_run(
            session, settings(), Actor.operator(), full_name, branch, workflow_path, inputs
        )
        click.echo(
            f"created run #{created.number} of {full_name} ({workflow_path} at "
            f"{created.sha[:12]}): {created.state}"
        )


@run.command("cancel")
@click.argument("full_name", metavar="OWNER/NAME")
@click.argument("number", type=int)
def run_cancel(full_name: str, number: int) -> None:
    """Cancel run NUMBER: queued jobs at once, running jobs on request."""
    from forge_ci.runs.cancel import cancel_run

    with session_scope() as session:
        cancelled = cancel_run(session, Actor.operator(), full_name, number)
        if cancelled.state == states.COMPLETED:
            click.echo(f"run #{number} of {full_name} cancelled")
        else:
            click.echo(
                f"run #{number} of {full_name}: cancellation requested; running jobs are "
                "being stopped"
            )


@run.command("rerun")
@click.argument("full_name", metavar="OWNER/NAME")
@click.argument("number", type=int)
@click.option(
    "--failed",
    "failed_only",
    is_flag=True,
    help="Rerun only failed, cancelled, timed-out or lost jobs and their dependents.",
)
def run_rerun(full_name: str, number: int, failed_only: bool) -> None:
    """Rerun completed run NUMBER from its snapshot (same commit, same workflow)."""
    from forge_ci.runs.rerun import rerun_run

    with session_scope() as session:
        created = rerun_run(
            session, settings(), Actor.operator(), full_name, number, failed_only=failed_only
        )
        click.echo(f"created run #{created.number} of {full_name} (rerun of #{number})")
