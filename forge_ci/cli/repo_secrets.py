"""``forge-ci secret`` and ``forge-ci var``: repository secrets and variables.

Values come only from a file (``--body-file PATH``) or standard input (``--body-file -``),
never from the command line, where ``ps`` and shell histories would show them. Versions are
the decimal strings ``list`` prints: ``0`` creates, the listed version updates or deletes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from forge_ci.authz import Actor
from forge_ci.cli.common import echo_json, echo_table, session_scope, settings


def _read_value(kind_word: str, body_file: str | None) -> str | None:
    from forge_ci.errors import InvalidInput
    from forge_ci.secrets.rules import SECRET, VARIABLE, decode_value

    kind = SECRET if kind_word == "secret" else VARIABLE
    if body_file is None:
        return None
    limit = kind.max_value_bytes + 1
    if body_file == "-":
        data = sys.stdin.buffer.read(limit)
    else:
        path = Path(body_file)
        try:
            with path.open("rb") as handle:
                data = handle.read(limit)
        except FileNotFoundError:
            raise InvalidInput(f"the {kind.word} value file {path} does not exist") from None
        except OSError as exc:
            raise InvalidInput(f"cannot read the {kind.word} file {path}: {exc.strerror}") from None
    return decode_value(kind, data)


def _group(kind_word: str, scope_required: bool) -> click.Group:
    plural = f"{kind_word}s"

    @click.group(name=kind_word if kind_word == "secret" else "var")
    def group() -> None:
        """(Help set below: the secret and var groups share these commands.)"""

    group.help = (
        "Manage repository secrets (sealed; never shown)."
        if kind_word == "secret"
        else "Manage repository variables (the vars context; not secret)."
    )

    @group.command("set")
    @click.argument("name")
    @click.option("--repo", "full_name", required=True, metavar="OWNER/NAME")
    @click.option("--branch", required=scope_required, help="The one branch that may use it.")
    @click.option("--workflow", required=scope_required, help="The one workflow file (path).")
    @click.option(
        "--body-file",
        metavar="PATH|-",
        help="Read the value from PATH, or '-' for standard input; omit on an update to keep it.",
    )
    @click.option("--version", required=True, help="0 to create; the listed version to update.")
    def set_command(
        name: str,
        full_name: str,
        branch: str | None,
        workflow: str | None,
        body_file: str | None,
        version: str,
    ) -> None:
        from forge_ci.secrets.rules import SECRET, VARIABLE
        from forge_ci.secrets.store import Scope, set_entry

        kind = SECRET if kind_word == "secret" else VARIABLE
        value = _read_value(kind_word, body_file)
        with session_scope() as session:
            entry = set_entry(
                session,
                settings(),
                Actor.operator(),
                kind,
                full_name,
                name,
                Scope(branch, workflow),
                value,
                version,
            )
        click.echo(f"{kind_word} {entry.name} of {full_name} saved at version {entry.version}")

    set_command.help = f"Create (--version 0) or update a {kind_word} of a repository."

    @group.command("list")
    @click.option("--repo", "full_name", required=True, metavar="OWNER/NAME")
    @click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
    def list_command(full_name: str, as_json: bool) -> None:
        from forge_ci.secrets.rules import SECRET, VARIABLE
        from forge_ci.secrets.store import list_entries

        kind = SECRET if kind_word == "secret" else VARIABLE
        with session_scope(read_only=True) as session:
            rows = [e.as_json() for e in list_entries(session, Actor.operator(), kind, full_name)]
        if as_json:
            echo_json(rows)
        else:
            columns = ["name", "branch", "workflow", "version", "updated_at", "updated_by"]
            echo_table(rows, columns + (["value"] if kind_word == "variable" else []))

    list_command.help = f"List the {plural} of a repository (secret values are never shown)."

    @group.command("delete")
    @click.argument("name")
    @click.option("--repo", "full_name", required=True, metavar="OWNER/NAME")
    @click.option("--version", required=True, help="The version shown by list.")
    def delete_command(name: str, full_name: str, version: str) -> None:
        from forge_ci.secrets.rules import SECRET, VARIABLE
        from forge_ci.secrets.store import delete_entry

        kind = SECRET if kind_word == "secret" else VARIABLE
        with session_scope() as session:
            entry = delete_entry(session, Actor.operator(), kind, full_name, name, version)
        click.echo(f"{kind_word} {entry.name} of {full_name} deleted (version {entry.version})")

    delete_command.help = f"Delete a {kind_word} of a repository at the listed version."
    return group


secret = _group("secret", scope_required=True)
var = _group("variable", scope_required=False)


@secret.command("audit")
@click.option("--repo", "full_name", required=True, metavar="OWNER/NAME")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
def secret_audit(full_name: str, as_json: bool) -> None:
    """Show the latest changes of a repository's secrets and variables (never values)."""
    from forge_ci.secrets.store import audit_log

    with session_scope(read_only=True) as session:
        rows = [
            {
                "at": a.at.isoformat(timespec="seconds"),
                "kind": a.kind,
                "name": a.name,
                "action": a.action,
                "version": str(a.version),
                "scope": a.scope,
                "value_changed": a.value_changed,
                "by": a.actor,
            }
            for a in audit_log(session, Actor.operator(), full_name)
        ]
    if as_json:
        echo_json(rows)
    else:
        echo_table(rows, ["at", "kind", "name", "action", "version", "scope", "by"])


@secret.command("rotate-key")
def secret_rotate_key() -> None:
    """Seal every stored secret under a new key in the key file, then drop the old key."""
    from forge_ci.secrets.rotation import rotate_key

    with session_scope() as session:
        rotation = rotate_key(session, settings(), Actor.operator())
    click.echo(
        f"re-sealed {rotation.resealed} secret(s) under key {rotation.key_id} in "
        f"{settings().sealing_key_path}; back up the new key file now"
    )
