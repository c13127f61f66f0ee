"""Static questions about a parsed expression, asked without evaluating it.

The workflow validator uses them to check which contexts and functions an expression needs where
it appears (status functions only in ``if``, ``needs`` only for jobs that declare it), and the run
creator to find references it resolves on the server (``${{ github.sha }}``). Context names are
returned lowercased; paths keep the spelling of the source, so that messages can quote it (compare
them lowercased: names and object keys are case-insensitive).
"""

from __future__ import annotations

from collections.abc import Iterator

from .nodes import Call, ContextRef, Index, Literal, Node, Wildcard, children


def _walk(root: Node, *, stop_at_paths: bool = False) -> Iterator[Node]:
    """The nodes of the tree in source order (parents first); optionally not inside paths."""
    stack: list[Node | Wildcard] = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, Wildcard):
            continue
        yield node
        if stop_at_paths and as_property_path(node) is not None:
            continue
        stack.extend(reversed(children(node)))


def referenced_contexts(node: Node) -> set[str]:
    """The named values the expression reads, lowercased (``{"github", "matrix"}``)."""
    return {each.name.lower() for each in _walk(node) if isinstance(each, ContextRef)}


def called_functions(node: Node) -> set[str]:
    """The functions the expression calls, in GitHub's spelling (``{"toJSON", "success"}``)."""
    return {each.name for each in _walk(node) if isinstance(each, Call)}


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
    paths: dict[tuple[str, ...], None] = {}
    for each in _walk(node, stop_at_paths=True):
        path = as_property_path(each)
        if path is not None:
            paths.setdefault(path)
    return list(paths)
