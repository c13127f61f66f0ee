"""``forge-ci repo``: repositories and who may use them."""

from __future__ import annotations

import click

from forge_ci.authz import Actor, Role
from forge_ci.cli.common import echo_json, echo_table, session_scope, settings


@click.group()
def repo() -> None:
    """Manage repositories."""


@repo.command("create")
@click.argument("full_name", metavar="OWNER/NAME")
@click.option("--default-branch", default="main", show_default=True)
def repo_create(full_name: str, default_branch: str) -> None:
    """Create a repository owned by OWNER."""
    from forge_ci.repos import create_repository

    with session_scope() as session:
        created = create_repository(
            session, settings(), Actor.operator(), full_name, default_branch
        )
        click.echo(f"created repository {created.full_name}")
        click.echo(f"push with: git push {settings().ssh_url}/{created.full_name}.git")


@repo.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
def repo_list(as_json: bool) -> None:
    """List repositories."""
    from forge_ci.repos import list_repositories

    with session_scope(read_only=True) as session:
        rows = [r.as_dict() for r in list_repositories(session, Actor.operator())]
    if as_json:
        echo_json(rows)
    else:
        echo_table(rows, ["name", "default_branch", "push_workflows", "scheduled_workflows"])


@repo.command("show")
@click.argument("full_name", metavar="OWNER/NAME")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object.")
def repo_show(full_name: str, as_json: bool) -> None:
    """Show OWNER/NAME: default branch, role, and the push and scheduled workflow switches."""
    from forge_ci.repos import show_repository

    with session_scope(read_only=True) as session:
        info = show_repository(session, Actor.operator(), full_name)
    if as_json:
        echo_json(info.as_dict())
        return
    for line in info.text_lines():
        click.echo(line)


@repo.command("grant")
@click.argument("full_name", metavar="OWNER/NAME")
@click.argument("user_name", metavar="USER")
@click.argument("role", default="read")
def repo_grant(full_name: str, user_name: str, role: str) -> None:
    """Give USER a ROLE (read, write, admin; default read) in OWNER/NAME."""
    from forge_ci.repos import grant

    parsed = Role.parse(role)
    with session_scope() as session:
        grant(session, Actor.operator(), full_name, user_name, parsed)
        click.echo(f"{user_name} now has {parsed.label} access to {full_name}")


@repo.command("revoke")
@click.argument("full_name", metavar="OWNER/NAME")
@click.argument("user_name", metavar="USER")
def repo_revoke(full_name: str, user_name: str) -> None:
    """Remove USER's role in OWNER/NAME."""
    from forge_ci.repos import revoke

    with session_scope() as session:
        revoke(session, Actor.operator(), full_name, user_name)
        click.echo(f"{user_name} no longer has access to {full_name}")


@repo.command("push-workflows")
@click.argument("full_name", metavar="OWNER/NAME")
@click.argument("switch", type=click.Choice(["on", "off"]))
def repo_push_workflows(full_name: str, switch: str) -> None:
    """Let pushes by owners/admins start workflows (on), or stop it (off; the default)."""
    from forge_ci.repos import set_push_workflows

    with session_scope() as session:
        set_push_workflows(session, Actor.operator(), full_name, switch == "on")
    if switch == "on":
        click.echo(
            f"push workflows of {full_name} are on: pushes by owners and admins from now on "
            "start their push workflows (earlier pushes are not replayed)"
        )
    else:
        click.echo(
            f"push workflows of {full_name} are off (runs already created are not cancelled)"
        )


@repo.command("scheduled-workflows")
@click.argument("full_name", metavar="OWNER/NAME")
@click.argument("switch", type=click.Choice(["on", "off"]))
@click.option(
    "--as",
    "requester",
    metavar="USER",
    help="The owner or admin who requests the scheduled runs (default: the repository's owner).",
)
def repo_scheduled_workflows(full_name: str, switch: str, requester: str | None) -> None:
    """Run the on: schedule workflows of the default branch (on), or stop it (off; the default)."""
    from forge_ci.repos import set_scheduled_workflows

    with session_scope() as session:
        repo = set_scheduled_workflows(
            session, Actor.operator(), full_name, switch == "on", requester=requester
        )
        who = repo.scheduled_workflows_requester.name if repo.scheduled_workflows_requester else ""
    if switch == "on":
        click.echo(
            f"scheduled workflows of {full_name} are on, requested by {who}: each matching UTC "
            "minute from now on starts a run of the default branch's current commit (minutes "
            "missed while no worker runs are not replayed)"
        )
    else:
        click.echo(
            f"scheduled workflows of {full_name} are off (runs already created are not cancelled)"
        )


@repo.command("schedules")
@click.argument("full_name", metavar="OWNER/NAME")
@click.option("--limit", default=20, show_default=True, help="How many minutes, newest first.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
def repo_schedules(full_name: str, limit: int, as_json: bool) -> None:
    """List the latest scheduled minutes of OWNER/NAME and what each came to."""
    from forge_ci.runs.scheduled import recent_scheduled_minutes

    with session_scope(read_only=True) as session:
        rows: list[dict[str, object]] = [
            {
                "minute": row.minute.strftime("%Y-%m-%dT%H:%MZ"),
                "workflow_path": row.workflow_path,
                "cron": row.cron,
                "outcome": row.outcome,
                "run": row.run.number if row.run is not None else None,
                "detail": row.detail,
            }
            for row in recent_scheduled_minutes(session, Actor.operator(), full_name, limit)
        ]
    if as_json:
        echo_json(rows)
    else:
        echo_table(rows, ["minute", "workflow_path", "outcome", "run", "detail"])


@repo.command("mirror")
@click.argument("full_name", metavar="OWNER/NAME")
@click.option("--from", "url", required=True, metavar="URL", help="The git URL to mirror.")
@click.option("--prune", is_flag=True, help="Also delete branches and tags the URL no longer has.")
def repo_mirror(full_name: str, url: str, prune: bool) -> None:
    """Create or refresh OWNER/NAME from URL: every branch and tag (actions the forge allows).

    A refresh never deletes a branch or tag without --prune. Runs keep the action commits they
    pinned, whatever a refresh moves or deletes.
    """
    from forge_ci.runs.mirrors import mirror_repository

    with session_scope() as session:
        result = mirror_repository(
            session, settings(), Actor.operator(), full_name, url, prune=prune
        )
    if result.created_owner:
        click.echo(f"created user {full_name.partition('/')[0]} (owner of mirrors, no keys)")
    verb = "created" if result.created_repository else "refreshed"
    click.echo(
        f"{verb} {full_name} from {url}: {len(result.added)} added, {len(result.moved)} moved, "
        f"{len(result.deleted)} deleted"
    )
    for label, refs in (
        ("added", result.added),
        ("moved", result.moved),
        ("deleted", result.deleted),
    ):
        for ref in refs:
            click.echo(f"  {label} {ref}")
