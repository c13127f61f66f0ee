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
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
def run_list(full_name: str, limit: int, as_json: bool) -> None:
    """List the runs of OWNER/NAME, newest first."""
    from forge_ci.runs.queries import list_runs

    with session_scope(read_only=True) as session:
        rows = [
            view.as_dict(with_jobs=False)
            for view in list_runs(session, Actor.operator(), full_name, limit)
        ]
    if as_json:
        echo_json(rows)
        return
    for row in rows:
        row["sha"] = row["sha"][:12]
        row["branch"] = row["ref"].removeprefix("refs/heads/")
        row["conclusion"] = row["conclusion"] or ""
    echo_table(
        rows, ["number", "state", "conclusion", "workflow_path", "event_name", "branch", "sha"]
    )


@run.command("show")
@click.argument("full_name", metavar="OWNER/NAME")
@click.argument("number", type=int)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object.")
def run_show(full_name: str, number: int, as_json: bool) -> None:
    """Show run NUMBER of OWNER/NAME with its jobs, and why each queued job waits."""
    from forge_ci.coordinator.blockers import queue_blockers_by_key
    from forge_ci.runs.queries import show_run

    with session_scope(read_only=True) as session:
        data = show_run(session, Actor.operator(), full_name, number).as_dict()
        # The same explanation as the run page's: queued jobs say why no provider took them.
        blockers = queue_blockers_by_key(session, Actor.operator(), full_name, number)
    for job in data["jobs"]:
        blocker = blockers.get(job["key"])
        job["blocker"] = blocker.as_dict() if blocker is not None else None
        if blocker is not None:
            job["reason"] = blocker.message
    if as_json:
        echo_json(data)
        return
    outcome = data["state"] + (f" ({data['conclusion']})" if data["conclusion"] else "")
    click.echo(f"run #{data['number']} of {data['repository']}: {outcome}")
    click.echo(f"workflow: {data['workflow_path']}  event: {data['event_name']}")
    ref = data["ref"].removeprefix("refs/heads/")
    ref = "tag " + ref.removeprefix("refs/tags/") if ref.startswith("refs/tags/") else ref
    click.echo(f"commit:   {data['sha']} ({ref})")
    if data["rerun_of"] is not None:
        click.echo(f"rerun of: #{data['rerun_of']}")
    if data.get("reruns"):
        click.echo("reruns:   " + ", ".join(f"#{n}" for n in data["reruns"]))
    if data["waiting_for_concurrency"]:
        click.echo(f"waiting:  for concurrency group {data['concurrency_group']}")
    if data["cancel_reason"]:
        click.echo(f"cancel:   {data['cancel_reason']}")
    for notice in data["notices"]:
        click.echo(f"notice:   line {notice['line']}: {notice['message']}")
    for job in data["jobs"]:
        environment = job["environment"]
        if environment is not None:
            url = f" ({environment['url']})" if isinstance(environment.get("url"), str) else ""
            click.echo(
                f"environment: {job['key']} deploys to {environment['name']}{url}; "
                "protection rules are not enforced"
            )
    rows = [
        {
            "key": job["key"],
            "state": job["state"],
            "conclusion": job["conclusion"] or "",
            "needs": ",".join(job["needs"]),
            "reason": job["reason"] or "",
        }
        for job in data["jobs"]
    ]
    echo_table(rows, ["key", "state", "conclusion", "needs", "reason"])


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
    from forge_ci.runs.dispatch import dispatch_run

    inputs = _input_values(input_pairs)
    with session_scope() as session:
        created = dispatch_run(
            session, settings(), Actor.operator(), full_name, branch, workflow_path, inputs
        )
        click.echo(
            f"created run #{created.number} of {full_name} ({workflow_path} at "
            f"{created.sha[:12]}): {created.state}"
        )


def _input_values(pairs: tuple[str, ...]) -> dict[str, str]:
    """``--input NAME=VALUE`` options as a mapping; a pair without ``=`` or a repeated name
    is refused (exit status 2) before anything is read."""
    values: dict[str, str] = {}
    for pair in pairs:
        name, equals, value = pair.partition("=")
        if not equals or not name:
            raise click.BadParameter(f"give NAME=VALUE, not {pair!r}", param_hint="--input")
        if name in values:
            raise click.BadParameter(f"the input {name!r} is given twice", param_hint="--input")
        values[name] = value
    return values


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
