"""The one error type of the expression language, and the limits that bound its work.

Every failure of lexing, parsing or evaluating an expression is an :class:`ExpressionError`; no
other exception escapes the package for any input text or JSON-like context (the property tests
hold it to that). The limits are GitHub's own, so that an expression GitHub accepts is accepted
here and one it refuses for size is refused here too.
"""

from __future__ import annotations

from typing import Final, Literal

#: Longest expression text accepted (GitHub's limit, in characters).
MAX_EXPRESSION_LENGTH: Final = 21_000

#: Deepest nesting accepted, counted as GitHub counts it (operators, calls, property accesses).
MAX_DEPTH: Final = 50

#: Memory one evaluation may hold in strings it builds, in GitHub's estimate of .NET bytes
#: (26 + 2 per character): 1 MiB. GitHub's test data agrees: two live strings of 0.8 MB exceed
#: it, one does not.
MAX_MEMORY_BYTES: Final = 1_048_576

#: Offset of an evaluation error raised below the evaluator (a conversion, a function); the
#: evaluator replaces it with the offset of the node being evaluated.
UNLOCATED: Final = -1

#: What stage failed: ``lexing`` and ``parsing`` mean the text is not a valid expression (a
#: workflow with it is invalid); ``evaluation`` means a valid expression failed on its values.
ErrorKind = Literal["lexing", "parsing", "evaluation"]


class ExpressionError(Exception):
    """An expression could not be read or evaluated.

    ``offset`` is 0-based in ``expression`` (the text the error was found in, when known);
    ``message`` names the problem without the location, ``str()`` adds the location the way
    GitHub words it ("Located at position N within expression: ...", N 1-based).
    """

    def __init__(
        self, kind: ErrorKind, message: str, offset: int, expression: str | None = None
    ) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.message = message
        self.offset = offset
        self.expression = expression

    @property
    def is_syntax_error(self) -> bool:
        """True for lexing and parsing errors: the text itself is not a valid expression."""
        return self.kind != "evaluation"

    def located(self, expression: str, shift: int = 0) -> ExpressionError:
        """The same error with its offset moved by ``shift`` into the enclosing ``expression``."""
        return ExpressionError(self.kind, self.message, self.offset + shift, expression)

    def __reduce__(self) -> tuple[type[ExpressionError], tuple[str, str, int, str | None]]:
        # Errors may cross a process boundary (RQ); the default would call __init__(message).
        return (ExpressionError, (self.kind, self.message, self.offset, self.expression))

    def __str__(self) -> str:
        if self.expression is None:
            return self.message
        return (
            f"{self.message}. Located at position {self.offset + 1} "
            f"within expression: {self.expression}"
        )

    def __repr__(self) -> str:
        return f"ExpressionError({self.kind!r}, {self.message!r}, offset={self.offset})"
