"""``repo list``, ``repo show`` and ``workflows OWNER/NAME push|schedule on|off``."""

from __future__ import annotations

from forge_ci.repos import (
    list_repositories,
    set_push_workflows,
    set_scheduled_workflows,
    show_repository,
)
from ssh.console.session import Call

REPO_COLUMNS = ["name", "role", "default_branch", "push_workflows", "scheduled_workflows"]


def repo_list(call: Call) -> int:
    with call.session(read_only=True) as (session, actor):
        rows = [r.as_dict() for r in list_repositories(session, actor)]
    return call.print(rows, lambda: call.term.table(rows, REPO_COLUMNS))


def repo_show(call: Call) -> int:
    with call.session(read_only=True) as (session, actor):
        info = show_repository(session, actor, call.args.full_name)
    return call.print(info.as_dict(), lambda: call.term.lines(info.text_lines()))


def workflows(call: Call) -> int:
    """The switches of ``forge-ci repo push-workflows|scheduled-workflows``, as the caller."""
    full_name, on = call.args.full_name, call.args.switch == "on"
    with call.session() as (session, actor):
        if call.args.which == "push":
            set_push_workflows(session, actor, full_name, on)
        else:
            set_scheduled_workflows(session, actor, full_name, on)
        info = show_repository(session, actor, full_name)
    what = "push workflows" if call.args.which == "push" else "scheduled workflows"
    return call.print(
        info.as_dict(), lambda: call.term.out(f"{what} of {full_name} are {call.args.switch}")
    )
