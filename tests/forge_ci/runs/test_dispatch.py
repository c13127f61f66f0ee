"""Dispatch: a workflow_dispatch run from a local branch, pinned, with an immutable snapshot."""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest
from sqlalchemy import select, text, update
from sqlalchemy.exc import DBAPIError

from forge_ci.errors import InvalidInput, NotFound, PermissionDenied
from forge_ci.models import Run
from forge_ci.runs.definition import copy_definition
from forge_ci.runs.dispatch import dispatch_run
from forge_ci.runs.pins import PIN_PREFIX, pinned_commit
from forge_ci.runs.rerun import rerun_run
from forge_ci.workflow import WorkflowInvalid, plan_digest
from tests.forge_ci.runs.conftest import CI, Forge, Workdir, job, workflow

PIPELINE = workflow(
    job("build")
    + job("test", needs="build")
    + "  env-check:\n    runs-on: [self-hosted]\n    env:\n      TESTED: sha=${{ github.sha }}\n"
    "    steps:\n      - run: echo $TESTED\n"
)


def _pins(forge: Forge) -> list[str]:
    return [name for name in forge.git().references if name.startswith(PIN_PREFIX)]


def test_dispatch_pins_the_commit_and_stores_the_snapshot(forge: Forge) -> None:
    sha = forge.commit({CI: PIPELINE})
    run = forge.dispatch()
    forge.session.commit()

    assert (run.number, run.state, run.conclusion) == (1, "queued", None)
    assert run.sha == sha and run.ref == "refs/heads/main"
    assert run.event_name == "workflow_dispatch" and run.workflow_path == CI
    assert run.workflow_name == "CI"
    assert run.pin_ref.startswith(PIN_PREFIX) and len(run.pin_ref) == len(PIN_PREFIX) + 32
    assert pinned_commit(forge.git(), run.pin_ref) == sha
    # The YAML exactly as stored in git, and the context captured once.
    blob = forge.git()[sha].tree / ".github" / "workflows" / "ci.yml"
    assert run.workflow_source.encode() == blob.data
    event = run.context.pop("event")
    assert run.context == {
        "repository": "alice/demo",
        "repository_owner": "alice",
        "sha": sha,
        "ref": "refs/heads/main",
        "ref_name": "main",
        "ref_type": "branch",
        "ref_protected": False,
        "event_name": "workflow_dispatch",
        "head_ref": "",
        "base_ref": "",
        "inputs": {},
        "actor": "alice",
        "triggering_actor": "alice",
        "workflow": "CI",
        "workflow_ref": f"alice/demo/{CI}@refs/heads/main",
        "workflow_sha": sha,
    }
    # The dispatch payload: no inputs yet (the dispatch form's inputs are their own change).
    assert event["inputs"] == {} and event["ref"] == "refs/heads/main"
    assert event["workflow"] == CI
    assert event["repository"]["full_name"] == "alice/demo"
    assert event["sender"] == {"login": "alice", "type": "User"}
    assert run.plan_digest == plan_digest(run.plan) and run.plan_version == 1
    step_env = run.plan["jobs"][2]["steps"][0]["env"]
    assert step_env == {"TESTED": f"sha={sha}"}
    # Roots queued, dependents waiting.
    assert forge.states(1) == {"build": "queued", "test": "waiting", "env-check": "queued"}
    assert forge.job(1, "test").needs == ["build"]
    assert forge.job(1, "build").runs_on == ["self-hosted", "linux"]


@pytest.mark.parametrize(
    ("branch", "error", "message"),
    [
        ("refs/heads/main", InvalidInput, "give a branch name such as main"),
        ("refs/tags/v1", InvalidInput, "give a branch name"),
        ("refs/forge-ci/pipelines/x", InvalidInput, "give a branch name"),
        ("HEAD", InvalidInput, "give a branch name"),
        ("main~1", InvalidInput, "not a valid branch name"),
        ("main^{tree}", InvalidInput, "not a valid branch name"),
        ("@{-1}", InvalidInput, "not a valid branch name"),
        ("v1", NotFound, "branch v1 does not exist"),  # a tag of that name is not a branch
        ("nope", NotFound, "branch nope does not exist"),
    ],
)
def test_only_existing_local_branches_can_be_dispatched(
    forge: Forge, branch: str, error: type[Exception], message: str
) -> None:
    sha = forge.commit({CI: PIPELINE})
    forge.git().references.create("refs/tags/v1", pygit2.Oid(hex=sha))
    with pytest.raises(error, match=message):
        forge.dispatch(branch=branch)
    assert forge.session.scalar(select(Run.id)) is None
    assert _pins(forge) == []


def test_dispatch_refusals_name_the_problem(forge: Forge) -> None:
    forge.commit(
        {
            CI: PIPELINE,
            ".github/workflows/push.yml": workflow(job("a"), on="push"),
            ".github/workflows/broken.yml": "on: workflow_dispatch\njobs: {}\n",
            ".github/workflows/big.yml": "#" * 70_000,
        }
    )
    with pytest.raises(InvalidInput, match="does not declare workflow_dispatch"):
        forge.dispatch(path=".github/workflows/push.yml")
    with pytest.raises(WorkflowInvalid, match="broken.yml:2:7: jobs must define at least"):
        forge.dispatch(path=".github/workflows/broken.yml")
    with pytest.raises(InvalidInput, match="70000 bytes .* limit is 65536"):
        forge.dispatch(path=".github/workflows/big.yml")
    with pytest.raises(NotFound, match="missing.yml does not exist at commit"):
        forge.dispatch(path=".github/workflows/missing.yml")
    with pytest.raises(InvalidInput, match="directly under .github/workflows/"):
        forge.dispatch(path="ci.yml")
    with pytest.raises(InvalidInput, match="not a workflow file name"):
        forge.dispatch(path=".github/workflows/-x.txt")
    # Only current owners/admins (and site admins) may make the server run code.
    with pytest.raises(PermissionDenied, match="admin access to alice/demo is required"):
        forge.dispatch(actor=forge.people["bob"])
    with pytest.raises(PermissionDenied):
        forge.dispatch(actor=forge.people["dave"])
    with pytest.raises(NotFound, match="repository alice/demo not found"):
        forge.dispatch(actor=forge.people["erin"])
    assert forge.session.scalar(select(Run.id)) is None
    assert forge.dispatch(actor=forge.people["carol"]).number == 1


def test_a_requester_demoted_before_the_write_creates_nothing(
    forge: Forge, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Authorization is rechecked inside the write transaction, after the git reads."""
    from forge_ci.models import Membership
    from forge_ci.runs import create

    forge.commit({CI: PIPELINE})
    real = create.RunCreation.repository

    def demote_then_read(self: create.RunCreation) -> object:
        forge.session.execute(
            update(Membership).where(Membership.role == "admin").values(role="write")
        )
        return real(self)

    monkeypatch.setattr(create.RunCreation, "repository", demote_then_read)
    with pytest.raises(PermissionDenied):
        forge.dispatch(actor=forge.people["carol"])
    assert forge.session.scalar(select(Run.id)) is None
    assert _pins(forge) == []


def test_source_survives_force_push_and_gc_and_a_rerun_is_byte_identical(
    forge: Forge, tmp_path: Path
) -> None:
    work = Workdir(tmp_path / "work", forge.path)
    first = work.commit({CI: PIPELINE, "src/app.txt": "version 1\n"}, "first")
    work.push()
    run = forge.dispatch()
    forge.session.commit()
    assert run.sha == first
    for key in ("build", "env-check", "test"):
        forge.finish(1, key)
    assert forge.run(1).conclusion == "success"

    # Rewrite history: an unrelated root commit with another workflow replaces main.
    work.git("checkout", "-q", "--orphan", "rewritten")
    work.git("rm", "-r", "-q", "-f", ".")
    other = workflow(job("something-else"))
    replaced = work.commit({CI: other, "src/app.txt": "version 2\n"}, "rewritten")
    work.push("main", force=True)
    work.bare_git("reflog", "expire", "--expire=now", "--all")
    work.bare_git("gc", "-q", "--prune=now")
    assert work.bare_git("rev-parse", "refs/heads/main") == replaced
    # Still readable, through the pin only.
    assert work.bare_git("cat-file", "-t", first) == "commit"
    assert work.bare_git("show", f"{run.pin_ref}:src/app.txt") == "version 1"
    assert work.bare_git("show", f"{run.pin_ref}:{CI}") + "\n" == PIPELINE

    again = rerun_run(forge.session, forge.settings, forge.alice, "alice/demo", 1)
    forge.session.commit()
    original = forge.run(1)
    assert again.number == 2 and again.rerun_of_id == original.id
    assert again.sha == first and again.pin_ref != original.pin_ref
    assert pinned_commit(forge.git(), again.pin_ref) == first
    assert again.workflow_source.encode() == original.workflow_source.encode()
    assert again.workflow_source == PIPELINE
    assert again.plan == original.plan and again.plan_digest == original.plan_digest
    # The same context, plus the first run's number and the attempt count, as on GitHub.
    assert again.context == {**original.context, "run_number": "1", "run_attempt": "2"}
    assert forge.states(2) == {"build": "queued", "test": "waiting", "env-check": "queued"}
    # Deleting the first run's pin would not matter to the rerun either.
    forge.git().references.delete(original.pin_ref)
    work.bare_git("gc", "-q", "--prune=now")
    assert work.bare_git("show", f"{again.pin_ref}:src/app.txt") == "version 1"


def test_the_snapshot_cannot_be_changed_by_the_orm_or_by_sql(forge: Forge) -> None:
    forge.commit({CI: PIPELINE})
    run = forge.dispatch()
    forge.session.commit()
    with pytest.raises(ValueError, match="sha is part of the immutable snapshot"):
        run.sha = "0" * 40
    with pytest.raises(ValueError, match="plan is part of the immutable snapshot"):
        run.plan = {}
    for column, value in (
        ("workflow_source", "'on: push'"),
        ("sha", "'x'"),
        ("context", "'{}'"),
        ("plan", "'{}'"),
        ("pin_ref", "'refs/heads/main'"),
    ):
        with pytest.raises(DBAPIError, match="snapshot of a run"):
            forge.session.execute(text(f"UPDATE runs SET {column} = {value} WHERE id = {run.id}"))
        forge.session.rollback()
    # Scheduling columns stay writable.
    forge.session.execute(text(f"UPDATE runs SET cancel_reason = 'x' WHERE id = {run.id}"))
    forge.session.commit()


# -- inputs (issue #16) -----------------------------------------------------------------------

WITH_INPUTS = """\
name: Release
on:
  workflow_dispatch:
    inputs:
      tag:
        required: true
      publish:
        type: boolean
        default: true
      level:
        type: choice
        options: [info, debug]
        default: info
jobs:
  build:
    runs-on: [self-hosted]
    steps:
      - run: make
"""


def test_dispatch_inputs_reach_the_snapshot_typed_as_github_does(forge: Forge) -> None:
    forge.commit({CI: WITH_INPUTS})
    run = dispatch_run(
        forge.session,
        forge.settings,
        forge.alice,
        forge.full_name,
        "main",
        CI,
        {"tag": '"; rm -rf / # $(id)', "publish": "false"},
    )
    forge.session.commit()
    stored = forge.run(run.number)
    # The inputs context keeps booleans; github.event.inputs has text only.
    assert stored.context["inputs"] == {
        "tag": '"; rm -rf / # $(id)',
        "publish": False,
        "level": "info",
    }
    event = stored.context["event"]
    assert event["inputs"] == {"tag": '"; rm -rf / # $(id)', "publish": "false", "level": "info"}
    assert (event["ref"], event["workflow"]) == ("refs/heads/main", CI)
    assert event["repository"]["full_name"] == forge.full_name
    assert event["sender"]["login"] == "alice"
    # A rerun copies them byte for byte.
    forge.finish(stored, "build", "failure")
    again = rerun_run(forge.session, forge.settings, forge.alice, forge.full_name, run.number)
    forge.session.commit()
    rerun_fields = {"run_number": str(stored.number), "run_attempt": "2"}
    assert forge.run(again.number).context == {**stored.context, **rerun_fields}


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({}, "input 'tag' is required"),
        ({"tag": "v1", "publish": "maybe"}, "input 'publish' is a boolean"),
        ({"tag": "v1", "level": "loud"}, "input 'level' must be one of info, debug"),
        ({"tag": "v1", "colour": "red"}, "unknown input 'colour'"),
    ],
)
def test_inputs_that_do_not_fit_create_nothing(
    forge: Forge, given: dict[str, str], message: str
) -> None:
    from forge_ci.workflow.dispatch_inputs import InputInvalid

    forge.commit({CI: WITH_INPUTS})
    with pytest.raises(InputInvalid) as caught:
        dispatch_run(forge.session, forge.settings, forge.alice, forge.full_name, "main", CI, given)
    assert message in caught.value.message and caught.value.http_status == 400
    forge.session.rollback()
    assert forge.session.scalars(select(Run)).all() == []
    assert _pins(forge) == []


@pytest.mark.parametrize(
    ("expression", "cancels"),
    [("github.ref == 'refs/heads/main'", True), ("github.ref_name != 'main'", False)],
)
def test_cancel_in_progress_expressions_are_evaluated_once_at_creation(
    forge: Forge, expression: str, cancels: bool
) -> None:
    extra = f"concurrency:\n  group: g\n  cancel-in-progress: ${{{{ {expression} }}}}\n"
    forge.commit({CI: workflow(job("build"), extra=extra)})
    run = forge.dispatch()
    forge.session.commit()
    assert run.cancel_in_progress is cancels
    assert run.plan["concurrency"]["cancel_in_progress"] == {"expr": expression}
    # A rerun copies the result with the snapshot; nothing is evaluated again.
    assert copy_definition(run).cancel_in_progress is cancels


def test_a_job_if_reads_inputs_and_the_event(forge: Forge) -> None:
    jobs = job("yes", condition="github.event.workflow == '.github/workflows/ci.yml'") + job(
        "no", condition="inputs.deploy"
    )
    forge.commit({CI: workflow(jobs)})
    forge.dispatch()
    forge.session.commit()
    assert forge.states(1) == {"yes": "queued", "no": "completed/skipped"}


def test_job_names_from_the_github_context_are_resolved_at_creation(forge: Forge) -> None:
    jobs = job("build", body="    name: Build ${{ github.ref_name }} by ${{ github.actor }}")
    forge.commit({CI: workflow(jobs)})
    run = forge.dispatch()
    forge.session.commit()
    assert forge.job(1, "build").name == "Build main by alice"
    # The snapshot keeps the template; reruns resolve the same snapshot to the same text.
    assert run.plan["jobs"][0]["name"]["template"][0] == "Build "
