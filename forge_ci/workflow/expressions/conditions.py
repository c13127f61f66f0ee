"""``if:`` conditions of jobs and steps, read the way GitHub reads them.

A condition may be written bare (``github.ref == 'refs/heads/main'``) or as one whole
``${{ ... }}``; an empty condition means ``success()``. A condition that calls none of the status
functions is implicitly ``success() && (condition)``, so by default a job or step is skipped
after a failure.

One deliberate refusal: a condition that mixes ``${{ }}`` with other text
(``${{ a }} && b``) is a string to GitHub, always truthy, which is never what its author meant;
forge-ci reports it instead of running it.
"""

from __future__ import annotations

from collections.abc import Collection

from .analysis import called_functions
from .errors import ExpressionError
from .functions import STATUS_FUNCTIONS
from .nodes import Call, Logical, Node
from .parser import parse_expression
from .templates import TemplateExpr, split_template


def parse_condition(text: str, *, allowed_contexts: Collection[str] | None = None) -> Node:
    """The tree of an ``if:`` value, with GitHub's implicit ``success() &&`` added.

    Errors are ExpressionErrors located in ``text``.
    """
    stripped = text.strip()
    shift = len(text) - len(text.lstrip())
    if not stripped:
        return Call(0, "success", ())
    if "${{" in stripped:
        try:
            parts = split_template(stripped, allowed_contexts=allowed_contexts)
        except ExpressionError as error:
            raise error.located(text, shift) from None
        if len(parts) != 1 or not isinstance(parts[0], TemplateExpr):
            raise ExpressionError(
                "parsing",
                "An 'if' condition must be one expression: either write it without ${{ }} or "
                "put the whole condition inside a single ${{ }} (text around ${{ }} makes a "
                "string, which is always true)",
                text.index("${{"),
                text,
            )
        node = parts[0].node
    else:
        try:
            node = parse_expression(stripped, allowed_contexts=allowed_contexts)
        except ExpressionError as error:
            raise error.located(text, shift) from None
    if called_functions(node) & STATUS_FUNCTIONS:
        return node
    return Logical(node.offset, "&&", (Call(node.offset, "success", ()), node))
