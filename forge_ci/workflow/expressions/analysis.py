"""Static questions about a parsed expression, asked without evaluating it.

The workflow validator uses them to check which contexts and functions an expression needs where
it appears (status functions only in ``if``, ``needs`` only for jobs that declare it), and the run
creator to find references it resolves on the server (``${{ github.sha }}``). Context names are
returned lowercased; paths keep the spelling of the source, so that messages can quote it (compare
them lowercased: names and object keys are case-insensitive).
"""

from __future__ import annotations

from .nodes import Call, Compare, ContextRef, Index, Literal, Logical, Node, Not, Wildcard


def _nodes(root: Node, *, whole_paths: bool = False) -> list[Node]:
    """Every node of the tree, in no particular order.

    With ``whole_paths``, the nodes inside a static property path are left out: the path's
    outermost node stands for all of it.
    """
    found: list[Node] = []
    stack: list[Node] = [root]
    while stack:
        node = stack.pop()
        found.append(node)
        if isinstance(node, Index):
            if whole_paths and as_property_path(node) is not None:
                continue
            stack.append(node.target)
            if not isinstance(node.index, Wildcard):
                stack.append(node.index)
        elif isinstance(node, Compare):
            stack += (node.left, node.right)
        elif isinstance(node, Logical):
            stack += node.operands
        elif isinstance(node, Call):
            stack += node.args
        elif isinstance(node, Not):
            stack.append(node.operand)
    return found


def referenced_contexts(node: Node) -> set[str]:
    """The named values the expression reads, lowercased (``{"github", "matrix"}``)."""
    return {each.name.lower() for each in _nodes(node) if isinstance(each, ContextRef)}


def called_functions(node: Node) -> set[str]:
    """The functions the expression calls, in GitHub's spelling (``{"toJSON", "success"}``)."""
    return {each.name for each in _nodes(node) if isinstance(each, Call)}


def as_property_path(node: Node) -> tuple[str, ...] | None:
    """The path when ``node`` is only a named value with static property accesses, else None.

    ``github.sha`` and ``github['sha']`` are ``("github", "sha")`` (``GitHub.SHA`` is
    ``("GitHub", "SHA")``); ``github.event.*``, ``a[0]`` or ``a[b]`` are not static paths.
    """
    names: list[str] = []
    while isinstance(node, Index):
        index = node.index
        if not (isinstance(index, Literal) and isinstance(index.value, str)):
            return None
        names.append(index.value)
        node = node.target
    if not isinstance(node, ContextRef):
        return None
    names.append(node.name)
    names.reverse()
    return tuple(names)


def referenced_paths(node: Node) -> list[tuple[str, ...]]:
    """The longest static property paths the expression reads, in source order, once each.

    Paths are spelled as written (see :func:`as_property_path`); the same path written twice
    with the same spelling is listed once.

    ``github.event.pull_request.head.sha == github['sha']`` gives
    ``[("github", "event", "pull_request", "head", "sha"), ("github", "sha")]``; a dynamic or
    wildcard access ends a path there (``steps[x].outputs`` gives ``("steps",)`` and ``("x",)``).
    """
    starts: dict[tuple[str, ...], int] = {}
    for each in _nodes(node, whole_paths=True):
        if isinstance(each, Index | ContextRef):
            path = as_property_path(each)
            if path is not None:
                start = _start(each)
                starts[path] = min(starts.get(path, start), start)
    return sorted(starts, key=starts.__getitem__)


def _start(node: Node) -> int:
    """Where a property path starts in the source: the offset of its named value."""
    while isinstance(node, Index):
        node = node.target
    return node.offset
