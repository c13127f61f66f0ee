"""Source bundles: the checkout step's commit with its history, as a bounded ``git bundle``.

``POST attempts/<id>/source.bundle`` is the checkout step's way to a real ``.git``. The same
checks as the source archive apply first (:func:`forge_ci.coordinator.sources.locate_source`:
live running attempt of this execution, requester still authorized, job reads contents, tree
check). What the bundle holds is decided here from the run's snapshot, never by the request:

    commit     the checkout step's pinned ``with.ref`` (the run's commit by default), which
               must still be pinned (the run pin, or ``<run pin>-checkout-<sha>``)
    history    ``fetch-depth`` 0: every commit reachable from it; N: the N latest (breadth
               first by distance, as ``git fetch --depth=N``); the commits whose parents were
               left out are listed as refs ``refs/forge-ci/shallow/<sha>`` so the runner writes
               them to ``.git/shallow``
    refs       ``refs/forge-ci/commit`` -> the commit; ``refs/heads/<branch>`` -> the commit
               when the run's ref (or the checkout's ref) is a branch; ``refs/tags/*`` for
               ``fetch-depth: 0`` or ``fetch-tags: true``: the tags whose commit is in the history

The bundle is made by ``git bundle create`` in a temporary repository that borrows the objects
(``objects/info/alternates``) and is shallow at those commits; at most 30 s and 128 MiB.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO

import pygit2
from sqlalchemy.orm import Session

from forge_ci.coordinator.errors import SourceRefused
from forge_ci.coordinator.sources import (
    SOURCE_SECONDS,
    SourceArchive,
    SourceTarget,
    check_tree,
    locate_source,
    stream_git,
)
from forge_ci.models import Attempt, Job
from forge_ci.protocol import SourceRequest
from forge_ci.runs.checkouts import checkout_commit, checkout_pin_name
from forge_ci.runs.pins import pinned_commit

MAX_BUNDLE_BYTES = 128 * 1024 * 1024
COMMIT_REF = "refs/forge-ci/commit"
SHALLOW_PREFIX = "refs/forge-ci/shallow/"
_SPOOL_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class BundleTarget(SourceTarget):
    """What one checkout may read: a pinned commit (``pin_ref`` keeps it), history, refs."""

    #: 0: all history.
    depth: int = 1
    tags: bool = False
    #: ``refs/heads/<name>`` pointing at ``sha`` in the bundle, or "".
    branch: str = ""


def locate_bundle(
    session: Session,
    repositories_dir: Path,
    attempt: Attempt,
    request: SourceRequest,
    now: datetime,
) -> BundleTarget | str:
    """The checkout ``attempt`` may fetch, or why its requester may no longer run code."""
    source = locate_source(session, repositories_dir, attempt, request, now)
    if isinstance(source, str):
        return source
    job = session.get(Job, attempt.job_id)
    assert job is not None
    run = job.run
    sha, inputs = checkout_commit(job.definition(), run.sha)
    pin = run.pin_ref if sha == run.sha else checkout_pin_name(run.pin_ref, sha)
    ref = inputs["checkout_ref"] or (run.ref if sha == run.sha else "")
    depth_text = inputs.get("fetch-depth", "1")
    depth = int(depth_text) if depth_text.isdigit() else 1
    return BundleTarget(
        repository_dir=source.repository_dir,
        sha=sha,
        pin_ref=pin,
        depth=depth,
        tags=depth == 0 or inputs.get("fetch-tags") == "true",
        branch=ref if ref.startswith("refs/heads/") else "",
    )


def history(
    git: pygit2.Repository, sha: str, depth: int, deadline: float
) -> tuple[set[str], set[str]]:
    """The commits within ``depth`` of ``sha`` (0: all) and the ones whose parents are cut off."""
    included: dict[str, int] = {sha: 0}
    shallow: set[str] = set()
    frontier = [sha]
    while frontier:
        if time.monotonic() > deadline:
            raise SourceRefused("walking the history for the bundle took too long")
        following: list[str] = []
        for current in frontier:
            commit = git[current]
            assert isinstance(commit, pygit2.Commit)
            distance = included[current]
            if depth and distance == depth - 1:
                if commit.parent_ids:
                    shallow.add(current)
                continue
            for parent in commit.parent_ids:
                key = str(parent)
                if key not in included:
                    included[key] = distance + 1
                    following.append(key)
        frontier = following
    return set(included), shallow


def _tags(git: pygit2.Repository, commits: set[str]) -> dict[str, str]:
    """``refs/tags/*`` -> object id (annotated tags keep their tag object) on ``commits``."""
    found: dict[str, str] = {}
    for name in git.references:
        if not name.startswith("refs/tags/"):
            continue
        reference = git.references[name]
        try:
            peeled = reference.peel(pygit2.Commit)
        except (pygit2.InvalidSpecError, ValueError, KeyError):
            continue
        if str(peeled.id) in commits:
            found[name] = str(reference.target)
    return found


def build_bundle(
    target: BundleTarget,
    *,
    seconds: float = SOURCE_SECONDS,
    limit: int | None = None,
) -> SourceArchive:
    """The bundle of ``target`` (see the module doc), within ``seconds`` and ``limit`` bytes."""
    limit = MAX_BUNDLE_BYTES if limit is None else limit
    started = time.monotonic()
    deadline = started + seconds
    try:
        git = pygit2.Repository(str(target.repository_dir))
    except pygit2.GitError:
        raise SourceRefused("the repository of this run cannot be opened") from None
    if pinned_commit(git, target.pin_ref) != target.sha:
        raise SourceRefused(
            f"commit {target.sha[:12]} is no longer pinned for this run; its source is gone"
        )
    check_tree(git, target.sha)
    commits, shallow = history(git, target.sha, target.depth, deadline)
    refs = {COMMIT_REF: target.sha}
    if target.branch:
        refs[target.branch] = target.sha
    if target.tags:
        refs.update(_tags(git, commits))
    for commit in shallow:
        refs[SHALLOW_PREFIX + commit] = commit
    spool: IO[bytes] = tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES)  # noqa: SIM115
    try:
        with tempfile.TemporaryDirectory(prefix="forge-ci-bundle-") as work:
            borrowed = _borrowing_repository(Path(work), target.repository_dir, refs, shallow)
            command = ["git", f"--git-dir={borrowed}", "bundle", "create", "--quiet", "-"]
            size = stream_git([*command, "--all"], spool, deadline, seconds, limit, "bundle")
    except BaseException:
        spool.close()
        raise
    spool.seek(0)
    return SourceArchive(spool, size, target.sha)


def _borrowing_repository(
    work: Path, source: Path, refs: dict[str, str], shallow: set[str]
) -> Path:
    """A bare repository with ``refs``, reading its objects from ``source``, shallow at ``shallow``.

    Written directly (no ``git init``): no template, hook or configuration is copied in.
    """
    directory = work / "bundle.git"
    (directory / "objects" / "info").mkdir(parents=True)
    (directory / "refs").mkdir()
    (directory / "HEAD").write_text(f"ref: {COMMIT_REF}\n")
    (directory / "config").write_text("[core]\n\trepositoryformatversion = 0\n\tbare = true\n")
    objects = (source / "objects").resolve()
    (directory / "objects" / "info" / "alternates").write_text(f"{objects}\n")
    lines = "".join(f"{sha} {name}\n" for name, sha in sorted(refs.items()))
    (directory / "packed-refs").write_text(lines)
    if shallow:
        (directory / "shallow").write_text("".join(f"{sha}\n" for sha in sorted(shallow)))
    return directory
