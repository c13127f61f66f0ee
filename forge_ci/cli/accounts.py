"""``forge-ci user`` and ``forge-ci key``: accounts and SSH keys, for operators."""

from __future__ import annotations

from pathlib import Path

import click

from forge_ci.authz import Actor
from forge_ci.cli.common import echo_json, echo_table, read_text_file, session_scope
from forge_ci.errors import InvalidInput


@click.group()
def user() -> None:
    """Manage users."""


@user.command("add")
@click.argument("name")
@click.option("--admin", is_flag=True, help="Make the user a site administrator.")
@click.option(
    "--password-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Read the password from this file (first line). Without it, you are prompted.",
)
@click.option("--no-password", is_flag=True, help="SSH-only account: no web login.")
def user_add(name: str, admin: bool, password_file: Path | None, no_password: bool) -> None:
    """Create user NAME. The password never goes in argv."""
    from forge_ci.accounts import create_user
    from forge_ci.names import check_user_name
    from forge_ci.passwords import check_password_policy

    check_user_name(name)  # refuse a bad name before asking for a password
    password: str | None
    if no_password:
        if password_file:
            raise InvalidInput("--no-password and --password-file exclude each other")
        password = None
    elif password_file is not None:
        lines = read_text_file(password_file, "password file").splitlines()
        password = lines[0] if lines else ""
    else:
        password = click.prompt("Password", hide_input=True, confirmation_prompt=True)
    if password is not None:
        check_password_policy(password)
    with session_scope() as session:
        created = create_user(session, Actor.operator(), name, password, is_admin=admin)
        click.echo(f"created user {created.name}" + (" (site administrator)" if admin else ""))


@user.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
def user_list(as_json: bool) -> None:
    """List users."""
    from forge_ci.accounts import user_rows

    with session_scope(read_only=True) as session:
        rows = user_rows(session, Actor.operator())
    if as_json:
        echo_json(rows)
    else:
        echo_table(rows, ["name", "admin", "active", "keys", "created_at"])


@click.group()
def key() -> None:
    """Manage SSH public keys."""


@key.command("add")
@click.argument("user_name", metavar="USER")
@click.argument("pubkey_file", type=click.Path(dir_okay=False, path_type=Path))
def key_add(user_name: str, pubkey_file: Path) -> None:
    """Add the public key in PUBKEY_FILE to USER."""
    from forge_ci.accounts import add_key

    text = read_text_file(pubkey_file, "public key file")
    with session_scope() as session:
        info = add_key(session, Actor.operator(), user_name, text)
        click.echo(f"added {info.key_type} key {info.fingerprint} to {info.user}")


@key.command("list")
@click.argument("user_name", metavar="[USER]", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
def key_list(user_name: str | None, as_json: bool) -> None:
    """List keys (of USER, or of everyone)."""
    from forge_ci.accounts import list_keys

    with session_scope(read_only=True) as session:
        rows = [k.as_dict() for k in list_keys(session, Actor.operator(), user_name)]
    if as_json:
        echo_json(rows)
    else:
        echo_table(rows, ["id", "user", "type", "bits", "fingerprint", "comment"])


@key.command("remove")
@click.argument("key_ref", metavar="ID|FINGERPRINT")
def key_remove(key_ref: str) -> None:
    """Remove a key by id or SHA256 fingerprint."""
    from forge_ci.accounts import remove_key

    with session_scope() as session:
        info = remove_key(session, Actor.operator(), key_ref)
        click.echo(f"removed key {info.fingerprint} of {info.user}")
