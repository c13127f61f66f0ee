"""``forge-ci provider``: register and manage the providers that claim and run jobs.

Tokens are read from a file (``-``: standard input), never from argv, and never printed. The
Docker provider service itself is ``forge-ci provider run`` when this version has it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from forge_ci.authz import Actor
from forge_ci.cli.common import echo_json, echo_table, read_text_file, session_scope
from forge_ci.errors import InvalidInput

SCOPE = click.Choice(["selected", "all"])


def read_token(path: str) -> str:
    """The token in ``path`` (``-``: stdin): 64 lowercase hex characters, one trailing newline."""
    if path == "-":
        text = sys.stdin.read(1024)
    else:
        text = read_text_file(Path(path), "token file")
    token = text.removesuffix("\n").removesuffix("\r")
    from forge_ci.coordinator.credentials import check_token

    return check_token(token, f"the token in {path}")


def _repositories(value: str | None) -> list[str]:
    if value is None or value == "":
        return []
    return value.split(",")


@click.group()
def provider() -> None:
    """Register and manage providers (the machines that run jobs)."""


def _print(info: object, verb: str) -> None:
    data = info.as_dict()  # type: ignore[attr-defined]
    click.echo(
        f"{verb} provider {data['name']} ({data['state']}, labels {data['labels']}, "
        f"repositories {data['repositories'] or '(none)'})"
    )


@provider.command("create")
@click.option("--name", required=True)
@click.option("--token-file", required=True, help="File holding the token (- for stdin).")
@click.option("--labels", required=True, help="Comma-separated, e.g. self-hosted,linux.")
@click.option("--scope", type=SCOPE, default="selected", show_default=True)
@click.option("--repositories", help="Comma-separated OWNER/NAME list (scope selected).")
def provider_create(
    name: str, token_file: str, labels: str, scope: str, repositories: str | None
) -> None:
    """Register a provider with the token in TOKEN_FILE."""
    from forge_ci.coordinator.providers import create_provider

    token = read_token(token_file)
    with session_scope() as session:
        info = create_provider(
            session, Actor.operator(), name, token, labels, scope, _repositories(repositories)
        )
    _print(info, "created")


@provider.command("ensure")
@click.option("--name", required=True)
@click.option("--token-file", required=True, help="File holding the token (- for stdin).")
@click.option("--labels", required=True, help="Labels to have (added to existing ones).")
@click.option("--scope", type=SCOPE, default=None, help="Default: keep (new: selected).")
@click.option("--repositories", help="Repositories to add (scope selected).")
def provider_ensure(
    name: str, token_file: str, labels: str, scope: str | None, repositories: str | None
) -> None:
    """Create the provider or bring it up to this configuration (idempotent)."""
    from forge_ci.coordinator.providers import ensure_provider

    token = read_token(token_file)
    with session_scope() as session:
        info, created = ensure_provider(
            session, Actor.operator(), name, token, labels, scope, _repositories(repositories)
        )
    _print(info, "created" if created else "updated")


@provider.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
def provider_list(as_json: bool) -> None:
    """List providers with their state, labels and scope."""
    from forge_ci.coordinator.providers import list_providers

    with session_scope(read_only=True) as session:
        rows = [info.as_dict() for info in list_providers(session, Actor.operator())]
    if as_json:
        echo_json(rows)
        return
    for row in rows:
        row["last_contact_at"] = row["last_contact_at"] or "never"
    echo_table(
        rows,
        ["name", "state", "labels", "scope", "repositories", "active_attempts", "last_contact_at"],
    )


@provider.command("pause")
@click.argument("name")
def provider_pause(name: str) -> None:
    """Stop NAME from claiming new jobs (running ones continue)."""
    from forge_ci.coordinator.providers import pause_provider

    with session_scope() as session:
        _print(pause_provider(session, Actor.operator(), name), "paused")


@provider.command("resume")
@click.argument("name")
def provider_resume(name: str) -> None:
    """Let a paused provider claim jobs again."""
    from forge_ci.coordinator.providers import resume_provider

    with session_scope() as session:
        _print(resume_provider(session, Actor.operator(), name), "resumed")


@provider.command("revoke")
@click.argument("name")
def provider_revoke(name: str) -> None:
    """Revoke NAME for good: its token stops working and its running jobs are cancelled."""
    from forge_ci.coordinator.providers import revoke_provider

    with session_scope() as session:
        info, cancelled = revoke_provider(session, Actor.operator(), name)
    _print(info, "revoked")
    click.echo(f"cancelled {cancelled} running attempt(s)")


@provider.command("labels")
@click.argument("name")
@click.option("--labels", required=True, help="The new comma-separated label set.")
def provider_labels(name: str, labels: str) -> None:
    """Replace NAME's labels; running work that no longer matches is cancelled."""
    from forge_ci.coordinator.providers import set_provider_labels

    with session_scope() as session:
        info, cancelled = set_provider_labels(session, Actor.operator(), name, labels)
    _print(info, "updated")
    click.echo(f"cancelled {cancelled} running attempt(s) that no longer match")


@provider.command("access")
@click.argument("name")
@click.option("--scope", type=SCOPE, required=True)
@click.option("--repositories", help="Comma-separated OWNER/NAME list (scope selected).")
def provider_access(name: str, scope: str, repositories: str | None) -> None:
    """Replace NAME's repository scope; work outside it is cancelled."""
    from forge_ci.coordinator.providers import set_provider_access

    if scope == "all" and repositories:
        raise InvalidInput("--scope all applies to every repository; drop --repositories")
    with session_scope() as session:
        info, cancelled = set_provider_access(
            session, Actor.operator(), name, scope, _repositories(repositories)
        )
    _print(info, "updated")
    click.echo(f"cancelled {cancelled} running attempt(s) outside the new scope")
