"""Real GitHub actions end to end (issue #15): each action mirrored into the forge with
``forge-ci repo mirror`` from a ``file://`` clone of its shared bundle, used unchanged by a
workflow pushed over real SSH, run by the provider in a Docker job container.

Upstream sources stay off (``none``, forge_ci_testing): everything comes from the mirrors.
"""

from __future__ import annotations

import json
import socket
import subprocess

import pytest
from sqlalchemy import select

from forge_ci.models import Run
from forge_ci_testing.forge import LINUX, Forge, wait_for, workflow
from tests.conftest import action_bundle

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ACTIONS = ("setup-python", "setup-node", "github-script")


@pytest.fixture(scope="module")
def mirrored(forge: Forge, tmp_path_factory: pytest.TempPathFactory) -> Forge:
    upstreams = tmp_path_factory.mktemp("action-upstreams")
    for name in ACTIONS:
        bundle = action_bundle(name)
        upstream = upstreams / f"{name}.git"
        subprocess.run(["git", "clone", "-q", "--bare", str(bundle), str(upstream)], check=True)
        out = forge.forge_ci("repo", "mirror", f"actions/{name}", "--from", f"file://{upstream}")
        assert f"created actions/{name} from file://{upstream}" in out
    return forge


def _run(forge: Forge, name: str, jobs: str) -> tuple[str, str]:
    forge.ensure_provider()
    repository = forge.repository(name)
    forge.push(repository, {".github/workflows/ci.yml": workflow(jobs)})
    view = forge.wait_run(repository, timeout=300)
    (log,) = forge.logs(repository).values()
    assert view.conclusion == "success", log + forge.diagnose(repository, 1)
    return repository, log


def test_setup_python_setup_node_and_checkout(mirrored: Forge) -> None:
    repository, log = _run(
        mirrored,
        "setup-tools",
        f"""\
  build:
    runs-on: {LINUX}
    steps:
      - uses: actions/checkout@v4
        with:
          fetch-depth: 0
      - id: py
        uses: actions/setup-python@v5
        with:
          python-version: "3.11"
        env:
          NODE_DEBUG_NATIVE: COMPILE_CACHE
      - id: node
        uses: actions/setup-node@v4
        with:
          node-version: "24"
      - run: |
          echo "python output=${{{{ steps.py.outputs.python-version }}}}"
          echo "python on PATH=$(command -v python)"
          python -c 'import sys; print("python runs", sys.version.split()[0])'
          echo "node output=${{{{ steps.node.outputs.node-version }}}}"
          echo "node on PATH=$(command -v node) $(node --version)"
          echo "history: $(git log --format=%s) count=$(git rev-list --count HEAD)"
""",
    )
    assert "python output=3.11." in log
    assert "python on PATH=/opt/hostedtoolcache/Python/3.11." in log
    assert "python runs 3.11." in log
    assert "node output=v24." in log
    assert "node on PATH=/opt/hostedtoolcache/node/24." in log
    assert "history: e2e count=1" in log
    # The post script (post-if: success()) took the code the runner compiled ahead into the
    # job's own compile cache.
    assert "/dist/cache-save/index.js was accepted" in log, log[-3000:]
    assert mirrored.database is not None
    with mirrored.database.session() as session:
        run = session.scalars(select(Run).order_by(Run.id.desc())).first()
        assert run is not None and run.actions is not None
        assert set(run.actions["references"]) == {
            "actions/setup-python@v5",
            "actions/setup-node@v4",
        }


def test_github_script_sets_an_output_exports_and_masks(mirrored: Forge) -> None:
    _, log = _run(
        mirrored,
        "github-script",
        f"""\
  script:
    runs-on: {LINUX}
    steps:
      - id: gs
        uses: actions/github-script@v7
        with:
          github-token: not-used-here
          result-encoding: string
          script: |
            core.setOutput('answer', '42')
            core.exportVariable('FROM_SCRIPT', 'exported-value')
            core.setSecret('hush-7f3a9c')
            return 'done'
      - run: |
          echo "answer=${{{{ steps.gs.outputs.answer }}}} result=${{{{ steps.gs.outputs.result }}}}"
          echo "env=$FROM_SCRIPT"
          echo "secret is hush-7f3a9c"
""",
    )
    assert "answer=42 result=done" in log
    assert "env=exported-value" in log
    assert "secret is ***" in log and "hush-7f3a9c" not in log


def test_an_unknown_action_is_a_diagnostic_on_the_push(mirrored: Forge) -> None:
    forge = mirrored
    repository = forge.repository("unknown-action")
    forge.push(
        repository,
        {
            ".github/workflows/ci.yml": workflow(
                f"  build:\n    runs-on: {LINUX}\n    steps:\n"
                "      - uses: actions/setup-pyhton@v5\n"
            )
        },
    )

    def shown() -> str | None:
        events = json.loads(forge.forge_ci("events", "list", repository, "--json"))
        if not events:
            return None
        detail = forge.forge_ci("events", "show", repository, str(events[-1]["id"]), "--json")
        return detail if "cannot be resolved" in detail else None

    detail = wait_for("the push event's diagnostic", shown, 60)
    assert (
        "uses: actions/setup-pyhton@v5 cannot be resolved; looked in: the forge repository"
        in detail
    )
    assert forge.run(repository) is None


GREET = """\
name: Greet
inputs:
  who:
    required: true
runs:
  using: composite
  steps:
    - run: echo "greet {version} says hello to ${{{{ inputs.who }}}}"
      shell: bash
"""


def test_a_moved_tag_changes_neither_the_run_nor_its_rerun(mirrored: Forge) -> None:
    """The tj-actions case: the action's tag is force-pushed to new code and the old commit
    garbage-collected; the rerun still runs the pinned code, a new run the new code."""
    forge = mirrored
    forge.ensure_provider()
    client = forge.git_client
    action = forge.repository("greet")
    work = client.home / "greet-action"
    client.git("init", "-q", "-b", "main", str(work))
    (work / "action.yml").write_text(GREET.format(version="v1"))
    client.git("add", "-A", cwd=work)
    client.git("commit", "-q", "-m", "v1", cwd=work)
    client.git("tag", "v1", cwd=work)
    client.git("push", "-q", client.url(f"{action}.git"), "main", "v1", cwd=work)

    uses = f"{action}@v1"
    repository = forge.repository("uses-greet")
    jobs = f"""\
  greet:
    runs-on: {LINUX}
    steps:
      - uses: {uses}
        with:
          who: forge
"""
    text = f"on: [push, workflow_dispatch]\njobs:\n{jobs}"
    forge.push(repository, {".github/workflows/ci.yml": text})
    first = forge.wait_run(repository, 1, timeout=300)
    assert first.conclusion == "success", forge.diagnose(repository, 1)
    assert "greet v1 says hello to forge" in forge.logs(repository, 1)["greet"]

    # The tag moves to a rewritten history; the old commit becomes unreachable and is pruned.
    client.git("checkout", "-q", "--orphan", "rewritten", cwd=work)
    (work / "action.yml").write_text(GREET.format(version="v2"))
    client.git("add", "-A", cwd=work)
    client.git("commit", "-q", "-m", "v2", cwd=work)
    client.git("tag", "-f", "v1", cwd=work)
    client.git(
        "push", "-q", "--force", client.url(f"{action}.git"), "HEAD:main", "refs/tags/v1", cwd=work
    )
    bare = forge.settings.repositories_dir / action.replace("/", "/", 1)
    bare = bare.with_name(bare.name + ".git")
    for args in (["reflog", "expire", "--expire=now", "--all"], ["gc", "-q", "--prune=now"]):
        subprocess.run(["git", f"--git-dir={bare}", *args], check=True)

    forge.forge_ci("run", "rerun", repository, "1")
    rerun = forge.wait_run(repository, 2, timeout=300)
    assert rerun.conclusion == "success", forge.diagnose(repository, 2)
    log = forge.logs(repository, 2)["greet"]
    assert "greet v1 says hello to forge" in log and "greet v2" not in log

    workflow_path = ".github/workflows/ci.yml"
    forge.forge_ci("run", "dispatch", repository, "--branch", "main", "--workflow", workflow_path)
    fresh = forge.wait_run(repository, 3, timeout=300)
    assert fresh.conclusion == "success", forge.diagnose(repository, 3)
    assert "greet v2 says hello to forge" in forge.logs(repository, 3)["greet"]


TIDY_MAIN = """\
const fs = require('fs');
const path = require('path');
const seen = fs.readFileSync(path.join(__dirname, 'hostname'), 'utf8').trim();
console.log(`through the link: ${seen}`);
fs.appendFileSync(process.env.GITHUB_STATE, 'started=yes\\n');
"""
TIDY_POST = "console.log(`post after cancel: started=${process.env.STATE_started}`);\n"


def test_post_steps_run_after_a_cancellation_and_links_stay_links(mirrored: Forge) -> None:
    """Cancelled mid-step: the running step is stopped, then the actions' post steps run as on
    GitHub (an own action's default ``always()`` post prints its saved state; setup-python's
    ``post-if: success()`` is skipped). The own action's tree holds links: its post script is a
    link inside the tree, and a link to /etc/hostname reads the job container's file."""
    forge = mirrored
    forge.ensure_provider()
    client = forge.git_client
    action = forge.repository("tidy")
    work = client.home / "tidy-action"
    client.git("init", "-q", "-b", "main", str(work))
    (work / "lib").mkdir()
    (work / "action.yml").write_text(
        "name: Tidy\nruns:\n  using: node20\n  main: main.js\n  post: post.js\n"
    )
    (work / "main.js").write_text(TIDY_MAIN)
    (work / "lib" / "post.js").write_text(TIDY_POST)
    (work / "post.js").symlink_to("lib/post.js")
    (work / "hostname").symlink_to("/etc/hostname")
    client.git("add", "-A", cwd=work)
    client.git("commit", "-q", "-m", "tidy", cwd=work)
    client.git("tag", "v1", cwd=work)
    client.git("push", "-q", client.url(f"{action}.git"), "main", "v1", cwd=work)

    repository = forge.repository("cancel-post")
    jobs = f"""\
  long:
    runs-on: {LINUX}
    steps:
      - id: py
        uses: actions/setup-python@v5
        with:
          python-version: "3.11"
      - id: tidy
        uses: {action}@v1
      - id: wait
        run: echo "waiting for cancellation"; sleep 300
"""
    forge.push(repository, {".github/workflows/ci.yml": workflow(jobs)})
    wait_for(
        "the step to be running",
        lambda: "waiting for cancellation" in forge.logs(repository).get("long", ""),
        180,
        0.2,
    )
    from forge_ci.authz import Actor
    from forge_ci.runs.cancel import cancel_run

    assert forge.database is not None
    with forge.database.session() as session:
        cancel_run(session, Actor.operator(), repository, 1)
        session.commit()
    view = forge.wait_run(repository, timeout=60)

    assert forge.conclusions(view) == {"long": "cancelled"}
    log = forge.logs(repository)["long"]
    assert "post after cancel: started=yes" in log, log[-3000:]
    seen = {s.step_id: s.conclusion for s in forge.attempts(repository)["long"].steps}
    assert seen["wait"] == "cancelled"
    assert seen["post-tidy"] == "success"
    assert seen["post-py"] == "skipped"  # post-if: success()
    # The link resolved in the container (its hostname is the container's), not on the host.
    (shown,) = [line for line in log.splitlines() if "through the link: " in line]
    assert shown.split("through the link: ")[1].strip() not in ("", socket.gethostname())
