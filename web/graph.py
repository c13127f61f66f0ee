"""The job dependency graph of a run, drawn as SVG on the server.

Layout: a job's column is the length of the longest chain of ``needs`` before it, so every edge
points right; a job that others need then moves right to just before the first of them (``lint``
below sits beside ``test``, not under ``build``). Within a column, jobs are ordered by where the
jobs they need sit (then by their order in the workflow), which keeps most edges uncrossed::

    column 0        column 1        column 2
    ┌───────┐       ┌───────┐
    │ build │──────►│ test  │─┐     ┌────────┐
    └───────┘       └───────┘ └────►│ deploy │
                    ┌───────┐ ┌────►└────────┘
                    │ lint  │─┘
                    └───────┘

Each node is a link to the job's log and carries ``data-job`` and a ``status-<status>`` class,
so the page's script can recolour it as the run progresses. All text is escaped.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

from markupsafe import Markup, escape

from forge_ci.runs.details import JobDetail
from web.present import label, status, symbol

NODE_WIDTH = 184
NODE_HEIGHT = 36
COLUMN_GAP = 56
ROW_GAP = 14
PAD = 8
MAX_NAME = 21


def _columns(jobs: Sequence[JobDetail]) -> list[list[JobDetail]]:
    by_id = {job.id: job for job in jobs}
    depth: dict[int, int] = {}

    def depth_of(job: JobDetail, seen: frozenset[int] = frozenset()) -> int:
        if job.id in depth:
            return depth[job.id]
        parents = [by_id[n] for n in job.needs if n in by_id and n not in seen]
        value = 1 + max((depth_of(p, seen | {job.id}) for p in parents), default=-1)
        depth[job.id] = value
        return value

    for job in jobs:
        depth_of(job)
    # A job that others need moves right up to just before the first of them, so that an edge
    # from a short chain does not run across a column of unrelated jobs.
    dependents: dict[int, list[int]] = {job.id: [] for job in jobs}
    for job in jobs:
        for need in job.needs:
            if need in dependents:
                dependents[need].append(job.id)
    for job in sorted(jobs, key=lambda j: -depth[j.id]):
        if dependents[job.id]:
            depth[job.id] = max(depth[job.id], min(depth[d] for d in dependents[job.id]) - 1)
    columns: list[list[JobDetail]] = []
    for job in jobs:
        index = depth[job.id]
        while len(columns) <= index:
            columns.append([])
        columns[index].append(job)
    row: dict[int, int] = {}
    for index, column in enumerate(columns):
        if index > 0:
            order = {job.id: position for position, job in enumerate(column)}
            column.sort(key=functools.partial(_weight, row=row, order=order))
        for position, job in enumerate(column):
            row[job.id] = position
    return columns


def _weight(job: JobDetail, row: dict[int, int], order: dict[int, int]) -> tuple[bool, float, int]:
    """Sort key in a column: jobs fed from the left first, by the mean row of what they need,
    then workflow order (``order``: job id -> its place in the column before sorting)."""
    rows = [row[n] for n in job.needs if n in row]
    return (not rows, sum(rows) / len(rows) if rows else 0.0, order[job.id])


def _short(name: str) -> str:
    return name if len(name) <= MAX_NAME else name[: MAX_NAME - 1] + "…"


def dependency_graph(jobs: Sequence[JobDetail], href: Callable[[JobDetail], str]) -> Markup:
    """The SVG of ``jobs`` and their ``needs`` edges; ``href`` links each node to its job."""
    if not jobs:
        return Markup("")
    columns = _columns(jobs)
    place: dict[int, tuple[int, int]] = {}
    for column_index, column in enumerate(columns):
        for row_index, job in enumerate(column):
            place[job.id] = (
                PAD + column_index * (NODE_WIDTH + COLUMN_GAP),
                PAD + row_index * (NODE_HEIGHT + ROW_GAP),
            )
    width = PAD * 2 + len(columns) * NODE_WIDTH + (len(columns) - 1) * COLUMN_GAP
    rows = max(len(column) for column in columns)
    height = PAD * 2 + rows * NODE_HEIGHT + (rows - 1) * ROW_GAP
    parts = [
        f'<svg class="graph" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="Dependency graph of the run\'s jobs">'
    ]
    for job in jobs:
        x2, y2 = place[job.id]
        for need in job.needs:
            if need not in place:
                continue
            x1, y1 = place[need]
            sx, sy = x1 + NODE_WIDTH, y1 + NODE_HEIGHT // 2
            ex, ey = x2, y2 + NODE_HEIGHT // 2
            bend = COLUMN_GAP // 2 + (ex - sx) // 4
            parts.append(
                f'<path class="edge" data-from="{need}" data-to="{job.id}" '
                f'd="M{sx},{sy} C{sx + bend},{sy} {ex - bend},{ey} {ex},{ey}"/>'
            )
    for job in jobs:
        x, y = place[job.id]
        current = status(job.state, job.conclusion)
        title = f"{job.name}: {label(current)}"
        parts.append(
            f'<a href="{escape(href(job))}" class="node status-{escape(current)}" '
            f'data-job="{job.id}">'
            f"<title>{escape(title)}</title>"
            f'<rect x="{x}" y="{y}" width="{NODE_WIDTH}" height="{NODE_HEIGHT}" rx="6"/>'
            f'<text class="mark" x="{x + 16}" y="{y + NODE_HEIGHT // 2 + 5}" '
            f'text-anchor="middle">{escape(symbol(current))}</text>'
            f'<text class="name" x="{x + 30}" y="{y + NODE_HEIGHT // 2 + 5}">'
            f"{escape(_short(job.name))}</text></a>"
        )
    parts.append("</svg>")
    return Markup("".join(parts))
