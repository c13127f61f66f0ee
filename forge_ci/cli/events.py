"""``forge-ci events``: what pushes recorded."""

from __future__ import annotations

import click

from forge_ci.authz import Actor
from forge_ci.cli.common import echo_json, echo_table, session_scope


@click.group()
def events() -> None:
    """Inspect push events."""


@events.command("list")
@click.argument("full_name", metavar="OWNER/NAME")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
def events_list(full_name: str, as_json: bool) -> None:
    """List the push events of OWNER/NAME, oldest first."""
    from forge_ci.pushes.events import list_push_events

    with session_scope() as session:
        rows = [e.as_dict() for e in list_push_events(session, Actor.operator(), full_name)]
    if as_json:
        echo_json(rows)
    else:
        for row in rows:
            row["old_sha"] = str(row["old_sha"])[:12]
            row["new_sha"] = str(row["new_sha"])[:12]
        echo_table(rows, ["id", "state", "ref", "old_sha", "new_sha", "pusher", "created_at"])
