"""Strings with embedded ``${{ ... }}`` expressions, as workflow values are written.

``split_template`` finds each expression the way GitHub's template reader does: from ``${{`` to
the first ``}}`` that is not inside a single-quoted string literal, so ``${{ '}}' }}`` is one
expression. An unclosed ``${{`` and an empty ``${{ }}`` are errors; there is no escape for a
literal ``${{`` other than writing it as an expression (``${{ '${{' }}``).

``render_template`` evaluates the parts at run time and joins them as GitHub's ``format`` does.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Final

from forge_ci.records import record

from .coercion import ARRAY, OBJECT, kind_of, to_string
from .errors import ExpressionError
from .evaluator import evaluate
from .functions import FileHasher
from .nodes import Node
from .parser import parse_expression
from .status import JobStatus

_OPEN: Final = "${{"


@record(frozen=True, slots=True)
class TemplateExpr:
    """One ``${{ ... }}`` of a template: its trimmed source, where it starts, and its tree."""

    source: str
    #: 0-based offset of ``source`` in the template text.
    offset: int
    node: Node


def split_template(
    text: str, *, allowed_contexts: Collection[str] | None = None
) -> list[str | TemplateExpr]:
    """Literal text and expressions of ``text``, in order (no empty literal parts).

    Errors are ExpressionErrors whose offset is in ``text``.
    """
    parts: list[str | TemplateExpr] = []
    position = 0
    start = text.find(_OPEN)
    while start >= 0:
        if start > position:
            parts.append(text[position:start])
        end = _find_close(text, start + len(_OPEN))
        if end < 0:
            raise ExpressionError(
                "parsing",
                "The expression is not closed. An unescaped ${{ sequence was found, but the "
                "closing }} sequence was not found",
                start,
                text,
            )
        raw = text[start + len(_OPEN) : end]
        source = raw.strip()
        offset = start + len(_OPEN) + (len(raw) - len(raw.lstrip()))
        if not source:
            raise ExpressionError("parsing", "An expression was expected", start, text)
        try:
            node = parse_expression(source, allowed_contexts=allowed_contexts)
        except ExpressionError as error:
            raise error.located(text, offset) from None
        parts.append(TemplateExpr(source, offset, node))
        position = end + 2
        start = text.find(_OPEN, position)
    if position < len(text):
        parts.append(text[position:])
    return parts


def _find_close(text: str, start: int) -> int:
    """Offset of the ``}}`` ending an expression whose source begins at ``start``, or -1."""
    position = start
    while True:
        close = text.find("}}", position)
        quote = text.find("'", position)
        if quote < 0 or 0 <= close < quote:
            return close
        # Skip the string literal; its '' escapes are two adjacent literals, so need no case.
        end_of_string = text.find("'", quote + 1)
        if end_of_string < 0:
            return -1
        position = end_of_string + 1


def render_template(
    parts: Sequence[str | TemplateExpr],
    contexts: Mapping[str, Any],
    *,
    status: JobStatus | None = None,
    files: FileHasher | None = None,
) -> str:
    """The string value of a split template, evaluating its expressions against ``contexts``.

    Values become strings as in ``format`` (null is empty, numbers as GitHub prints them). A
    template that is one expression whose value is an object or array is an error, as in GitHub:
    such a value has no string form there; embedded in text it reads ``Object`` / ``Array``.
    Evaluation errors are located in the failing expression's source.
    """
    if len(parts) == 1 and isinstance(parts[0], TemplateExpr):
        only = parts[0]
        value = evaluate(only.node, contexts, status=status, expression=only.source, files=files)
        kind = kind_of(value)
        if kind == OBJECT or kind == ARRAY:
            what = "A mapping" if kind == OBJECT else "A sequence"
            raise ExpressionError(
                "evaluation", f"{what} was not expected", only.offset, only.source
            )
        return to_string(value)
    pieces: list[str] = []
    for part in parts:
        if isinstance(part, str):
            pieces.append(part)
        else:
            value = evaluate(
                part.node, contexts, status=status, expression=part.source, files=files
            )
            pieces.append(to_string(value))
    return "".join(pieces)
