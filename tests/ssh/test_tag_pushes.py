"""Tag pushes over real OpenSSH: the tagged commit's workflows run, filters and deletions hold.

The real ``forge-ci worker`` processes the events (as in test_push_workflows.py). An annotated
tag is peeled to its commit; a lightweight tag is the commit itself; a deleted tag runs nothing;
a workflow that filters only branches never runs for a tag, one that filters only tags never
runs for a branch.
"""

from __future__ import annotations

from sqlalchemy import select

from forge_ci.db import Database
from forge_ci.models import Run
from forge_ci.repos import set_push_workflows
from forge_ci.settings import Settings
from ssh.server import SshServer
from tests.ssh.conftest import MakeClient
from tests.ssh.helpers import events
from tests.ssh.test_push_workflows import OPERATOR, _commit, _details, _files, _outcome, _worker

TAGS = """\
on:
  push:
    tags: ['v*']
jobs:
  publish:
    runs-on: [self-hosted]
    steps:
      - run: ./publish
"""
BRANCHES = """\
on:
  push:
    branches: [main]
jobs:
  ci:
    runs-on: [self-hosted]
    steps:
      - run: make
"""


def test_tag_pushes_run_the_tagged_commit(
    server: SshServer,
    world: Settings,
    database: Database,
    client_for: MakeClient,
    redis_url: str,
) -> None:
    with database.session() as session:
        set_push_workflows(session, OPERATOR, "alice/demo", True)
        session.commit()
    alice = client_for("alice", server.address[1])
    work = alice.work_tree()
    files = {".github/workflows/tags.yml": TAGS, ".github/workflows/ci.yml": BRANCHES}
    tagged = _commit(alice, work, files, "workflows")
    alice.push(work, "main")
    alice.git("tag", "-a", "v1.0", "-m", "release 1.0", cwd=work)
    alice.push(work, "refs/tags/v1.0")
    alice.git("tag", "nightly", cwd=work)
    alice.push(work, "refs/tags/nightly")
    alice.push(work, ":refs/tags/nightly")
    _worker(world, redis_url)

    branch, annotated, lightweight, deleted = (
        _outcome(database, i) for (i, *_) in events(database)
    )
    assert _files(branch) == {"ci.yml": ("run_created", 1), "tags.yml": ("not_matched", None)}
    assert _details(branch)["tags.yml"] == (
        "branch 'main' was pushed, and the push trigger filters only tags (tags [v*])"
    )
    assert _files(annotated) == {"ci.yml": ("not_matched", None), "tags.yml": ("run_created", 2)}
    assert _details(annotated)["tags.yml"] == "tag 'v1.0' matches 'v*' in tags [v*]"
    assert _files(lightweight) == {
        "ci.yml": ("not_matched", None),
        "tags.yml": ("not_matched", None),
    }
    assert _details(lightweight)["tags.yml"] == "tag 'nightly' is not in tags [v*]"
    assert (deleted["result"], deleted["detail"]) == (
        "ignored",
        "the tag was deleted; there is nothing to run",
    )
    with database.session() as session:
        runs = session.scalars(select(Run).order_by(Run.number)).all()
        assert [(r.number, r.ref, r.sha) for r in runs] == [
            (1, "refs/heads/main", tagged),
            (2, "refs/tags/v1.0", tagged),  # the commit, not the tag object
        ]
