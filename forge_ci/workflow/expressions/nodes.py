"""The syntax tree of a parsed expression.

Nodes are immutable and carry ``offset``, the 0-based position in the expression text of the token
that introduces them (the literal, the name, the operator, or the ``.`` / ``[`` of an index), so
that an evaluation error can point at the part that failed.

    github.event.labels.*.name == 'bug' && !cancelled()

    Logical('&&')
    +-- Compare('==')
    |   +-- Index .name
    |   |   +-- Index .*  (Wildcard)
    |   |       +-- Index .labels
    |   |           +-- Index .event
    |   |               +-- ContextRef github
    |   +-- Literal 'bug'
    +-- Not
        +-- Call cancelled()

Property access ``a.b`` and index access ``a['b']`` are the same node: an :class:`Index` whose
index is a string :class:`Literal` (``dotted`` only records how it was written).
"""

from __future__ import annotations

from typing import Literal as TypingLiteral

from forge_ci.records import record

#: The value of a literal: null, a boolean, a number (always a float, as in GitHub) or a string.
LiteralValue = None | bool | float | str

CompareOperator = TypingLiteral["==", "!=", "<", "<=", ">", ">="]
LogicalOperator = TypingLiteral["&&", "||"]


@record(frozen=True, slots=True)
class Literal:
    """``null``, ``true``, ``false``, a number or a single-quoted string."""

    offset: int
    value: LiteralValue


@record(frozen=True, slots=True)
class ContextRef:
    """A named value such as ``github`` or ``matrix``; ``name`` is spelled as written."""

    offset: int
    name: str


@record(frozen=True, slots=True)
class Wildcard:
    """The ``*`` of ``a.*`` or ``a[*]``: every element or property value, as a filtered array."""

    offset: int


@record(frozen=True, slots=True)
class Index:
    """``target.name``, ``target[index]`` or ``target.*``."""

    offset: int
    target: Node
    index: Node | Wildcard
    dotted: bool = False


@record(frozen=True, slots=True)
class Not:
    """``!operand``: the negated truthiness of the operand."""

    offset: int
    operand: Node


@record(frozen=True, slots=True)
class Compare:
    """A comparison; GitHub's loose equality and ordering (see ``coercion``)."""

    offset: int
    operator: CompareOperator
    left: Node
    right: Node


@record(frozen=True, slots=True)
class Logical:
    """``a && b && ...`` or ``a || b || ...``; returns the deciding operand's value."""

    offset: int
    operator: LogicalOperator
    operands: tuple[Node, ...]


@record(frozen=True, slots=True)
class Call:
    """A function call; ``name`` is the canonical spelling (``toJSON``, ``startsWith``)."""

    offset: int
    name: str
    args: tuple[Node, ...]


Node = Literal | ContextRef | Index | Not | Compare | Logical | Call


def children(node: Node | Wildcard) -> tuple[Node | Wildcard, ...]:
    """The direct subtrees of a node, in source order."""
    if isinstance(node, Index):
        return (node.target, node.index)
    if isinstance(node, Compare):
        return (node.left, node.right)
    if isinstance(node, Logical):
        return node.operands
    if isinstance(node, Call):
        return node.args
    if isinstance(node, Not):
        return (node.operand,)
    return ()
