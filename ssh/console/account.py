"""``help``, ``whoami`` and ``key list|add|remove``: the caller's own account."""

from __future__ import annotations

from forge_ci.accounts import add_key, list_keys, remove_key
from ssh.console.catalog import COMMANDS
from ssh.console.parser import help_lines
from ssh.console.session import EXIT_OK, Call

#: A public key line is far shorter (an RSA 16384-bit key is about 2.8 KiB).
MAX_PUBLIC_KEY_BYTES = 16 * 1024
KEY_COLUMNS = ["id", "type", "bits", "fingerprint", "comment"]


def show_help(call: Call) -> int:
    call.term.lines(help_lines(COMMANDS, call.args.topic))
    return EXIT_OK


def whoami(call: Call) -> int:
    with call.session(read_only=True) as (_, actor):
        data = {
            "name": actor.name,
            "fingerprint": call.pusher.fingerprint,
            "admin": actor.is_site_admin,
        }
    role = "a site administrator" if data["admin"] else "not a site administrator"
    return call.print(
        data, lambda: call.term.out(f"{data['name']} (key {data['fingerprint']}), {role}")
    )


def key_list(call: Call) -> int:
    with call.session(read_only=True) as (session, actor):
        rows = [k.as_dict() for k in list_keys(session, actor, actor.name)]
    for row in rows:
        row["in_use"] = row["fingerprint"] == call.pusher.fingerprint
    return call.print(rows, lambda: call.term.table(rows, [*KEY_COLUMNS, "in_use"]))


def key_add(call: Call) -> int:
    data = call.term.read_stdin(MAX_PUBLIC_KEY_BYTES, "the public key")
    text = data.decode("utf-8", "replace")
    with call.session() as (session, actor):
        info = add_key(session, actor, actor.name, text)
    return call.print(
        info.as_dict(),
        lambda: call.term.out(f"added {info.key_type} key {info.fingerprint} to {info.user}"),
    )


def key_remove(call: Call) -> int:
    with call.session() as (session, actor):
        info = remove_key(session, actor, call.args.key_ref, in_use=call.pusher.fingerprint)
    return call.print(
        info.as_dict(), lambda: call.term.out(f"removed key {info.fingerprint} of {info.user}")
    )
