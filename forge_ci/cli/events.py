"""``forge-ci events``: what pushes recorded."""

from __future__ import annotations

import click

from forge_ci.authz import Actor
from forge_ci.cli.common import echo_json, echo_table, session_scope, settings


@click.group()
def events() -> None:
    """Inspect push events."""


@events.command("list")
@click.argument("full_name", metavar="OWNER/NAME")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
def events_list(full_name: str, as_json: bool) -> None:
    """List the push events of OWNER/NAME, oldest first."""
    from forge_ci.pushes.events import list_push_events

    with session_scope(read_only=True) as session:
        rows = [e.as_dict() for e in list_push_events(session, Actor.operator(), full_name)]
    if as_json:
        echo_json(rows)
    else:
        for row in rows:
            row["old_sha"] = str(row["old_sha"])[:12]
            row["new_sha"] = str(row["new_sha"])[:12]
        echo_table(rows, ["id", "state", "ref", "old_sha", "new_sha", "pusher", "created_at"])


@events.command("show")
@click.argument("full_name", metavar="OWNER/NAME")
@click.argument("event_id", type=int)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object.")
def events_show(full_name: str, event_id: int, as_json: bool) -> None:
    """Show push event ID of OWNER/NAME and what each workflow file did with it."""
    from forge_ci.runs.queries import show_push_event

    with session_scope(read_only=True) as session:
        data = show_push_event(session, Actor.operator(), full_name, event_id).as_dict()
    if as_json:
        echo_json(data)
        return
    click.echo(
        f"push event {data['id']} of {full_name}: {data['ref']} "
        f"{str(data['old_sha'])[:12]} -> {str(data['new_sha'])[:12]} by {data['pusher']}"
    )
    if data["result"] is None:
        click.echo(f"not processed yet ({data['state']})")
        return
    click.echo(f"{data['result']}: {data['detail']}")
    rows = [
        {
            "workflow": w["workflow_path"],
            "outcome": w["outcome"],
            "run": f"#{w['run']}" if w["run"] is not None else "",
            "detail": w["detail"],
        }
        for w in data["workflows"]
    ]
    if rows:
        echo_table(rows, ["workflow", "outcome", "run", "detail"])


@events.command("resolve")
@click.argument("full_name", metavar="OWNER/NAME")
@click.argument("event_id", type=int)
@click.option(
    "--pushed/--not-pushed",
    required=True,
    help="The push happened (the ref is set to its new value) or it did not (its old value).",
)
def events_resolve(full_name: str, event_id: int, pushed: bool) -> None:
    """Decide a push event that needs inspection: set its ref and settle it.

    For a ref that was moved outside forge-ci while the push was in flight (docs/ssh.md,
    "Recovery"). The value the ref held is printed so that it can be recovered.
    """
    from forge_ci.pushes.inspection import resolve_push_event

    with session_scope() as session:
        verdict = resolve_push_event(
            session, settings(), Actor.operator(), full_name, event_id, pushed=pushed
        )
    was = verdict.was or "(absent)"
    now = verdict.now or "(deleted)"
    click.echo(
        f"push event {verdict.event_id} of {full_name} is {verdict.state}: "
        f"{verdict.ref} was at {was}, now {now}"
    )
