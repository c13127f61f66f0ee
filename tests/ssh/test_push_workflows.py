"""Push workflows end to end: real OpenSSH pushes, the real ``forge-ci worker`` with Redis.

The SSH server of these tests cannot reach Redis, so its enqueues fail and the worker's database
scan finds the events: nothing depends on Redis holding the only copy.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from sqlalchemy import func, select

from forge_ci.authz import Actor
from forge_ci.db import Database
from forge_ci.models import Run
from forge_ci.repos import set_push_workflows
from forge_ci.runs.queries import show_push_event
from forge_ci.settings import Settings
from forge_ci_testing.git import GitClient
from ssh.server import SshServer
from tests.ssh.conftest import MakeClient
from tests.ssh.helpers import REPO_ROOT, events

OPERATOR = Actor.operator()
CI = """\
name: CI
on:
  push:
    branches: [main]
    paths: ['src/**', '.github/workflows/**']
jobs:
  build:
    runs-on: [self-hosted, linux]
    steps:
      - run: make
  test:
    needs: build
    runs-on: [self-hosted, linux]
    steps:
      - run: make test
"""
RELEASE = """\
on:
  push:
    branches: ['release/**']
jobs:
  ship:
    runs-on: [self-hosted]
    steps:
      - run: ./ship
"""


def _forge_ci(settings: Settings, redis_url: str, *args: str) -> str:
    """Run ``forge-ci ARGS`` as the operator would, against the test's data and database."""
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT),
        "FORGE_CI_DATA_DIR": str(settings.data_dir),
        "FORGE_CI_DATABASE_URL": settings.database_url,
        "FORGE_CI_REDIS_URL": redis_url,
    }
    result = subprocess.run(
        [sys.executable, "-m", "forge_ci", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def _worker(settings: Settings, redis_url: str) -> None:
    """``forge-ci worker --burst``: one database scan, then every queued job, then exit."""
    _forge_ci(settings, redis_url, "worker", "--burst")


def _write(work: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = work / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _commit(client: GitClient, work: Path, files: dict[str, str], message: str) -> str:
    _write(work, files)
    client.git("add", "-A", cwd=work)
    client.git("commit", "-q", "-m", message, cwd=work)
    return client.git("rev-parse", "HEAD", cwd=work).stdout.strip()


def _details(outcome: dict[str, object]) -> dict[str, str]:
    workflows = outcome["workflows"]
    assert isinstance(workflows, list)
    return {w["workflow_path"].rsplit("/", 1)[1]: w["detail"] for w in workflows}


def _outcome(database: Database, event_id: int) -> dict[str, object]:
    with database.session() as session:
        return show_push_event(session, OPERATOR, "alice/demo", event_id).as_dict()


def _files(outcome: dict[str, object]) -> dict[str, tuple[str, object]]:
    workflows = outcome["workflows"]
    assert isinstance(workflows, list)
    return {w["workflow_path"].rsplit("/", 1)[1]: (w["outcome"], w["run"]) for w in workflows}


def test_pushes_start_matching_workflows_and_nothing_else(
    server: SshServer,
    world: Settings,
    database: Database,
    client_for: MakeClient,
    redis_url: str,
) -> None:
    port = server.address[1]
    alice = client_for("alice", port)
    work = alice.work_tree()
    # Pushed while push workflows are off: never replayed.
    _commit(alice, work, {".github/workflows/ci.yml": CI, "src/app.py": "v0\n"}, "ci")
    alice.push(work, "main")
    with database.session() as session:
        set_push_workflows(session, OPERATOR, "alice/demo", True)
        session.commit()
    first = _commit(
        alice,
        work,
        {".github/workflows/release.yml": RELEASE, "src/app.py": "v1\n"},
        "release workflow and code",
    )
    alice.push(work, "main")
    _commit(alice, work, {"docs/guide.md": "words\n"}, "docs only")
    alice.push(work, "main")
    alice.push(work, "main:refs/heads/feature")
    alice.git("tag", "v1", cwd=work)
    alice.push(work, "refs/tags/v1")
    alice.push(work, "main:refs/heads/release/1.0")

    bob = client_for("bob", port)  # a writer: may push, may not run code
    bob_work = bob.home / "clone"
    bob.git("clone", "-q", bob.url(), str(bob_work))
    _commit(bob, bob_work, {"src/app.py": "bob\n"}, "bob's change")
    bob.push(bob_work, "main")

    _worker(world, redis_url)

    ids = [row[0] for row in events(database)]
    assert len(ids) == 7
    while_off, code, docs, feature, tag, release, by_bob = (_outcome(database, i) for i in ids)
    assert all(outcome["state"] == "received" for outcome in (while_off, code, by_bob))
    assert (while_off["result"], while_off["workflows"]) == ("disabled", [])
    assert code["result"] == "processed" and _files(code) == {
        "ci.yml": ("run_created", 1),
        "release.yml": ("not_matched", None),
    }
    assert _files(docs) == {"ci.yml": ("not_matched", None), "release.yml": ("not_matched", None)}
    assert _details(docs)["ci.yml"] == (
        "no changed path matches paths [src/**, .github/workflows/**]"
    )
    assert _files(feature)["ci.yml"] == ("not_matched", None)
    assert _details(feature)["ci.yml"] == "branch 'feature' is not in branches [main]"
    # A tag push is processed; workflows that filter only branches do not run for it.
    assert tag["result"] == "processed" and _files(tag) == {
        "ci.yml": ("not_matched", None),
        "release.yml": ("not_matched", None),
    }
    assert _details(tag)["ci.yml"] == (
        "tag 'v1' was pushed, and the push trigger filters only branches (branches [main])"
    )
    assert _files(release) == {
        "ci.yml": ("not_matched", None),
        "release.yml": ("run_created", 2),
    }
    assert by_bob["result"] == "not_authorized" and by_bob["workflows"] == []
    assert str(by_bob["detail"]).startswith("bob has write access")

    with database.session() as session:
        runs = session.scalars(select(Run).order_by(Run.number)).all()
        assert [(r.number, r.workflow_path, r.sha, r.event_name) for r in runs] == [
            (1, ".github/workflows/ci.yml", first, "push"),
            (2, ".github/workflows/release.yml", runs[1].sha, "push"),
        ]
        assert runs[1].ref == "refs/heads/release/1.0"
        assert [j.state for j in runs[0].jobs] == ["queued", "waiting"]

    # The operator's view of the same decisions.
    shown = json.loads(
        _forge_ci(world, redis_url, "events", "show", "alice/demo", str(ids[1]), "--json")
    )
    assert shown == code
    text = _forge_ci(world, redis_url, "events", "show", "alice/demo", str(ids[6]))
    assert "not_authorized: bob has write access" in text

    # The worker again (a restart, a replayed queue): nothing new.
    _worker(world, redis_url)
    with database.session() as session:
        assert session.scalar(select(func.count()).select_from(Run)) == 2
