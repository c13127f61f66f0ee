"""The functions expressions may call: their arity (checked when parsing) and behaviour.

forge-ci supports GitHub's general functions, the status functions and ``hashFiles``, which only
the runner can evaluate: the evaluation that may call it is given a :data:`FileHasher` (the
runner's, over the job's workspace), and without one it is an evaluation error. Each
implementation receives the unevaluated argument nodes and evaluates only what it needs, as
GitHub's runner does: ``format`` evaluates an argument when the format string first refers to
it, ``join`` reads the separator only for two or more items, ``case`` stops at the first true
predicate.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final, Protocol

from forge_ci.records import record

from .coercion import (
    ARRAY,
    KIND_NAMES,
    fold,
    is_primitive,
    kind_of,
    loose_equals,
    to_string,
)
from .errors import UNLOCATED, ExpressionError
from .jsonvalues import from_json, to_json
from .nodes import Node
from .status import JobStatus


class Scope(Protocol):
    """What a function implementation may use of the evaluation that calls it."""

    @property
    def status(self) -> JobStatus | None:
        """The job status for the status functions, None outside ``if`` conditions."""

    @property
    def files(self) -> FileHasher | None:
        """What ``hashFiles`` asks to hash the files; None where no workspace exists."""

    def eval(self, node: Node) -> object:
        """Evaluate one argument node."""

    def reserve(self, chars: int) -> None:
        """Charge ``chars`` characters about to be built to the evaluation's memory budget."""


Implementation = Callable[[Scope, tuple[Node, ...]], object]
#: ``hashFiles``: (patterns, follow symbolic links) -> the hex digest, or '' for no match.
FileHasher = Callable[[list[str], bool], str]
#: hashFiles' only option, allowed as its first argument (GitHub's runner).
FOLLOW_LINKS_OPTION: Final = "--follow-symbolic-links"


@record(frozen=True, slots=True)
class FunctionSpec:
    """A callable function: canonical name, accepted argument counts and implementation."""

    name: str
    min_args: int
    max_args: int
    implementation: Implementation
    odd_args: bool = False


def _contains(scope: Scope, args: tuple[Node, ...]) -> bool:
    haystack = scope.eval(args[0])
    kind = kind_of(haystack)
    if kind < ARRAY:
        needle = scope.eval(args[1])
        return is_primitive(needle) and fold(to_string(needle)) in fold(to_string(haystack))
    if kind == ARRAY and haystack:
        assert isinstance(haystack, list | tuple)
        needle = scope.eval(args[1])
        return any(loose_equals(item, needle) for item in haystack)
    return False


def _starts_with(scope: Scope, args: tuple[Node, ...]) -> bool:
    text = scope.eval(args[0])
    if not is_primitive(text):
        return False
    prefix = scope.eval(args[1])
    return is_primitive(prefix) and fold(to_string(text)).startswith(fold(to_string(prefix)))


def _ends_with(scope: Scope, args: tuple[Node, ...]) -> bool:
    text = scope.eval(args[0])
    if not is_primitive(text):
        return False
    suffix = scope.eval(args[1])
    return is_primitive(suffix) and fold(to_string(text)).endswith(fold(to_string(suffix)))


_DIGITS: Final = re.compile(r"[0-9]+")
# GitHub reads the argument index as a byte, so {256} is not a placeholder.
_MAX_FORMAT_INDEX: Final = 255


def _read_placeholder(text: str, start: int) -> tuple[int, str, int] | None:
    """After a ``{``: (argument index, format specifiers, offset of the closing ``}``)."""
    digits = _DIGITS.match(text, start)
    if digits is None:
        return None
    significant = digits.group().lstrip("0") or "0"
    if len(significant) > 3 or int(significant) > _MAX_FORMAT_INDEX:
        return None
    index = int(significant)
    position = digits.end()
    if text.startswith("}", position):
        return index, "", position
    if not text.startswith(":", position):
        return None
    specifiers: list[str] = []
    position += 1
    while position < len(text):
        char = text[position]
        if char != "}":
            specifiers.append(char)
            position += 1
        elif text.startswith("}", position + 1):
            specifiers.append("}")
            position += 2
        else:
            return index, "".join(specifiers), position
    return None


def parse_format(text: str, argument_count: int) -> list[str | tuple[int, str]]:
    """Split a ``format`` string into literal text and (argument index, specifiers) pairs.

    ``{{`` and ``}}`` are literal braces; any other brace not part of ``{N}`` is an error, as
    is a reference to an argument that was not given.
    """
    segments: list[str | tuple[int, str]] = []
    i = 0
    while i < len(text):
        left = text.find("{", i)
        right = text.find("}", i)
        if left >= 0 and (right < 0 or right > left):
            if text.startswith("{", left + 1):
                segments.append(text[i : left + 1])
                i = left + 2
                continue
            placeholder = _read_placeholder(text, left + 1) if right > left + 1 else None
            if placeholder is None:
                raise _invalid_format(text)
            index, specifiers, close = placeholder
            if index >= argument_count:
                raise ExpressionError(
                    "evaluation",
                    "The following format string references more arguments than were "
                    f"supplied: {text}",
                    UNLOCATED,
                )
            if left > i:
                segments.append(text[i:left])
            segments.append((index, specifiers))
            i = close + 1
        elif right >= 0:
            if not text.startswith("}", right + 1):
                raise _invalid_format(text)
            segments.append(text[i : right + 1])
            i = right + 2
        else:
            segments.append(text[i:])
            break
    return segments


def _invalid_format(text: str) -> ExpressionError:
    return ExpressionError(
        "evaluation", f"The following format string is invalid: {text}", UNLOCATED
    )


def _format(scope: Scope, args: tuple[Node, ...]) -> str:
    segments = parse_format(to_string(scope.eval(args[0])), len(args) - 1)
    values: dict[int, object] = {}
    pieces: list[str] = []
    for segment in segments:
        if isinstance(segment, str):
            piece = segment
        else:
            index, specifiers = segment
            if index not in values:
                values[index] = scope.eval(args[index + 1])
            value = values[index]
            if specifiers:
                raise ExpressionError(
                    "evaluation",
                    f"The format specifiers '{specifiers}' are not valid for objects of type "
                    f"'{KIND_NAMES[kind_of(value)]}'",
                    UNLOCATED,
                )
            piece = to_string(value)
        # Charged piece by piece: '{0}{0}...' over a large value must fail before it is built.
        scope.reserve(len(piece))
        pieces.append(piece)
    return "".join(pieces)


def _join(scope: Scope, args: tuple[Node, ...]) -> str:
    items = scope.eval(args[0])
    kind = kind_of(items)
    if kind == ARRAY and items:
        assert isinstance(items, list | tuple)
        strings = [to_string(item) for item in items]
        separator = ","
        if len(strings) > 1 and len(args) > 1:
            chosen = scope.eval(args[1])
            if is_primitive(chosen):
                separator = to_string(chosen)
        scope.reserve(sum(map(len, strings)) + len(separator) * (len(strings) - 1))
        return separator.join(strings)
    if kind < ARRAY:
        return to_string(items)
    return ""


def _to_json(scope: Scope, args: tuple[Node, ...]) -> str:
    return to_json(scope.eval(args[0]), scope.reserve)


def _from_json(scope: Scope, args: tuple[Node, ...]) -> object:
    return from_json(to_string(scope.eval(args[0])))


def _case(scope: Scope, args: tuple[Node, ...]) -> object:
    last = len(args) - 1
    for i in range(0, last, 2):
        predicate = scope.eval(args[i])
        if not isinstance(predicate, bool):
            raise ExpressionError(
                "evaluation", "case predicate must evaluate to a boolean value", args[i].offset
            )
        if predicate:
            return scope.eval(args[i + 1])
    return scope.eval(args[last])


def _job_status(scope: Scope, name: str) -> JobStatus:
    if scope.status is None:
        raise ExpressionError(
            "evaluation",
            f"{name}() is only available in job and step 'if' conditions",
            UNLOCATED,
        )
    return scope.status


def _success(scope: Scope, args: tuple[Node, ...]) -> bool:
    return _job_status(scope, "success").success()


def _failure(scope: Scope, args: tuple[Node, ...]) -> bool:
    return _job_status(scope, "failure").failure()


def _cancelled(scope: Scope, args: tuple[Node, ...]) -> bool:
    return _job_status(scope, "cancelled").cancelled


def _always(scope: Scope, args: tuple[Node, ...]) -> bool:
    _job_status(scope, "always")
    return True


def _hash_files(scope: Scope, args: tuple[Node, ...]) -> str:
    if scope.files is None:
        raise ExpressionError(
            "evaluation",
            "hashFiles() is evaluated by the runner in a step; it cannot be used here",
            UNLOCATED,
        )
    patterns = [to_string(scope.eval(arg)) for arg in args]
    follow = False
    if patterns and patterns[0].startswith("--"):
        if patterns[0] != FOLLOW_LINKS_OPTION:
            raise ExpressionError(
                "evaluation",
                f"Invalid glob option {patterns[0]}, available option: '{FOLLOW_LINKS_OPTION}'",
                UNLOCATED,
            )
        follow = True
        patterns = patterns[1:]
    return scope.files(patterns, follow)


_SPECS: Final = (
    FunctionSpec("contains", 2, 2, _contains),
    FunctionSpec("startsWith", 2, 2, _starts_with),
    FunctionSpec("endsWith", 2, 2, _ends_with),
    FunctionSpec("format", 1, _MAX_FORMAT_INDEX + 1, _format),
    FunctionSpec("join", 1, 2, _join),
    FunctionSpec("toJSON", 1, 1, _to_json),
    FunctionSpec("fromJSON", 1, 1, _from_json),
    FunctionSpec("case", 3, 1 << 30, _case, odd_args=True),
    FunctionSpec("hashFiles", 1, 1 << 30, _hash_files),
    FunctionSpec("success", 0, 0, _success),
    FunctionSpec("failure", 0, 0, _failure),
    FunctionSpec("cancelled", 0, 0, _cancelled),
    FunctionSpec("always", 0, 0, _always),
)

#: Callable functions by lowercase name (function names are case-insensitive).
FUNCTIONS: Final[dict[str, FunctionSpec]] = {spec.name.lower(): spec for spec in _SPECS}

#: Every function forge-ci evaluates, in GitHub's spelling.
SUPPORTED_FUNCTIONS: Final = frozenset(spec.name for spec in _SPECS)

#: The functions that read a :class:`JobStatus` and are meaningful only in ``if`` conditions.
STATUS_FUNCTIONS: Final = frozenset({"success", "failure", "cancelled", "always"})

#: The functions that read the job's workspace: only the runner evaluates them, in steps.
FILE_FUNCTIONS: Final = frozenset({"hashfiles"})

#: GitHub functions forge-ci refuses on purpose, by lowercase name: (spelling, reason).
UNSUPPORTED_FUNCTIONS: Final[dict[str, tuple[str, str]]] = {}
