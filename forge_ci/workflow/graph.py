"""The job dependency graph: ``needs`` must form a DAG.

Unknown job names are reported where ``needs`` is read (``jobs``); this module finds cycles and
names each one by its jobs in order (``a -> b -> a``), located at the ``needs`` entry that closes
it in the job written first, so the author sees the whole loop in one message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from forge_ci.workflow.diagnostics import Problems
from forge_ci.workflow.nodes import Scalar


def check_cycles(
    order: Sequence[str],
    needs: Mapping[str, Sequence[tuple[str, Scalar]]],
    problems: Problems,
) -> bool:
    """Report every dependency cycle among jobs in ``order``; True when there is none."""
    position = {job: index for index, job in enumerate(order)}
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    reported: set[frozenset[str]] = set()
    found = False
    for root in order:
        if state.get(root):
            continue
        # Iterative DFS: ``path`` is the current chain, ``iters`` the next edge to try per job.
        path = [root]
        iters = [0]
        state[root] = 1
        while path:
            job = path[-1]
            edges = needs.get(job, ())
            if iters[-1] >= len(edges):
                state[job] = 2
                path.pop()
                iters.pop()
                continue
            target, _ = edges[iters[-1]]
            iters[-1] += 1
            if state.get(target) == 1:
                cycle = path[path.index(target) :]
                members = frozenset(cycle)
                if members not in reported:
                    reported.add(members)
                    found = True
                    _report(cycle, position, needs, problems)
            elif not state.get(target) and target in position:
                state[target] = 1
                path.append(target)
                iters.append(0)
    return not found


def _report(
    cycle: list[str],
    position: Mapping[str, int],
    needs: Mapping[str, Sequence[tuple[str, Scalar]]],
    problems: Problems,
) -> None:
    start = min(range(len(cycle)), key=lambda i: position[cycle[i]])
    ordered = cycle[start:] + cycle[:start]
    first, second = ordered[0], ordered[1] if len(ordered) > 1 else ordered[0]
    where = next(node for name, node in needs[first] if name == second)
    loop = " -> ".join(ordered + [first])
    problems.at(where, f"jobs depend on each other in a cycle: {loop}")
