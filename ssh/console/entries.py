"""``secret|var list|set|delete``: the secrets store's use cases, values from stdin only.

``ssh git@HOST secret set TOKEN --repo alice/demo --branch main --workflow
.github/workflows/ci.yml --version 0 < token.txt``: the value never appears in the command
(which the server logs) and is read exactly as sent, up to the kind's size limit. An update
with empty standard input keeps the stored value (a value has at least one byte).
"""

from __future__ import annotations

from forge_ci.secrets.rules import SECRET, VARIABLE, Kind, decode_value
from forge_ci.secrets.store import Scope, delete_entry, list_entries, set_entry
from ssh.console.session import Call

COLUMNS = ["name", "branch", "workflow", "version", "updated_at", "updated_by"]


def _kind(call: Call) -> Kind:
    return SECRET if call.args.kind == "secret" else VARIABLE


def entry_list(call: Call) -> int:
    kind = _kind(call)
    with call.session(read_only=True) as (session, actor):
        rows = [e.as_json() for e in list_entries(session, actor, kind, call.args.repo)]
    columns = COLUMNS + (["value"] if kind is VARIABLE else [])
    return call.print(rows, lambda: call.term.table(rows, columns))


def entry_set(call: Call) -> int:
    args, kind = call.args, _kind(call)
    data = call.term.read_stdin(kind.max_value_bytes, f"the {kind.word} value")
    value = None if not data and args.version != "0" else decode_value(kind, data)
    with call.session() as (session, actor):
        entry = set_entry(
            session,
            call.ctx.settings,
            actor,
            kind,
            args.repo,
            args.name,
            Scope(args.branch, args.workflow),
            value,
            args.version,
        )
    return call.print(
        entry.as_json(),
        lambda: call.term.out(
            f"{kind.word} {entry.name} of {args.repo} saved at version {entry.version}"
        ),
    )


def entry_delete(call: Call) -> int:
    args, kind = call.args, _kind(call)
    with call.session() as (session, actor):
        entry = delete_entry(session, actor, kind, args.repo, args.name, args.version)
    return call.print(
        entry.as_json(),
        lambda: call.term.out(
            f"{kind.word} {entry.name} of {args.repo} deleted (version {entry.version})"
        ),
    )
