"""hashFiles() on the runner: GitHub's glob rules and digest, against a simple reference, and in a
real job (env, run, if and a job output of the real runner over its workspace)."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.worker.runner.conftest import Forge, workflow
from worker.runner.hashfiles import MAX_ENTRIES, HashFilesError, hash_files


def digest(root: Path, *names: str) -> str:
    total = hashlib.sha256()
    for name in names:
        total.update(hashlib.sha256((root / name).read_bytes()).digest())
    return total.hexdigest() if names else ""


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    for name, text in {
        "package-lock.json": "root",
        "a/package-lock.json": "a",
        "a/b/package-lock.json": "ab",
        "a.txt": "text",
        "vendor/package-lock.json": "vendor",
        ".hidden/x.lock": "hidden",
        "B/y.lock": "upper",
        ".home/package-lock.json": "runner home",
        ".tmp/package-lock.json": "runner temp",
    }.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (tmp_path / "outside.lock").write_text("outside")
    return root


@pytest.mark.parametrize(
    ("patterns", "expected"),
    [
        # Depth first, entries in byte order: 'a' (its tree) before 'a.txt', 'B' before 'a'.
        (
            ["**/package-lock.json"],
            [
                "a/b/package-lock.json",
                "a/package-lock.json",
                "package-lock.json",
                "vendor/package-lock.json",
            ],
        ),
        (
            ["**/package-lock.json", "!vendor/**"],
            ["a/b/package-lock.json", "a/package-lock.json", "package-lock.json"],
        ),
        (
            ["**/package-lock.json\n!vendor\n# a comment\n\n"],
            ["a/b/package-lock.json", "a/package-lock.json", "package-lock.json"],
        ),
        # A later include takes an excluded file back (the last matching pattern decides).
        (["!a/**", "a/b/*"], ["a/b/package-lock.json"]),
        (["a"], ["a/b/package-lock.json", "a/package-lock.json"]),  # a folder: all below it
        (["a/"], ["a/b/package-lock.json", "a/package-lock.json"]),
        (["a.txt/"], []),  # a trailing slash names folders only
        (["*.lock", "**/*.lock"], [".hidden/x.lock", "B/y.lock"]),  # dot folders included
        (["b/*.lock"], []),  # case-sensitive
        (["[AB]/?.lock"], ["B/y.lock"]),
        (["./a/../a.txt"], ["a.txt"]),
        (["../outside.lock", "../*.lock"], []),  # outside the workspace: ignored
        (["nothing-matches"], []),
    ],
)
def test_patterns_select_files_as_github_does(
    tree: Path, patterns: list[str], expected: list[str]
) -> None:
    assert hash_files(str(tree), patterns) == digest(tree, *expected)


def test_an_absolute_pattern_outside_the_workspace_hashes_nothing(tree: Path) -> None:
    assert hash_files(str(tree), [f"{tree.parent}/outside.lock"]) == ""
    assert hash_files(str(tree), [f"{tree}/a.txt"]) == digest(tree, "a.txt")


def test_links_are_followed_only_with_the_option(tree: Path) -> None:
    (tree / "linked").symlink_to(tree / "a", target_is_directory=True)
    (tree / "file-link.txt").symlink_to(tree / "a.txt")
    plain = hash_files(str(tree), ["linked/**", "file-link.txt"])
    assert plain == digest(tree, "file-link.txt")  # a link to a file is read; one to a folder not
    followed = hash_files(str(tree), ["linked/**", "file-link.txt"], follow_links=True)
    # Walked in the patterns' order: linked/ first, then the file.
    expected = ("linked/b/package-lock.json", "linked/package-lock.json", "file-link.txt")
    assert followed == digest(tree, *expected)
    # The loop a/loop -> ws is walked once, not forever.
    (tree / "a" / "loop").symlink_to(tree, target_is_directory=True)
    assert hash_files(str(tree), ["**/x.lock"], follow_links=True) == digest(tree, ".hidden/x.lock")


def test_unreadable_files_and_huge_trees_fail_with_a_message(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tree / "broken.lock").symlink_to(tree / "missing")
    with pytest.raises(HashFilesError, match="cannot hash .*broken.lock"):
        hash_files(str(tree), ["*.lock"])
    monkeypatch.setattr("worker.runner.hashfiles.MAX_ENTRIES", 3)
    with pytest.raises(HashFilesError, match="more than 3 files"):
        hash_files(str(tree), ["**"])
    assert MAX_ENTRIES >= 100_000


# -- the property: the walk and the matcher against a plain reference ---------------------------

NAMES = st.sampled_from(["a", "b", "a.b", ".d", "B", "ab", "x y"])
PATHS = st.lists(NAMES, min_size=1, max_size=3).map(tuple)
SEGMENTS = st.sampled_from(["a", "b", "*", "**", "?", "a*", "[ab]", "*.b", ".d", "B", "[!a]*"])
PATTERNS = st.tuples(st.booleans(), st.lists(SEGMENTS, min_size=1, max_size=3))


def reference_regex(segments: list[str]) -> re.Pattern[str]:
    """A regex over ``/`` + the path: ``**`` is any run of segments, the rest fnmatch-like."""
    out = ""
    for segment in segments:
        if segment == "**":
            out += "(?:/[^/]+)*"
            continue
        out += "/"
        j = 0
        while j < len(segment):
            char = segment[j]
            if char == "*":
                out += "[^/]*"
            elif char == "?":
                out += "[^/]"
            elif char == "[":
                close = segment.index("]", j + 2)
                inner = segment[j + 1 : close]
                out += "[^/" + inner[1:] + "]" if inner.startswith("!") else "[" + inner + "]"
                j = close
            else:
                out += re.escape(char)
            j += 1
    return re.compile(out)


def reference_starts(patterns: list[tuple[bool, list[str]]]) -> list[tuple[str, ...]]:
    """Where the walks start, as @actions/glob's ``getSearchPaths``: each include pattern's
    literal prefix, in the patterns' order, unless another one's is a proper ancestor of it."""
    prefixes = []
    for negate, segments in patterns:
        if not negate:
            literal = next((i for i, s in enumerate(segments) if set(s) & set("*?[")), None)
            prefixes.append(tuple(segments[:literal]))
    starts: list[tuple[str, ...]] = []
    for prefix in prefixes:
        if prefix not in starts and not any(prefix[:end] in prefixes for end in range(len(prefix))):
            starts.append(prefix)
    return starts


def reference(root: Path, patterns: list[tuple[bool, list[str]]]) -> list[str]:
    files = []
    for directory, _, names in os.walk(root):
        for name in names:
            files.append(os.path.relpath(os.path.join(directory, name), root))
    files.sort(key=lambda p: [os.fsencode(part) for part in p.split("/")])
    # Each walk in turn, depth first in byte order (the sort above, within one walk).
    files = [
        path
        for start in reference_starts(patterns)
        for path in files
        if tuple(path.split("/"))[: len(start)] == start
    ]
    chosen = []
    for path in files:
        parts = path.split("/")
        selected = False
        for negate, segments in patterns:
            regex = reference_regex(segments)
            # A pattern also matches what lies below a folder it matches.
            hit = any(
                regex.fullmatch("/" + "/".join(parts[:end])) for end in range(1, len(parts) + 1)
            )
            selected = (selected and not hit) if negate else (selected or hit)
        if selected:
            chosen.append(path)
    return chosen


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    files=st.lists(PATHS, min_size=1, max_size=8),
    patterns=st.lists(PATTERNS, min_size=1, max_size=3),
)
@example(files=[("a",), ("B",)], patterns=[(False, ["a"]), (False, ["B"])])
def test_the_matcher_agrees_with_a_reference(
    tmp_path_factory: pytest.TempPathFactory,
    files: list[tuple[str, ...]],
    patterns: list[tuple[bool, list[str]]],
) -> None:
    root = tmp_path_factory.mktemp("prop")
    made = []
    for parts in files:
        path = root.joinpath(*parts)
        if any(root.joinpath(*parts[:end]).is_file() for end in range(1, len(parts))):
            continue
        if path.is_dir():
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("/".join(parts))
        made.append(path)
    written = [("!" if negate else "") + "/".join(segments) for negate, segments in patterns]
    expected = reference(root, patterns)
    assert hash_files(str(root), written) == digest(root, *expected), (written, expected)


# -- a real job ----------------------------------------------------------------------------------


def test_a_job_hashes_its_checked_out_files(forge: Forge) -> None:
    files = {"requirements.txt": "flask\n", "sub/requirements.txt": "rq\n", "README.md": "x\n"}
    steps = """\
      - uses: forge-ci/checkout@v1
      - id: key
        env:
          KEY: deps-${{ hashFiles('**/requirements.txt') }}
        run: |
          echo "key=$KEY" >> "$GITHUB_OUTPUT"
          echo "run: ${{ hashFiles('README.md', '!nothing') }}"
      - if: hashFiles('**/*.nomatch') == ''
        run: echo "none=[${{ hashFiles('**/*.nomatch') }}]"
      - if: hashFiles('**/*.nomatch') != ''
        run: echo must be skipped
      - env:
          BAD: ${{ hashFiles('--nope', 'x') }}
        run: echo never
"""
    claimed, finished = forge.run_job(
        workflow(steps, outputs="      key: ${{ steps.key.outputs.key }}\n"), files
    )
    both = hashlib.sha256(
        hashlib.sha256(b"flask\n").digest() + hashlib.sha256(b"rq\n").digest()
    ).hexdigest()
    readme = hashlib.sha256(hashlib.sha256(b"x\n").digest()).hexdigest()
    assert forge.job_outputs(claimed.attempt_id) == {"key": f"deps-{both}"}
    assert f"run: {readme}" in forge.log(claimed.attempt_id, "key")
    assert forge.log(claimed.attempt_id, "step_3") == "none=[]\n"
    states = forge.steps(claimed.attempt_id)
    assert states["step_4"][:2] == ("completed", "skipped")
    assert states["step_5"][1] == "failure"
    assert "Invalid glob option --nope" in forge.log(claimed.attempt_id, "step_5")
    assert finished.report["result"] == "failure"
