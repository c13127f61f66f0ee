"""``permissions``: whether a job may read the repository's source.

forge-ci issues no GitHub-style token, so the only scope that means anything is ``contents``, and
only read access exists: ``{contents: read}`` (the default) lets the job receive the pinned source,
``{contents: none}`` or ``{}`` gives it none. Every other scope and every write access is refused
rather than ignored, so a workflow never looks like it holds a permission it does not have.
"""

from __future__ import annotations

from forge_ci.workflow.diagnostics import Problems
from forge_ci.workflow.nodes import Mapping, Node, Scalar, describe

GITHUB_SCOPES = frozenset(
    """actions attestations checks contents deployments discussions id-token issues models
    packages pages pull-requests repository-projects security-events statuses""".split()
)


def parse_permissions(node: Node, problems: Problems) -> str | None:
    """``"read"`` or ``"none"`` for the contents scope; ``None`` when the value is refused."""
    if isinstance(node, Scalar):
        problems.at(
            node,
            f"permissions: {node.value} is not supported; use permissions: {{contents: read}} "
            "or permissions: {}",
        )
        return None
    if not isinstance(node, Mapping):
        problems.at(node, f"permissions must be a mapping, not {describe(node)}")
        return None
    contents = "none"
    ok = True
    for key, value in node.items:
        if key.value != "contents":
            known = (
                "a GitHub permission forge-ci does not grant"
                if key.value in GITHUB_SCOPES
                else "not a permission scope"
            )
            problems.at(key, f"'{key.value}' is {known}; only contents can be set")
            ok = False
            continue
        text = value.value if isinstance(value, Scalar) else None
        if text in ("read", "none"):
            contents = text
        elif text == "write":
            problems.at(value, "contents: write is not supported; jobs get read access at most")
            ok = False
        else:
            problems.at(value, f"contents must be read or none, not {describe(value)}")
            ok = False
    return contents if ok else None
