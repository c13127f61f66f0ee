"""The source bundle: the checkout step's pinned commit with the history and tags it asked for,
only for a live, running attempt of this execution, and never larger than the cap."""

from __future__ import annotations

import subprocess
from datetime import timedelta
from pathlib import Path
from typing import Any

import pygit2
import pytest

from forge_ci.accounts import create_user
from forge_ci.authz import Actor
from forge_ci.coordinator import bundles
from forge_ci.coordinator.credentials import new_request_id, new_token
from forge_ci.coordinator.errors import BadCredential
from forge_ci.coordinator.providers import create_provider
from forge_ci.coordinator.service import AttemptRefused, Coordinator
from forge_ci.db import Database
from forge_ci.errors import InvalidInput
from forge_ci.models import Run, utcnow
from forge_ci.protocol import Assignment, ClaimRequest, SourceRequest, StartRequest
from forge_ci.repos import create_repository
from forge_ci.runs.cancel import cancel_run
from forge_ci.runs.checkouts import checkout_pin_name
from forge_ci.runs.dispatch import dispatch_run
from forge_ci.runs.rerun import rerun_run
from forge_ci.settings import Settings
from tests.forge_ci.coordinator.test_sources import CI, EXECUTION, OPERATOR, Source


@pytest.fixture
def source(settings: Settings, database: Database) -> Source:
    with database.session() as session:
        owner = Actor.for_user(create_user(session, OPERATOR, "o", None))
        create_repository(session, settings, OPERATOR, "o/r")
        token = new_token()
        create_provider(session, OPERATOR, "p", token, "self-hosted,linux", "all", ())
        session.commit()
    return Source(settings, database, Coordinator(database.session, settings), token, owner, owner)


WORKFLOW = """\
name: CI
on: workflow_dispatch
jobs:
  build:
    runs-on: self-hosted
    steps:
      - uses: actions/checkout@v4
        with: {inputs}
"""


def _history(source: Source, count: int) -> list[str]:
    """``count`` commits on main, each with the workflow; tag v1 on the second (annotated)."""
    git = source.git()
    signature = pygit2.Signature("O", "o@example.com")
    parents: list[pygit2.Oid] = []
    shas = []
    for number in range(count):
        index = pygit2.Index()
        index.add(pygit2.IndexEntry("n.txt", git.create_blob(f"{number}\n"), 0o100644))
        workflow = WORKFLOW.format(inputs="{fetch-depth: 0}")
        index.add(pygit2.IndexEntry(CI, git.create_blob(workflow), 0o100644))
        oid = git.create_commit(
            None, signature, signature, f"c{number}", index.write_tree(git), parents
        )
        parents = [oid]
        shas.append(str(oid))
    git.references.create("refs/heads/main", parents[0], force=True)
    git.create_tag("v1", pygit2.Oid(hex=shas[1]), pygit2.enums.ObjectType.COMMIT, signature, "v1")
    return shas


def _commit_workflow(source: Source, inputs: str) -> None:
    git = source.git()
    head = git.head.peel(pygit2.Commit)
    index = pygit2.Index()
    index.read_tree(head.tree)
    index.add(pygit2.IndexEntry(CI, git.create_blob(WORKFLOW.format(inputs=inputs)), 0o100644))
    signature = pygit2.Signature("O", "o@example.com")
    oid = git.create_commit(None, signature, signature, "wf", index.write_tree(git), [head.id])
    git.references.create("refs/heads/main", oid, force=True)


def _running(source: Source, inputs: str) -> tuple[Assignment, str]:
    _commit_workflow(source, inputs)
    with source.database.session() as session:
        dispatch_run(session, source.settings, source.owner, "o/r", "main", CI)
        session.commit()
    token = new_token()
    result = source.coordinator.claim(
        source.provider_token, ClaimRequest(new_request_id(), token, 0)
    )
    assert result.assignment is not None
    source.coordinator.start(token, result.assignment.attempt_id, StartRequest(EXECUTION))
    return result.assignment, token


def _fetch(source: Source, assignment: Assignment, token: str) -> bytes:
    archive, _ = source.coordinator.source_bundle(
        token, assignment.attempt_id, SourceRequest(EXECUTION)
    )
    with archive.file:
        return archive.file.read()


def _clone(data: bytes, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    bundle = tmp_path / "b.bundle"
    bundle.write_bytes(data)
    heads = subprocess.run(
        ["git", "bundle", "list-heads", str(bundle)], capture_output=True, text=True, check=True
    ).stdout
    refs = {name: sha for sha, name in (line.split(" ", 1) for line in heads.splitlines())}
    work = tmp_path / "w"
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    shallow = [sha for name, sha in refs.items() if name.startswith(bundles.SHALLOW_PREFIX)]
    if shallow:
        (work / ".git" / "shallow").write_text("".join(f"{s}\n" for s in shallow))
    subprocess.run(
        ["git", "-C", str(work), "fetch", "-q", str(bundle), f"{bundles.COMMIT_REF}:refs/c",
         "refs/tags/*:refs/tags/*"],
        check=True,
    )  # fmt: skip
    return work, refs


def _git(work: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(work), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_fetch_depth_0_gives_all_history_and_tags(source: Source, tmp_path: Path) -> None:
    _history(source, 4)
    assignment, token = _running(source, "{fetch-depth: 0}")
    work, refs = _clone(_fetch(source, assignment, token), tmp_path)
    assert _git(work, "rev-list", "--count", "refs/c") == "5"
    assert _git(work, "describe", "--tags", "refs/c").startswith("v1-3-g")
    assert refs["refs/heads/main"] == assignment.contexts["github"]["sha"]
    assert not any(name.startswith(bundles.SHALLOW_PREFIX) for name in refs)


def test_fetch_depth_n_is_shallow_and_has_no_tags_unless_asked(
    source: Source, tmp_path: Path
) -> None:
    _history(source, 4)
    assignment, token = _running(source, "{fetch-depth: 2}")
    work, refs = _clone(_fetch(source, assignment, token), tmp_path)
    assert _git(work, "rev-list", "--count", "refs/c") == "2"
    assert _git(work, "rev-parse", "--is-shallow-repository") == "true"
    assert not any(name.startswith("refs/tags/") for name in refs)


def test_other_attempts_credential_is_refused(source: Source) -> None:
    _history(source, 2)
    first, first_token = _running(source, "{fetch-depth: 1}")
    second, _ = _running(source, "{fetch-depth: 1}")
    with pytest.raises(BadCredential):
        _fetch(source, second, first_token)
    assert _fetch(source, first, first_token)


def test_an_expired_lease_is_refused(source: Source) -> None:
    _history(source, 2)
    assignment, token = _running(source, "{fetch-depth: 0}")
    later = utcnow() + timedelta(seconds=source.settings.lease_seconds + 60)
    source.coordinator.clock = lambda: later
    with pytest.raises(AttemptRefused) as caught:
        _fetch(source, assignment, token)
    assert caught.value.error.code == "attempt_ended"
    assert "the lease expired" in caught.value.error.message


def test_a_ref_is_pinned_at_run_creation(source: Source, tmp_path: Path) -> None:
    shas = _history(source, 3)
    git = source.git()
    git.references.create("refs/heads/feature", pygit2.Oid(hex=shas[0]))
    assignment, token = _running(source, "{ref: feature, fetch-depth: 0}")
    git.references.create("refs/heads/feature", pygit2.Oid(hex=shas[2]), force=True)
    subprocess.run(["git", "--git-dir", git.path, "gc", "-q", "--prune=now"], check=True)
    work, refs = _clone(_fetch(source, assignment, token), tmp_path)
    assert _git(work, "rev-parse", "refs/c") == shas[0]
    assert refs["refs/heads/feature"] == shas[0]


def test_a_bundle_over_the_cap_is_refused(source: Source, monkeypatch: pytest.MonkeyPatch) -> None:
    _history(source, 3)
    assignment, token = _running(source, "{fetch-depth: 0}")
    monkeypatch.setattr(bundles, "MAX_BUNDLE_BYTES", 200)
    with pytest.raises(AttemptRefused) as caught:
        _fetch(source, assignment, token)
    assert caught.value.error.code == "source_refused"
    assert "bundle is larger than 200 bytes" in caught.value.error.message


# -- with.ref at run creation ------------------------------------------------------------------


def _dispatch(source: Source, inputs: str) -> Run:
    _commit_workflow(source, inputs)
    with source.database.session() as session:
        run = dispatch_run(session, source.settings, source.owner, "o/r", "main", CI)
        session.commit()
        session.expunge(run)
    return run


def _checkout_step(run: Run) -> dict[str, Any]:
    (step,) = run.plan["jobs"][0]["steps"]
    return dict(step)


def test_a_tag_ref_is_resolved_to_its_commit_and_pinned(source: Source) -> None:
    shas = _history(source, 3)
    run = _dispatch(source, "{ref: v1}")
    step = _checkout_step(run)
    assert step["with"]["ref"] == shas[1] and step["checkout_ref"] == "refs/tags/v1"
    pin = checkout_pin_name(run.pin_ref, shas[1])
    assert str(source.git().references[pin].target) == shas[1]
    # The run's own commit (written or as the default) needs no second pin.
    own = _dispatch(source, "{fetch-depth: 1}")
    assert _checkout_step(own)["with"]["ref"] == own.sha
    assert not [name for name in source.git().references if name.startswith(own.pin_ref + "-")]


def test_a_rerun_checks_out_the_same_commit_after_the_tag_moved(source: Source) -> None:
    shas = _history(source, 3)
    run = _dispatch(source, "{ref: v1}")
    source.git().references.delete("refs/tags/v1")
    source.git().references.create("refs/tags/v1", pygit2.Oid(hex=shas[2]))
    with source.database.session() as session:
        cancel_run(session, source.owner, "o/r", run.number)
        session.commit()
        again = rerun_run(session, source.settings, source.owner, "o/r", run.number)
        session.commit()
        assert _checkout_step(again)["with"]["ref"] == shas[1]
        assert again.plan_digest == run.plan_digest
        pin = checkout_pin_name(again.pin_ref, shas[1])
        assert str(source.git().references[pin].target) == shas[1]


def test_a_ref_expression_is_evaluated_from_the_snapshot_and_pinned(source: Source) -> None:
    shas = _history(source, 3)
    # A push-only field is empty in a dispatch run: the || falls back to the dispatched ref.
    run = _dispatch(source, "{ref: '${{ github.event.pull_request.head.sha || github.ref }}'}")
    step = _checkout_step(run)
    assert step["with"]["ref"] == run.sha and step["checkout_ref"] == "refs/heads/main"
    tagged = _dispatch(source, "{ref: 'v${{ 1 }}'}")
    assert _checkout_step(tagged)["with"]["ref"] == shas[1]
    empty = _dispatch(source, "{ref: '${{ github.head_ref }}'}")  # '' is the run's commit
    assert _checkout_step(empty)["with"]["ref"] == empty.sha
    with pytest.raises(InvalidInput, match="with.ref 'refs/pull//merge' is neither a branch"):
        _dispatch(source, "{ref: 'refs/pull/${{ github.event.number }}/merge'}")


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("nope", "with.ref 'nope' is neither a branch nor a tag of o/r"),
        ("refs/pull/1/head", "neither a branch nor a tag of o/r (looked for nothing"),
        ("refs/forge-ci/pipelines/x", "neither a branch nor a tag"),
        ("0" * 40, "is a commit other than the run's"),
    ],
)
def test_refs_outside_the_repository_fail_run_creation(
    source: Source, ref: str, message: str
) -> None:
    _history(source, 2)
    before = set(source.git().references)
    with pytest.raises(InvalidInput) as caught:
        _dispatch(source, "{ref: '" + ref + "'}")
    assert message in caught.value.message
    assert "job 'build', step 'step_1'" in caught.value.message
    assert set(source.git().references) == before  # no pin left behind
