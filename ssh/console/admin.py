"""``provider ...`` and ``user list``: site administration (the use cases refuse anyone else).

``provider create`` makes the token here, as the web UI does, and prints it once, to the
caller only (it is not stored; the server keeps only its hash, and the command line logged by
the server never contains it).
"""

from __future__ import annotations

from forge_ci.accounts import user_rows
from forge_ci.coordinator.credentials import new_token
from forge_ci.coordinator.providers import (
    ProviderInfo,
    create_provider,
    list_providers,
    pause_provider,
    resume_provider,
    revoke_provider,
    set_provider_access,
    set_provider_labels,
)
from forge_ci.errors import InvalidInput
from ssh.console.session import EXIT_OK, Call

PROVIDER_COLUMNS = [
    "name",
    "state",
    "labels",
    "scope",
    "repositories",
    "active_attempts",
    "last_contact_at",
]
USER_COLUMNS = ["name", "admin", "active", "keys", "created_at"]


def _repositories(value: str) -> list[str]:
    return value.split(",") if value else []


def _show(call: Call, info: ProviderInfo, verb: str, cancelled: int | None = None) -> int:
    data = info.as_dict()
    if cancelled is not None:
        data = {**data, "cancelled_attempts": cancelled}

    def text() -> None:
        call.term.out(
            f"{verb} provider {data['name']} ({data['state']}, labels {data['labels']}, "
            f"repositories {data['repositories'] or '(none)'})"
        )
        if cancelled is not None:
            call.term.out(f"cancelled {cancelled} running attempt(s)")

    return call.print(data, text)


def provider_list(call: Call) -> int:
    with call.session(read_only=True) as (session, actor):
        rows = [info.as_dict() for info in list_providers(session, actor)]
    shown = [{**row, "last_contact_at": row["last_contact_at"] or "never"} for row in rows]
    return call.print(rows, lambda: call.term.table(shown, PROVIDER_COLUMNS))


def provider_create(call: Call) -> int:
    args = call.args
    if args.scope == "all" and args.repositories:
        raise InvalidInput("--scope all applies to every repository; drop --repositories")
    token = new_token()
    with call.session() as (session, actor):
        info = create_provider(
            session,
            actor,
            args.name,
            token,
            args.labels,
            args.scope,
            _repositories(args.repositories),
        )
    if args.json:
        call.term.json({**info.as_dict(), "token": token})
        return EXIT_OK
    _show(call, info, "created")
    call.term.out(f"token (shown only now): {token}")
    return EXIT_OK


def provider_pause(call: Call) -> int:
    with call.session() as (session, actor):
        info = pause_provider(session, actor, call.args.name)
    return _show(call, info, "paused")


def provider_resume(call: Call) -> int:
    with call.session() as (session, actor):
        info = resume_provider(session, actor, call.args.name)
    return _show(call, info, "resumed")


def provider_revoke(call: Call) -> int:
    with call.session() as (session, actor):
        info, cancelled = revoke_provider(session, actor, call.args.name)
    return _show(call, info, "revoked", cancelled)


def provider_labels(call: Call) -> int:
    with call.session() as (session, actor):
        info, cancelled = set_provider_labels(session, actor, call.args.name, call.args.labels)
    return _show(call, info, "updated", cancelled)


def provider_access(call: Call) -> int:
    args = call.args
    if args.scope == "all" and args.repositories:
        raise InvalidInput("--scope all applies to every repository; drop --repositories")
    with call.session() as (session, actor):
        info, cancelled = set_provider_access(
            session, actor, args.name, args.scope, _repositories(args.repositories)
        )
    return _show(call, info, "updated", cancelled)


def user_list(call: Call) -> int:
    with call.session(read_only=True) as (session, actor):
        rows = user_rows(session, actor)
    return call.print(rows, lambda: call.term.table(rows, USER_COLUMNS))
