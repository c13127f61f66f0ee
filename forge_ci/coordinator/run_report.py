"""A run as the operator CLI and the SSH-side commands print it: one document, two renderings.

:func:`run_report` is ``run show --json`` (the run with its jobs, and for each queued job why
no provider took it: the run page's explanation); :func:`report_lines` is the text people read.
:func:`list_rows` is ``run list``'s table. Both front doors call these, so their output agrees.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from forge_ci.authz import Actor
from forge_ci.output import table_lines

LIST_COLUMNS = ["number", "state", "conclusion", "workflow_path", "event_name", "branch", "sha"]


def run_report(session: Session, actor: Actor, full_name: str, number: int) -> dict[str, Any]:
    """Run ``number`` with its jobs and their blockers (readers may)."""
    from forge_ci.coordinator.blockers import queue_blockers_by_key
    from forge_ci.runs.queries import show_run

    data = show_run(session, actor, full_name, number).as_dict()
    blockers = queue_blockers_by_key(session, actor, full_name, number)
    for job in data["jobs"]:
        blocker = blockers.get(job["key"])
        job["blocker"] = blocker.as_dict() if blocker is not None else None
        if blocker is not None:
            job["reason"] = blocker.message
    return data


def report_lines(data: dict[str, Any]) -> list[str]:
    """:func:`run_report`'s document as text: a header, then one table row per job."""
    outcome = data["state"] + (f" ({data['conclusion']})" if data["conclusion"] else "")
    lines = [
        f"run #{data['number']} of {data['repository']}: {outcome}",
        f"workflow: {data['workflow_path']}  event: {data['event_name']}",
    ]
    ref = data["ref"].removeprefix("refs/heads/")
    ref = "tag " + ref.removeprefix("refs/tags/") if ref.startswith("refs/tags/") else ref
    lines.append(f"commit:   {data['sha']} ({ref})")
    if data["rerun_of"] is not None:
        lines.append(f"rerun of: #{data['rerun_of']}")
    if data.get("reruns"):
        lines.append("reruns:   " + ", ".join(f"#{n}" for n in data["reruns"]))
    if data["waiting_for_concurrency"]:
        lines.append(f"waiting:  for concurrency group {data['concurrency_group']}")
    if data["cancel_reason"]:
        lines.append(f"cancel:   {data['cancel_reason']}")
    for notice in data["notices"]:
        lines.append(f"notice:   line {notice['line']}: {notice['message']}")
    for job in data["jobs"]:
        environment = job["environment"]
        if environment is not None:
            url = f" ({environment['url']})" if isinstance(environment.get("url"), str) else ""
            lines.append(
                f"environment: {job['key']} deploys to {environment['name']}{url}; "
                "protection rules are not enforced"
            )
    rows = [
        {
            "key": job["key"],
            "state": job["state"],
            "conclusion": job["conclusion"] or "",
            "needs": ",".join(job["needs"]),
            "reason": job["reason"] or "",
        }
        for job in data["jobs"]
    ]
    return lines + table_lines(rows, ["key", "state", "conclusion", "needs", "reason"])


def list_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``run list --json`` rows made readable for :data:`LIST_COLUMNS` (short sha, branch)."""
    return [
        {
            **row,
            "sha": row["sha"][:12],
            "branch": row["ref"].removeprefix("refs/heads/"),
            "conclusion": row["conclusion"] or "",
        }
        for row in rows
    ]
