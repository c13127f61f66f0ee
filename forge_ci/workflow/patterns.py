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

Matching is linear in the length of the value for every pattern: a pattern compiles to a small
automaton (Thompson's construction) that is run over the value once, keeping the *set* of places
the pattern could be at, never backtracking. A backtracking regex took seconds on
``**a**a**a**a**a**ab`` against a 100-character path, and grew as n^k (issue #14, finding 2).
Sets already seen are cached per pattern as a lazily built DFA, so common patterns cost one
dictionary lookup a character:

    value:   c0 c1 c2 ... cn-1
    sets:  S0 -> S1 -> S2 ... -> Sn     S0 = closure(start); Sk+1 = closure(step(Sk, ck))
    match:  the accepting state is in Sn

Each new set costs at most one visit of every automaton state, so a match costs at most
``(len(value) + 1) * (states + 1)`` state visits (:meth:`Pattern.match_steps` counts them).
"""

from __future__ import annotations

from forge_ci.records import field, record

MAX_PATTERN_LENGTH = 512
MAX_PATTERNS = 100
#: Transitions a pattern's lazy DFA keeps before starting over (memory bound, not a time bound).
_DFA_CACHE_LIMIT = 4096


class PatternError(ValueError):
    """A pattern that cannot be compiled; the message says what is wrong."""


@record(frozen=True)
class _CharSet:
    """Which single characters one automaton state consumes."""

    chars: frozenset[str] = frozenset()
    ranges: tuple[tuple[str, str], ...] = ()
    any_but_slash: bool = False
    anything: bool = False

    def accepts(self, char: str) -> bool:
        if self.anything:
            return True
        if self.any_but_slash:
            return char != "/"
        return char in self.chars or any(low <= char <= high for low, high in self.ranges)


_ANY = _CharSet(anything=True)
_NOT_SLASH = _CharSet(any_but_slash=True)
_SLASH = _CharSet(chars=frozenset("/"))

# State kinds of the automaton: consume one character, or fork without consuming.
_CHAR = 0
_SPLIT = 1


@record
class _Automaton:
    """The compiled pattern: states ``0..n-1`` and the accepting state ``n``.

    A ``_CHAR`` state moves to ``out[i]`` on a character in ``sets[i]``; a ``_SPLIT`` state goes
    to both ``out[i]`` and ``alt[i]`` without consuming anything.
    """

    kinds: list[int] = field(default_factory=list)
    sets: list[_CharSet | None] = field(default_factory=list)
    out: list[int] = field(default_factory=list)
    alt: list[int] = field(default_factory=list)
    start: int = 0

    @property
    def accept(self) -> int:
        return len(self.kinds)

    def add(self, kind: int, charset: _CharSet | None, out: int, alt: int = -1) -> int:
        self.kinds.append(kind)
        self.sets.append(charset)
        self.out.append(out)
        self.alt.append(alt)
        return len(self.kinds) - 1

    def closure(self, seeds: list[int]) -> tuple[frozenset[int], int]:
        """The states reachable from ``seeds`` without consuming, and how many were visited."""
        seen: set[int] = set()
        stack = list(seeds)
        visits = 0
        while stack:
            state = stack.pop()
            if state in seen:
                continue
            seen.add(state)
            visits += 1
            if state != self.accept and self.kinds[state] == _SPLIT:
                stack.append(self.out[state])
                stack.append(self.alt[state])
        return frozenset(s for s in seen if s == self.accept or self.kinds[s] == _CHAR), visits

    def step(self, states: frozenset[int], char: str) -> tuple[frozenset[int], int]:
        moved = [
            self.out[s]
            for s in states
            if s != self.accept and self.sets[s].accepts(char)  # type: ignore[union-attr]
        ]
        following, visits = self.closure(moved)
        return following, visits + len(states)


@record(frozen=True)
class Pattern:
    """One pattern as written, whether it excludes, and its compiled automaton."""

    text: str
    negated: bool
    automaton: _Automaton = field(repr=False, compare=False)
    _dfa: dict[tuple[frozenset[int], str], frozenset[int]] = field(
        default_factory=dict, repr=False, compare=False
    )
    _initial: list[frozenset[int]] = field(default_factory=list, repr=False, compare=False)

    def matches(self, value: str) -> bool:
        return self.match_steps(value)[0]

    def match_steps(self, value: str) -> tuple[bool, int]:
        """Whether ``value`` matches, and the automaton states visited to find out.

        One cached transition counts one step; a new one counts the states it visited.
        """
        automaton = self.automaton
        if not self._initial:
            self._initial.append(automaton.closure([automaton.start])[0])
        current = self._initial[0]
        dfa = self._dfa
        steps = 0
        for char in value:
            following = dfa.get((current, char))
            if following is None:
                following, visits = automaton.step(current, char)
                steps += visits
                if len(dfa) >= _DFA_CACHE_LIMIT:
                    dfa.clear()
                dfa[(current, char)] = following
            steps += 1
            current = following
            if not current:
                return False, steps
        return automaton.accept in current, steps


def compile_pattern(text: str) -> Pattern:
    """Compile one filter pattern; raises :class:`PatternError` with a reason."""
    if len(text) > MAX_PATTERN_LENGTH:
        raise PatternError(f"patterns are at most {MAX_PATTERN_LENGTH} characters")
    negated = text.startswith("!")
    body = text[1:] if negated else text
    if not body:
        raise PatternError("a pattern needs something after '!'" if negated else "empty pattern")
    return Pattern(text, negated, _build(_pieces(body)))


# A piece of a pattern: a character set with its repetition ("", "?", "+", "*"), or "**/".
_Piece = tuple[_CharSet, str] | None


def _pieces(body: str) -> list[_Piece]:
    pieces: list[_Piece] = []
    # Whether the last piece is a single character (or class) that '?' and '+' may repeat.
    repeatable = False
    i = 0
    while i < len(body):
        char = body[i]
        if char == "\\":
            if i + 1 >= len(body):
                raise PatternError("a pattern cannot end with '\\'")
            pieces.append((_CharSet(chars=frozenset(body[i + 1])), ""))
            repeatable = True
            i += 2
        elif char == "*":
            if body.startswith("**/", i):
                pieces.append(None)
                i += 3
            elif body.startswith("**", i):
                pieces.append((_ANY, "*"))
                i += 2
            else:
                pieces.append((_NOT_SLASH, "*"))
                i += 1
            repeatable = False
        elif char in "?+":
            if not repeatable:
                raise PatternError(f"'{char}' must follow a character it repeats")
            last = pieces[-1]
            assert last is not None
            pieces[-1] = (last[0], char)
            repeatable = False
            i += 1
        elif char == "[":
            end = body.find("]", i + 1)
            if end < 0:
                raise PatternError("'[' is not closed by ']'")
            pieces.append((_character_class(body[i + 1 : end]), ""))
            repeatable = True
            i = end + 1
        else:
            pieces.append((_CharSet(chars=frozenset(char)), ""))
            repeatable = True
            i += 1
    return pieces


def _build(pieces: list[_Piece]) -> _Automaton:
    """Thompson's construction, from the last piece back, so each piece knows what follows."""
    automaton = _Automaton()
    # -1 stands for the accepting state, whose index is known only once every state exists;
    # -2 for a loop's entry, set right after the state it loops through.
    following = -1
    for piece in reversed(pieces):
        if piece is None:  # '**/': nothing, or anything followed by '/'
            slash = automaton.add(_CHAR, _SLASH, following)
            loop = automaton.add(_SPLIT, None, -2, slash)
            anything = automaton.add(_CHAR, _ANY, loop)
            automaton.out[loop] = anything
            following = automaton.add(_SPLIT, None, loop, following)
            continue
        charset, repeat = piece
        if repeat == "":
            following = automaton.add(_CHAR, charset, following)
        elif repeat == "?":
            one = automaton.add(_CHAR, charset, following)
            following = automaton.add(_SPLIT, None, one, following)
        else:  # '+' and '*': a loop; '+' enters it through one character
            loop = automaton.add(_SPLIT, None, -2, following)
            one = automaton.add(_CHAR, charset, loop)
            automaton.out[loop] = one
            following = one if repeat == "+" else loop
    accept = automaton.accept
    automaton.out = [accept if target == -1 else target for target in automaton.out]
    automaton.alt = [accept if target == -1 else target for target in automaton.alt]
    automaton.start = accept if following == -1 else following
    return automaton


def _character_class(content: str) -> _CharSet:
    if not content:
        raise PatternError("'[]' must list at least one character")
    chars: set[str] = set()
    ranges: list[tuple[str, str]] = []
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
            ranges.append((low, high))
            i += 3
        else:
            chars.add(content[i])
            i += 1
    return _CharSet(chars=frozenset(chars), ranges=tuple(ranges))


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
