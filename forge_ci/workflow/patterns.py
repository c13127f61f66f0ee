"""Branch and path filter patterns, as GitHub's "filter pattern cheat sheet" defines them.

    *      zero or more characters, but not '/'
    **     zero or more of any character ('**/' also matches no directory at all)
    ?      zero or one of the preceding character
    +      one or more of the preceding character
    [...]  one character listed, or in a range a-z, A-Z, 0-9
    \\x     the character x itself
    !      first character only: the pattern excludes what earlier patterns included

Patterns of one filter are applied in order and the last one that matches decides, so
``[main, '!main']`` excludes main and ``['!release/old', 'release/**']`` includes it again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

MAX_PATTERN_LENGTH = 512
MAX_PATTERNS = 100


class PatternError(ValueError):
    """A pattern that cannot be compiled; the message says what is wrong."""


@dataclass(frozen=True)
class Pattern:
    """One pattern as written, whether it excludes, and its compiled form."""

    text: str
    negated: bool
    regex: re.Pattern[str]

    def matches(self, value: str) -> bool:
        return self.regex.fullmatch(value) is not None


def compile_pattern(text: str) -> Pattern:
    """Compile one filter pattern; raises :class:`PatternError` with a reason."""
    if len(text) > MAX_PATTERN_LENGTH:
        raise PatternError(f"patterns are at most {MAX_PATTERN_LENGTH} characters")
    negated = text.startswith("!")
    body = text[1:] if negated else text
    if not body:
        raise PatternError("a pattern needs something after '!'" if negated else "empty pattern")
    return Pattern(text, negated, _compile(body))


@lru_cache(maxsize=4096)
def _compile(body: str) -> re.Pattern[str]:
    out: list[str] = []
    # Whether the last piece is a single character (or class) that '?' and '+' may repeat.
    repeatable = False
    i = 0
    while i < len(body):
        char = body[i]
        if char == "\\":
            if i + 1 >= len(body):
                raise PatternError("a pattern cannot end with '\\'")
            out.append(re.escape(body[i + 1]))
            repeatable = True
            i += 2
        elif char == "*":
            if body.startswith("**", i):
                if body.startswith("**/", i):
                    out.append("(?:.*/)?")
                    i += 3
                else:
                    out.append(".*")
                    i += 2
            else:
                out.append("[^/]*")
                i += 1
            repeatable = False
        elif char in "?+":
            if not repeatable:
                raise PatternError(f"'{char}' must follow a character it repeats")
            out.append(char)
            repeatable = False
            i += 1
        elif char == "[":
            end = body.find("]", i + 1)
            if end < 0:
                raise PatternError("'[' is not closed by ']'")
            out.append(_character_class(body[i + 1 : end]))
            repeatable = True
            i = end + 1
        else:
            out.append(re.escape(char))
            repeatable = True
            i += 1
    return re.compile("".join(out), re.DOTALL)


def _character_class(content: str) -> str:
    if not content:
        raise PatternError("'[]' must list at least one character")
    pieces: list[str] = []
    i = 0
    while i < len(content):
        if i + 2 < len(content) and content[i + 1] == "-":
            low, high = content[i], content[i + 2]
            if not (
                ("a" <= low <= high <= "z")
                or ("A" <= low <= high <= "Z")
                or ("0" <= low <= high <= "9")
            ):
                raise PatternError(f"the range {low}-{high} must be within a-z, A-Z or 0-9")
            pieces.append(f"{re.escape(low)}-{re.escape(high)}")
            i += 3
        else:
            pieces.append(re.escape(content[i]))
            i += 1
    return "[" + "".join(pieces) + "]"


def last_match(patterns: tuple[Pattern, ...], value: str) -> Pattern | None:
    """The last pattern that matches ``value`` (ignoring '!'), which decides the outcome."""
    for pattern in reversed(patterns):
        if pattern.matches(value):
            return pattern
    return None


def included(patterns: tuple[Pattern, ...], value: str) -> bool:
    """True when the last matching pattern includes ``value`` (and something matched)."""
    decisive = last_match(patterns, value)
    return decisive is not None and not decisive.negated
