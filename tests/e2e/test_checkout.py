"""``actions/checkout`` with inputs, end to end: real ssh pushes, a Docker job, a real ``.git``.

Each test pushes history of its own (commits, a tag, branches) over OpenSSH to the shared forge;
the job's checkout step fetches the attempt's source bundle through the runner API and the job
runs git on the result. The refusals are the push event's recorded diagnostics: nothing runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select

from forge_ci.models import PushEvent, PushEventWorkflow, Repository
from forge_ci_testing.forge import LINUX, Forge, wait_for, workflow

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _workdir(live: Forge, name: str) -> Path:
    client = live.git_client
    work = client.home / name
    client.git("init", "-q", "-b", "main", str(work))
    return work


def _commit(live: Forge, work: Path, files: dict[str, str], message: str) -> str:
    client = live.git_client
    for path, text in files.items():
        target = work / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    client.git("add", "-A", cwd=work)
    client.git("commit", "-q", "-m", message, cwd=work)
    return str(client.git("rev-parse", "HEAD", cwd=work).stdout.strip())


def _push(live: Forge, work: Path, repository: str, *refspecs: str) -> None:
    live.git_client.git("push", "-q", live.git_client.url(f"{repository}.git"), *refspecs, cwd=work)


def _ci(steps: str) -> dict[str, str]:
    return {
        ".github/workflows/ci.yml": workflow(
            f"""\
  build:
    runs-on: {LINUX}
    steps:
{steps}"""
        )
    }


def test_fetch_depth_0_gives_git_log_and_git_describe(live: Forge) -> None:
    repository = live.repository("checkout-full")
    work = _workdir(live, "checkout-full")
    first = _commit(live, work, {"README.md": "one\n"}, "first")
    live.git_client.git("tag", "-a", "v0.1", "-m", "release 0.1", cwd=work)
    steps = """\
      - uses: actions/checkout@v4
        with:
          fetch-depth: 0
          persist-credentials: false
      - run: |
          echo "log=$(git log --format=%s | tr '\\n' ,)"
          echo "describe=$(git describe --tags)"
          echo "branch=$(git rev-parse --abbrev-ref HEAD)"
          echo "status=$(git status --porcelain | wc -l)"
          echo "first=$(git rev-list --max-parents=0 HEAD)"
"""
    sha = _commit(live, work, _ci(steps), "second")
    _push(live, work, repository, "refs/tags/v0.1", "main")

    view = live.wait_run(repository)

    assert view.conclusion == "success", live.diagnose(repository, 1)
    log = live.logs(repository)["build"]
    assert f"Checked out {sha} into the workspace: 2 commits (full history), 1 tag," in log
    assert "log=second,first," in log
    assert f"describe=v0.1-1-g{sha[:7]}" in log
    assert "branch=main" in log and "status=0" in log and f"first={first}" in log
    assert "persist-credentials is accepted and has no effect" in log


def test_fetch_depth_1_into_a_path_is_shallow(live: Forge) -> None:
    repository = live.repository("checkout-shallow")
    work = _workdir(live, "checkout-shallow")
    _commit(live, work, {"README.md": "one\n"}, "first")
    steps = """\
      - run: mkdir -p src && echo stale > src/stale.txt
      - uses: actions/checkout@v5
        with:
          path: src
      - run: |
          echo "count=$(git -C src rev-list --count HEAD)"
          echo "shallow=$(git -C src rev-parse --is-shallow-repository)"
          test ! -e src/stale.txt && echo cleaned
          test -f src/README.md && echo readme
"""
    sha = _commit(live, work, _ci(steps), "second")
    _push(live, work, repository, "main")

    view = live.wait_run(repository)

    assert view.conclusion == "success", live.diagnose(repository, 1)
    log = live.logs(repository)["build"]
    assert f"Checked out {sha} into src: 1 commit (shallow)" in log
    assert "count=1" in log and "shallow=true" in log and "cleaned" in log and "readme" in log


def test_a_branch_ref_is_pinned_at_run_creation(live: Forge) -> None:
    repository = live.repository("checkout-ref")
    work = _workdir(live, "checkout-ref")
    _commit(live, work, {"README.md": "main\n"}, "main base")
    live.git_client.git("checkout", "-q", "-b", "feature", cwd=work)
    pinned = _commit(live, work, {"marker.txt": "pinned\n"}, "feature one")
    _push(live, work, repository, "feature")
    live.git_client.git("checkout", "-q", "main", cwd=work)
    steps = """\
      - run: sleep 2
      - uses: actions/checkout@v4
        with:
          ref: feature
      - run: |
          echo "marker=$(cat marker.txt)"
          echo "head=$(git rev-parse HEAD)"
          echo "on=$(git rev-parse --abbrev-ref HEAD)"
"""
    _commit(live, work, _ci(steps), "workflow")
    _push(live, work, repository, "main")
    wait_for("the run to be created", lambda: live.run(repository), 60, 0.1)
    # The branch moves after the run was created: the job still gets the pinned commit.
    live.git_client.git("checkout", "-q", "feature", cwd=work)
    _commit(live, work, {"marker.txt": "moved\n"}, "feature two")
    _push(live, work, repository, "feature")

    view = live.wait_run(repository)

    assert view.conclusion == "success", live.diagnose(repository, 1)
    log = live.logs(repository)["build"]
    assert "marker=pinned" in log and "marker=moved" not in log
    assert f"head={pinned}" in log and "on=feature" in log


def _push_outcome(live: Forge, repository: str, steps: str) -> PushEventWorkflow:
    name = repository.partition("/")[2]
    work = _workdir(live, name)
    _commit(live, work, _ci(steps), "refused")
    _push(live, work, repository, "main")
    assert live.database is not None

    def recorded() -> PushEventWorkflow | None:
        assert live.database is not None
        with live.database.session() as session:
            row = session.scalars(
                select(PushEventWorkflow)
                .join(PushEvent, PushEvent.id == PushEventWorkflow.push_event_id)
                .join(Repository, Repository.id == PushEvent.repository_id)
                .where(Repository.name == name)
            ).first()
            if row is not None:
                session.expunge(row)
            return row

    outcome: PushEventWorkflow = wait_for("the push event's outcome", recorded, 60, 0.2)
    assert outcome.run_id is None and live.run(repository) is None  # nothing ran
    return outcome


@pytest.mark.parametrize(
    ("name", "inputs", "message"),
    [
        ("checkout-other-repo", "ref: other/repo", "is neither a branch nor a tag of"),
        ("checkout-unknown", "ssh-key: abc", "with.ssh-key is not supported by the built-in"),
        ("checkout-sparse", "sparse-checkout: src", "sparse checkouts are not supported"),
    ],
)
def test_refused_inputs_create_no_run(live: Forge, name: str, inputs: str, message: str) -> None:
    repository = live.repository(name)
    steps = f"""\
      - uses: actions/checkout@v4
        with:
          {inputs}
      - run: echo must not run
"""
    outcome = _push_outcome(live, repository, steps)
    text = outcome.detail + repr(outcome.diagnostics or [])
    assert message in text, text
    if "not supported" in message:
        assert "supported inputs: fetch-depth, ref, path, clean, fetch-tags" in text
