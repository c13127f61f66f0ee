"""``permissions``: whether a job may read the repository's source, and what it asked for.

forge-ci issues no GitHub-style token that could do anything but read, so the only scope that
decides something is ``contents``: ``{contents: read}`` (the default) lets the job receive the
pinned source, ``{contents: none}`` or ``{}`` gives it none. Everything else GitHub defines is
accepted and *not granted*: every other scope, any ``write`` access (``contents: write`` keeps
read access) and ``read-all`` / ``write-all`` each give one notice, "this job asked for
id-token: write; forge-ci grants no such token", so a workflow never looks as if it held a
permission it does not have. Unknown scopes and values stay errors.
"""

from __future__ import annotations

from forge_ci.workflow.diagnostics import Problems
from forge_ci.workflow.nodes import Mapping, Node, Scalar, describe

GITHUB_SCOPES = frozenset(
    """actions attestations checks contents deployments discussions id-token issues models
    packages pages pull-requests repository-projects security-events statuses""".split()
)
ACCESS = ("read", "write", "none")
WHOLE = ("read-all", "write-all")


def not_granted(who: str, what: str) -> str:
    """The notice for a permission that is accepted and not granted."""
    return f"this {who} asked for {what}; forge-ci grants no such token"


def parse_permissions(node: Node, problems: Problems, who: str = "workflow") -> str | None:
    """``"read"`` or ``"none"`` for the contents scope; ``None`` when the value is refused.

    ``who`` ("workflow" or "job") names the asker in notices.
    """
    if isinstance(node, Scalar):
        if node.value in WHOLE:
            problems.notice(node, not_granted(who, f"permissions: {node.value}"))
            return "read"
        problems.at(
            node,
            f"permissions must be read-all, write-all or a mapping of scopes, not {describe(node)}",
        )
        return None
    if not isinstance(node, Mapping):
        problems.at(node, f"permissions must be a mapping, not {describe(node)}")
        return None
    contents = "none"
    ok = True
    for key, value in node.items:
        text = value.value if isinstance(value, Scalar) else None
        if key.value not in GITHUB_SCOPES:
            hint = problems.hint(key.value, GITHUB_SCOPES)
            problems.at(key, f"'{key.value}' is not a permission scope{hint}")
            ok = False
        elif text not in ACCESS:
            problems.at(value, f"{key.value} must be read, write or none, not {describe(value)}")
            ok = False
        elif key.value == "contents":
            contents = "read" if text == "write" else text
            if text == "write":
                problems.notice(value, not_granted(who, "contents: write"))
        elif text != "none":
            problems.notice(key, not_granted(who, f"{key.value}: {text}"))
    return contents if ok else None
