"""The source archive: only a live, running, authorized attempt reads its run's pinned commit,
and a tree the runner would refuse is refused before git archive runs."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pygit2
import pytest
from pygit2.enums import FileMode

from forge_ci.accounts import create_user
from forge_ci.authz import Actor, Role
from forge_ci.coordinator import sources
from forge_ci.coordinator.credentials import new_request_id, new_token
from forge_ci.coordinator.errors import BadCredential
from forge_ci.coordinator.providers import create_provider
from forge_ci.coordinator.service import AttemptRefused, Coordinator
from forge_ci.db import Database
from forge_ci.gitstore import repository_path
from forge_ci.protocol import (
    Assignment,
    ClaimRequest,
    CompleteRequest,
    SourceRequest,
    StartRequest,
)
from forge_ci.repos import create_repository, grant, revoke
from forge_ci.runs.cancel import cancel_run
from forge_ci.runs.dispatch import dispatch_run
from forge_ci.settings import Settings

OPERATOR = Actor.operator()
CI = ".github/workflows/ci.yml"
WORKFLOW = """\
name: CI
on: workflow_dispatch
jobs:
  build:
    runs-on: self-hosted
    {permissions}
    steps:
      - {step}
"""
CHECKOUT = "uses: forge-ci/checkout@v1"
EXECUTION = "e" * 32


@dataclass
class Submodule:
    commit: str


@dataclass
class Source:
    settings: Settings
    database: Database
    coordinator: Coordinator
    provider_token: str
    owner: Actor
    admin: Actor

    def git(self) -> pygit2.Repository:
        return pygit2.Repository(str(repository_path(self.settings.repositories_dir, "o", "r")))

    def commit(self, files: Mapping[str, str | bytes | tuple[int, bytes] | Submodule]) -> str:
        git = self.git()
        index = pygit2.Index()
        for path, content in files.items():
            if isinstance(content, Submodule):
                index.add(pygit2.IndexEntry(path, pygit2.Oid(hex=content.commit), FileMode.COMMIT))
                continue
            mode, data = (
                content
                if isinstance(content, tuple)
                else (FileMode.BLOB, content.encode() if isinstance(content, str) else content)
            )
            index.add(pygit2.IndexEntry(path, git.create_blob(data), mode))
        signature = pygit2.Signature("O", "o@example.com")
        oid = git.create_commit(None, signature, signature, "c", index.write_tree(git), [])
        git.references.create("refs/heads/main", oid, force=True)
        return str(oid)

    def running(
        self,
        files: Mapping[str, str | bytes | tuple[int, bytes] | Submodule],
        permissions: str = "",
        by: Actor | None = None,
    ) -> tuple[Assignment, str]:
        """A run of ``files`` (plus the workflow), claimed and started: (assignment, token)."""
        step = "run: ls" if permissions else CHECKOUT
        self.commit({CI: WORKFLOW.format(permissions=permissions, step=step), **files})
        with self.database.session() as session:
            dispatch_run(session, self.settings, by or self.owner, "o/r", "main", CI)
            session.commit()
        token = new_token()
        result = self.coordinator.claim(
            self.provider_token, ClaimRequest(new_request_id(), token, 0)
        )
        assert result.assignment is not None
        self.coordinator.start(token, result.assignment.attempt_id, StartRequest(EXECUTION))
        return result.assignment, token

    def fetch(self, assignment: Assignment, token: str, execution: str = EXECUTION) -> bytes:
        archive, _ = self.coordinator.source(token, assignment.attempt_id, SourceRequest(execution))
        with archive.file:
            data = archive.file.read()
        assert len(data) == archive.size
        return data

    def refusal(self, assignment: Assignment, token: str, execution: str = EXECUTION) -> str:
        with pytest.raises(AttemptRefused) as caught:
            self.fetch(assignment, token, execution)
        return f"{caught.value.error.code}: {caught.value.error.message}"


@pytest.fixture
def source(settings: Settings, database: Database) -> Source:
    with database.session() as session:
        owner = Actor.for_user(create_user(session, OPERATOR, "o", None))
        admin = Actor.for_user(create_user(session, OPERATOR, "a", None))
        create_repository(session, settings, OPERATOR, "o/r")
        grant(session, OPERATOR, "o/r", "a", Role.ADMIN)
        token = new_token()
        create_provider(session, OPERATOR, "p", token, "self-hosted,linux", "all", ())
        session.commit()
    return Source(settings, database, Coordinator(database.session, settings), token, owner, admin)


def _members(data: bytes) -> dict[str, tuple[str, int, bytes]]:
    found = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        for info in tar:
            kind = "dir" if info.isdir() else "file" if info.isreg() else "other"
            handle = tar.extractfile(info) if info.isreg() else None
            found[info.name] = (kind, info.mode, handle.read() if handle else b"")
    return found


def test_a_running_attempt_gets_its_pinned_commit(source: Source) -> None:
    assignment, token = source.running(
        {
            "README.md": "hello\n",
            "bin/run.sh": (FileMode.BLOB_EXECUTABLE, b"#!/bin/sh\n"),
            "data.bin": bytes(range(256)),
            "ignored/x.txt": "not exported\n",
            ".gitattributes": "ignored export-ignore\n",
        }
    )
    sha = assignment.contexts["github"]["sha"]
    # A later push does not change what the run gets.
    source.commit({"README.md": "changed\n"})
    members = _members(source.fetch(assignment, token))
    assert members["README.md"] == ("file", 0o644, b"hello\n")
    assert members["bin/run.sh"] == ("file", 0o755, b"#!/bin/sh\n")
    assert members["data.bin"][2] == bytes(range(256))
    assert "ignored/x.txt" not in members  # git archive attributes apply
    assert {kind for kind, _, _ in members.values()} <= {"file", "dir"}
    assert len(sha) == 40


def test_only_the_bound_running_execution_may_read(source: Source) -> None:
    assignment, token = source.running({"a": "1"})
    assert "execution_mismatch" in source.refusal(assignment, token, "f" * 32)
    with pytest.raises(BadCredential):
        source.fetch(assignment, new_token())


def test_an_attempt_that_has_not_started_cannot_read(source: Source) -> None:
    source.commit({CI: WORKFLOW.format(permissions="", step=CHECKOUT), "a": "1"})
    with source.database.session() as session:
        dispatch_run(session, source.settings, source.owner, "o/r", "main", CI)
        session.commit()
    token = new_token()
    claimed = source.coordinator.claim(
        source.provider_token, ClaimRequest(new_request_id(), token, 0)
    )
    assert claimed.assignment is not None
    refusal = source.refusal(claimed.assignment, token)
    assert refusal.startswith("execution_mismatch") and "call start first" in refusal


def test_a_completed_attempt_cannot_read(source: Source) -> None:
    assignment, token = source.running({"a": "1"})
    source.coordinator.complete(
        token, assignment.attempt_id, CompleteRequest(EXECUTION, "failure", 0)
    )
    assert source.refusal(assignment, token).startswith("attempt_ended")


def test_an_attempt_being_cancelled_cannot_read(source: Source) -> None:
    assignment, token = source.running({"a": "1"})
    with source.database.session() as session:
        cancel_run(session, source.owner, "o/r", 1)
        session.commit()
    assert source.refusal(assignment, token).startswith("cancel_requested")


def test_a_requester_who_lost_access_gets_the_attempt_cancelled(source: Source) -> None:
    assignment, token = source.running({"a": "1"}, by=source.admin)
    with source.database.session() as session:
        revoke(session, OPERATOR, "o/r", "a")
        session.commit()
    refusal = source.refusal(assignment, token)
    assert refusal.startswith("cancel_requested") and "may no longer run workflows" in refusal
    # The cancellation stands: the next heartbeat-like request sees it too.
    assert source.refusal(assignment, token).startswith("cancel_requested")


def test_a_job_without_contents_permission_gets_no_source(source: Source) -> None:
    assignment, token = source.running({"a": "1"}, permissions="permissions: {}")
    assert assignment.source_archive_path == ""
    assert source.refusal(assignment, token).startswith("source_not_permitted")


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"link": (FileMode.LINK, b"/etc/passwd")}, "the symbolic link 'link'"),
        ({"deep/er/link": (FileMode.LINK, b"../x")}, "the symbolic link 'deep/er/link'"),
        ({".home/.bashrc": "x"}, "'.home'; the runner keeps HOME in .home"),
        ({".tmp": "x"}, "'.tmp'"),
    ],
)
def test_trees_the_runner_would_refuse_are_refused(
    source: Source, files: dict[str, tuple[int, bytes] | str], message: str
) -> None:
    assignment, token = source.running(files)
    refusal = source.refusal(assignment, token)
    assert refusal.startswith("source_refused") and message in refusal


def test_submodules_are_refused(source: Source) -> None:
    other = source.commit({"x": "1"})
    assignment, token = source.running({"vendor/lib": Submodule(other)})
    assert "the submodule 'vendor/lib'" in source.refusal(assignment, token)


def test_limits_of_files_bytes_and_time(source: Source, monkeypatch: pytest.MonkeyPatch) -> None:
    assignment, token = source.running({f"f{index}": str(index) for index in range(6)})
    monkeypatch.setattr(sources, "MAX_SOURCE_FILES", 5)
    assert "more than 5 files" in source.refusal(assignment, token)
    monkeypatch.setattr(sources, "MAX_SOURCE_FILES", 10)
    monkeypatch.setattr(sources, "MAX_SOURCE_BYTES", 5)
    assert "larger than 5 bytes" in source.refusal(assignment, token)
    monkeypatch.undo()
    target = _target(source, assignment)
    with pytest.raises(sources.SourceRefused, match="archive is larger than 100 bytes"):
        sources.build_archive(target, limit=100)  # headers count too
    with pytest.raises(sources.SourceRefused, match="longer than 0 seconds"):
        sources.build_archive(target, seconds=0)


def test_a_missing_pin_means_the_source_is_gone(source: Source) -> None:
    assignment, token = source.running({"a": "1"})
    target = _target(source, assignment)
    source.git().references.delete(target.pin_ref)
    assert "no longer pinned" in source.refusal(assignment, token)


def _target(source: Source, assignment: Assignment) -> sources.SourceTarget:
    from forge_ci.models import Run

    with source.database.session() as session:
        run = session.get(Run, assignment.run_id)
        assert run is not None
        directory = repository_path(source.settings.repositories_dir, "o", "r")
        return sources.SourceTarget(Path(directory), run.sha, run.pin_ref)
