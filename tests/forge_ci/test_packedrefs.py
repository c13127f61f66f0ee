"""Refs written straight into packed-refs, judged by real git against a plain dict of refs.

The reference is what the repository should hold: every ref it had (loose or packed) plus the
added ones. git itself must then list exactly that (``for-each-ref``, peeled values included),
find each by name (``show-ref --verify``, which binary-searches the sorted file), accept the
file (``fsck``), and keep it through its own ``pack-refs``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pygit2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forge_ci.gitstore import peeled_tag
from forge_ci.packedrefs import HEADER, add_packed_refs

ENV = {
    "PATH": os.environ["PATH"],
    "HOME": "/nonexistent",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@x",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@x",
}


def git(repo: Path, *args: str, stdin: str | None = None) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, env=ENV, input=stdin, capture_output=True, text=True, check=True
    ).stdout


def listed(repo: Path) -> dict[str, tuple[str, str]]:
    """Every ref git sees: name -> (object id, fully peeled id for a tag, else '').

    ``show-ref -d`` takes the peeled value from packed-refs' ``^`` line when there is one.
    """
    out = subprocess.run(
        ["git", "show-ref", "-d"], cwd=repo, env=ENV, capture_output=True, text=True
    ).stdout
    found: dict[str, tuple[str, str]] = {}
    for line in out.splitlines():
        oid, name = line.split(" ", 1)
        if name.endswith("^{}"):
            found[name[:-3]] = (found[name[:-3]][0], oid)
        else:
            found[name] = (oid, "")
    return found


@pytest.fixture(scope="module")
def objects(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str], list[str]]:
    """A bare repository with a few commits and annotated tags (one a tag of a tag)."""
    repo = tmp_path_factory.mktemp("packed") / "template.git"
    git(repo.parent, "init", "-q", "--bare", str(repo))
    tree = git(repo, "mktree", stdin="").strip()
    commits = []
    parent: list[str] = []
    for n in range(3):
        commits.append(git(repo, "commit-tree", tree, *parent, "-m", f"c{n}").strip())
        parent = ["-p", commits[-1]]
    tags = []
    for n, target in enumerate(commits[:2]):
        body = f"object {target}\ntype commit\ntag t{n}\ntagger t <t@x> 0 +0000\n\nt{n}\n"
        tags.append(git(repo, "mktag", stdin=body).strip())
    body = f"object {tags[0]}\ntype tag\ntag tt\ntagger t <t@x> 0 +0000\n\ntag of a tag\n"
    tags.append(git(repo, "mktag", stdin=body).strip())
    return repo, commits, tags


names = st.lists(
    st.from_regex(
        r"refs/(heads|tags|forge-ci/push-events)/[a-z0-9]{1,6}(/[A-Z_0-9-]{1,4})?", fullmatch=True
    ),
    min_size=0,
    max_size=12,
    unique=True,
)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    existing=names,
    loose=st.lists(st.booleans(), min_size=12, max_size=12),
    added=names,
    picks=st.lists(st.integers(0, 5), min_size=24, max_size=24),
)
def test_git_reads_exactly_the_refs_it_had_plus_the_added_ones(
    objects: tuple[Path, list[str], list[str]],
    tmp_path_factory: pytest.TempPathFactory,
    existing: list[str],
    loose: list[bool],
    added: list[str],
    picks: list[int],
) -> None:
    template, commits, tags = objects

    def pick(name: str, n: int) -> str:  # git refuses anything but a commit on a branch
        pool = commits if name.startswith("refs/heads/") else commits + tags
        return pool[picks[n] % len(pool)]

    repo = tmp_path_factory.mktemp("case") / "r.git"
    shutil.copytree(template, repo)
    # Refs git wrote itself: some packed by git, some left loose. No ref is both a name and a
    # prefix of another (git refuses that; so does the reference here).
    every = [
        n for n in existing if not any(o != n and o.startswith(n + "/") for o in existing + added)
    ]
    added = [n for n in added if not any(o != n and o.startswith(n + "/") for o in every + added)]
    expected: dict[str, str] = {}
    for n, name in enumerate(every):
        if loose[n % len(loose)]:
            continue
        expected[name] = pick(name, n)
    git(
        repo,
        "update-ref",
        "--stdin",
        stdin="".join(f"update {k} {v}\n" for k, v in expected.items()),
    )
    git(repo, "pack-refs", "--all")
    for n, name in enumerate(every):
        if name not in expected:  # loose, written after the packing
            expected[name] = pick(name, n)
            git(repo, "update-ref", name, expected[name])
    # The added names: new ones, and packed ones given a new value (a pin written again).
    loose_names = {n for n in every if (repo / n).is_file()}
    wanted = {name: pick(name, 12 + n) for n, name in enumerate(added) if name not in loose_names}
    git_repo = pygit2.Repository(str(repo))

    assert add_packed_refs(repo, wanted, lambda oid: peeled_tag(git_repo, oid))

    expected.update(wanted)
    peel = {t: git(repo, "rev-parse", f"{t}^{{}}").strip() for t in tags}
    assert listed(repo) == {k: (v, peel.get(v, "")) for k, v in expected.items()}
    if expected:  # each found by name: the sorted file is searched, not scanned
        found = git(repo, "show-ref", "--verify", "--hash", *expected).split()
        assert found == list(expected.values())
    text = (repo / "packed-refs").read_text()
    assert text.startswith(HEADER) and not (repo / "packed-refs.lock").exists()
    git(repo, "fsck", "--no-dangling")
    git(repo, "pack-refs", "--all")  # git rewrites what we wrote, and loses nothing
    assert listed(repo) == {k: (v, peel.get(v, "")) for k, v in expected.items()}


@pytest.fixture
def packed(objects: tuple[Path, list[str], list[str]], tmp_path: Path) -> tuple[Path, list[str]]:
    """A repository whose one branch, refs/heads/a, git packed; and the commits."""
    template, commits, _tags = objects
    repo = tmp_path / "r.git"
    shutil.copytree(template, repo)
    git(repo, "update-ref", "refs/heads/a", commits[0])
    git(repo, "pack-refs", "--all")
    return repo, commits


def test_a_held_lock_or_a_foreign_file_leaves_it_to_loose_refs(
    packed: tuple[Path, list[str]],
) -> None:
    repo, commits = packed
    before = (repo / "packed-refs").read_text()
    pins = {"refs/forge-ci/push-events/1": commits[1]}
    no_peel = lambda oid: None  # noqa: E731

    (repo / "packed-refs.lock").write_text("")  # git is rewriting the file right now
    assert add_packed_refs(repo, pins, no_peel) is False
    (repo / "packed-refs.lock").unlink()
    assert (repo / "packed-refs").read_text() == before

    # A file that does not promise sorted, fully peeled records: not ours to rewrite.
    (repo / "packed-refs").write_text(f"# pack-refs with: peeled \n{commits[0]} refs/heads/a\n")
    assert add_packed_refs(repo, pins, no_peel) is False
    (repo / "packed-refs").write_text(f"{commits[0]} refs/heads/a\n")  # git 1.x: no header
    assert add_packed_refs(repo, pins, no_peel) is False
    assert not (repo / "packed-refs.lock").exists()
    assert "refs/forge-ci/push-events/1" not in listed(repo)


def test_a_failure_while_writing_keeps_the_old_file_and_frees_the_lock(
    packed: tuple[Path, list[str]],
) -> None:
    repo, commits = packed
    before = (repo / "packed-refs").read_text()

    def broken(oid: str) -> str | None:
        raise OSError("disk gone")

    with pytest.raises(OSError, match="disk gone"):
        add_packed_refs(repo, {"refs/forge-ci/push-events/1": commits[1]}, broken)
    assert (repo / "packed-refs").read_text() == before
    assert not (repo / "packed-refs.lock").exists()
    assert listed(repo) == {"refs/heads/a": (commits[0], "")}
