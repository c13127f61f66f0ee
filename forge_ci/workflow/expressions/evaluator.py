"""Evaluation of a parsed expression against contexts, with GitHub's semantics.

Contexts map names (``github``, ``env``, ``matrix`` ...) to JSON-like values; names and object
keys are case-insensitive. A missing property is ``null``; ``a.*`` / ``a[*]`` make a *filtered
array* to which further accesses apply element-wise (``labels.*.name``). ``&&`` and ``||`` return
the deciding operand itself, not a boolean.

Strings built by functions are charged to a memory budget of ``MAX_MEMORY_BYTES`` (GitHub's
estimate: 26 bytes + 2 per character) while the value that holds them is alive, so that
``format('{0}{0}...', toJSON(github))`` fails with an ExpressionError instead of exhausting
memory; the charge of arguments is released when the call returns.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

from .coercion import (
    ARRAY,
    MISSING,
    OBJECT,
    get_member,
    greater_than,
    is_primitive,
    is_truthy,
    kind_of,
    less_than,
    loose_equals,
    to_number,
    to_string,
)
from .errors import MAX_MEMORY_BYTES, UNLOCATED, ExpressionError
from .functions import FUNCTIONS, FileHasher
from .nodes import Call, Compare, ContextRef, Index, Literal, Logical, Node, Not, Wildcard
from .status import JobStatus

_STRING_OVERHEAD: Final = 26
_INT32_MAX: Final = 2**31 - 1


class FilteredArray(list[Any]):
    """The array made by ``*``: indexing it applies the index to each element and flattens."""


def evaluate(
    node: Node,
    contexts: Mapping[str, Any],
    *,
    status: JobStatus | None = None,
    expression: str | None = None,
    files: FileHasher | None = None,
) -> Any:
    """The value of ``node`` given ``contexts``; ``status`` enables the status functions and
    ``files`` (the runner's, over the workspace) ``hashFiles``.

    ``expression`` (the source text) is only used to word errors. Values are JSON-like:
    None, bool, float (or the ints found in contexts), str, list and mapping.
    """
    return _Evaluation(contexts, status, expression, files).eval(node)


class _Evaluation:
    """One evaluation: the contexts, the job status and the memory in use."""

    def __init__(
        self,
        contexts: Mapping[str, Any],
        status: JobStatus | None,
        expression: str | None,
        files: FileHasher | None = None,
    ) -> None:
        self.contexts = {name.lower(): value for name, value in contexts.items()}
        self._status = status
        self._files = files
        self.expression = expression
        self.used = 0

    @property
    def status(self) -> JobStatus | None:
        return self._status

    @property
    def files(self) -> FileHasher | None:
        return self._files

    def reserve(self, chars: int) -> None:
        self.used += 2 * chars
        if self.used > MAX_MEMORY_BYTES:
            raise ExpressionError(
                "evaluation", "The maximum allowed memory size was exceeded", UNLOCATED
            )

    def eval(self, node: Node) -> Any:
        try:
            return self._dispatch(node)
        except ExpressionError as error:
            # The innermost node that sees an unlocated error is the one that failed.
            if error.offset == UNLOCATED:
                error.offset = node.offset
            if error.expression is None:
                error.expression = self.expression
            raise

    def _dispatch(self, node: Node) -> Any:
        if isinstance(node, Literal):
            return node.value
        if isinstance(node, ContextRef):
            key = node.name.lower()
            if key not in self.contexts:
                raise ExpressionError(
                    "evaluation", f"Unrecognized named-value: '{node.name}'", UNLOCATED
                )
            return self.contexts[key]
        if isinstance(node, Index):
            return self._index(node)
        if isinstance(node, Call):
            return self._call(node)
        if isinstance(node, Logical):
            return self._logical(node)
        if isinstance(node, Not):
            mark = self.used
            result = not is_truthy(self.eval(node.operand))
            self.used = mark
            return result
        return self._compare(node)

    def _call(self, node: Call) -> Any:
        mark = self.used
        result = FUNCTIONS[node.name.lower()].implementation(self, node.args)
        self.used = mark
        if isinstance(result, str) and result:
            self.reserve(len(result))
            self.used += _STRING_OVERHEAD
        return result

    def _logical(self, node: Logical) -> Any:
        stop_when_truthy = node.operator == "||"
        result: Any = None
        for operand in node.operands:
            mark = self.used
            result = self.eval(operand)
            if is_truthy(result) == stop_when_truthy:
                break
            self.used = mark
        return result

    def _compare(self, node: Compare) -> bool:
        mark = self.used
        left = self.eval(node.left)
        right = self.eval(node.right)
        self.used = mark
        operator = node.operator
        if operator == "==":
            return loose_equals(left, right)
        if operator == "!=":
            return not loose_equals(left, right)
        if operator == "<":
            return less_than(left, right)
        if operator == ">":
            return greater_than(left, right)
        if operator == "<=":
            return loose_equals(left, right) or less_than(left, right)
        return loose_equals(left, right) or greater_than(left, right)

    def _index(self, node: Index) -> Any:
        target = self.eval(node.target)
        kind = kind_of(target)
        wildcard = isinstance(node.index, Wildcard)
        if kind != ARRAY and kind != OBJECT:
            # Like GitHub's runner, the index of a non-collection is never evaluated.
            return FilteredArray() if wildcard else None
        mark = self.used
        index: Any = None if isinstance(node.index, Wildcard) else self.eval(node.index)
        self.used = mark
        if isinstance(target, FilteredArray):
            return _index_each(target, index, wildcard)
        if kind == OBJECT:
            if wildcard:
                return FilteredArray(target.values())
            value = _member(target, index)
            return None if value is MISSING else value
        if wildcard:
            return FilteredArray(target)
        position = _position(index)
        return None if position is None or position >= len(target) else target[position]


def _member(obj: Mapping[Any, Any], index: object) -> object:
    # Only primitives name a property: obj[fromJSON('{}')] is null, not obj['Object'].
    if not is_primitive(index):
        return MISSING
    return get_member(obj, to_string(index))


def _position(index: object) -> int | None:
    number = to_number(index)
    if math.isnan(number) or number < 0:
        return None
    number = math.floor(number) if math.isfinite(number) else number
    return None if number > _INT32_MAX else int(number)


def _index_each(items: FilteredArray, index: object, wildcard: bool) -> FilteredArray:
    result = FilteredArray()
    for item in items:
        kind = kind_of(item)
        if kind == OBJECT:
            if wildcard:
                result.extend(item.values())
            else:
                value = _member(item, index)
                if value is not MISSING:
                    result.append(value)
        elif kind == ARRAY:
            if wildcard:
                result.extend(item)
            else:
                position = _position(index)
                if position is not None and position < len(item):
                    result.append(item[position])
    return result
