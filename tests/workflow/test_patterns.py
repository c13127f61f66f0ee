"""Filter patterns: GitHub's cheat sheet, each rule with what it matches and what it does not."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forge_ci.workflow.patterns import PatternError, compile_pattern, included, last_match


@pytest.mark.parametrize(
    ("pattern", "matches", "misses"),
    [
        ("main", ["main"], ["main2", "xmain", "Main", "feature/main"]),
        ("feature/*", ["feature/a", "feature/"], ["feature/a/b", "feature", "features/a"]),
        ("*", ["main", "dev", ""], ["feature/a"]),
        ("**", ["main", "feature/a/b", ""], []),
        ("releases/**", ["releases/1", "releases/1/2"], ["releases", "release/1"]),
        ("**/README.md", ["README.md", "docs/README.md", "a/b/README.md"], ["README.mdx"]),
        ("docs/**/*.md", ["docs/a.md", "docs/x/y/a.md"], ["docs/a.txt", "a.md"]),
        ("*.js", ["app.js"], ["src/app.js", "app.jsx"]),
        ("v1?", ["v", "v1"], ["v11", "v2"]),
        ("v1+", ["v1", "v111"], ["v", "v2"]),
        ("v[12].0", ["v1.0", "v2.0"], ["v3.0", "v12.0"]),
        ("v[0-9]+", ["v0", "v42"], ["v", "va"]),
        ("[a-cX]*", ["apple", "Xray", "c"], ["dog", "x"]),
        ("a.b", ["a.b"], ["aXb"]),
        ("\\*star", ["*star"], ["xstar"]),
        ("a\\?", ["a?"], ["a", "a?b"]),
        ("release-(1)", ["release-(1)"], ["release-1"]),
    ],
)
def test_cheat_sheet(pattern: str, matches: list[str], misses: list[str]) -> None:
    compiled = compile_pattern(pattern)
    for value in matches:
        assert compiled.matches(value), f"{pattern!r} should match {value!r}"
    for value in misses:
        assert not compiled.matches(value), f"{pattern!r} should not match {value!r}"


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("", "empty pattern"),
        ("!", "needs something after '!'"),
        ("?a", "'?' must follow a character"),
        ("*+", "'+' must follow a character"),
        ("a??", "'?' must follow a character"),
        ("[abc", "'[' is not closed"),
        ("a[]", "must list at least one character"),
        ("[z-a]", "the range z-a"),
        ("[a-Z]", "the range a-Z"),
        ("ends\\", "cannot end with"),
        ("x" * 513, "at most 512 characters"),
    ],
)
def test_invalid_patterns_say_why(pattern: str, reason: str) -> None:
    with pytest.raises(PatternError, match=None) as caught:
        compile_pattern(pattern)
    assert reason in str(caught.value)


def test_negation_only_at_the_start() -> None:
    assert compile_pattern("!main").negated
    middle = compile_pattern("a!b")
    assert not middle.negated and middle.matches("a!b")


def test_last_matching_pattern_decides() -> None:
    patterns = tuple(
        compile_pattern(p) for p in ["releases/**", "!releases/**-alpha", "releases/x-alpha"]
    )
    assert included(patterns, "releases/1")
    assert not included(patterns, "releases/1-alpha")
    assert included(patterns, "releases/x-alpha")
    assert not included(patterns, "main")
    hit = last_match(patterns, "releases/1-alpha")
    assert hit is not None and hit.text == "!releases/**-alpha"


# --- linear-time matching (issue #14, finding 2) ---------------------------------------------

REFERENCE_PIECES = {"*": "[^/]*", "**/": "(?:.*/)?", "**": ".*"}


def reference_regex(body: str) -> re.Pattern[str]:
    """The cheat sheet as a backtracking regex: slow on some patterns, but plainly right."""
    out: list[str] = []
    i = 0
    while i < len(body):
        for token in ("**/", "**", "*"):
            if body.startswith(token, i):
                out.append(REFERENCE_PIECES[token])
                i += len(token)
                break
        else:
            char = body[i]
            if char == "\\":
                out.append(re.escape(body[i + 1]))
                i += 2
            elif char in "?+":
                out.append(char)
                i += 1
            elif char == "[":
                end = body.index("]", i)
                out.append("[" + body[i + 1 : end] + "]")
                i = end + 1
            else:
                out.append(re.escape(char))
                i += 1
    return re.compile("".join(out), re.DOTALL)


# Pieces that always make a valid pattern, and values over the characters they talk about.
PATTERN_PIECES = ["a", "b", "/", ".", "*", "**", "**/", "a?", "b+", "[ab]", "[a-c]+", "\\*", "x?"]
VALUES = st.text(alphabet="ab/.*cx", max_size=12)


@settings(max_examples=400, deadline=None)
@given(pieces=st.lists(st.sampled_from(PATTERN_PIECES), min_size=1, max_size=7), value=VALUES)
def test_matches_like_the_reference_regex(pieces: list[str], value: str) -> None:
    body = "".join(pieces)
    pattern = compile_pattern(body)
    expected = reference_regex(body).fullmatch(value) is not None
    assert pattern.matches(value) is expected, (body, value)
    # The cached automaton answers the same the second time.
    assert pattern.matches(value) is expected


def state_bound(pattern: str, value: str) -> int:
    compiled = compile_pattern(pattern)
    states = compiled.automaton.accept + 1
    return (len(value) + 1) * states


@pytest.mark.parametrize(
    "pattern",
    [
        "**a**a**a**a**a**ab",  # the red team's: seconds at 100 characters with a regex
        "*a*a*a*a*a*a*a*ab",
        "a+a+a+a+a+a+a+b",
        "**/a**/a**/a**/b",
        "a?" * 40 + "a" * 40 + "b",
        "[a-z]+" * 20 + "!",
    ],
)
def test_worst_cases_cost_linear_steps(pattern: str) -> None:
    """Counted, not timed: every character costs at most one visit of each automaton state."""
    for value in ("a" * 10_000, "a/" * 5_000, "a" * 9_999 + "c"):
        compiled = compile_pattern(pattern)  # a fresh cache: every transition is new work
        matched, steps = compiled.match_steps(value)
        assert not matched
        assert steps <= state_bound(pattern, value), (pattern, steps)
    # And what should match still does.
    assert compile_pattern("**a**a**a**a**a**ab").matches("x" * 500 + "aaaaaab")
    assert not compile_pattern("**a**a**a**a**a**ab").matches("x" * 500 + "aaaaab")


def test_steps_grow_linearly_not_polynomially() -> None:
    pattern = "**a**a**a**a**a**ab"
    small = compile_pattern(pattern).match_steps("a" * 1_000)[1]
    large = compile_pattern(pattern).match_steps("a" * 10_000)[1]
    assert large <= 11 * small
