"""Filter patterns: GitHub's cheat sheet, each rule with what it matches and what it does not."""

from __future__ import annotations

import pytest

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
