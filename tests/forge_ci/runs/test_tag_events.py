"""Tag pushes into runs, in the core: the tagged commit's workflows, peeled tags, filters, notices.

Events are made the way the push path leaves them (tests/ssh/test_tag_pushes.py pushes tags over
real SSH). Both databases, like every test of run creation.
"""

from __future__ import annotations

import pygit2
from sqlalchemy import select

from forge_ci.models import PushEventWorkflow
from tests.forge_ci.runs.conftest import Forge, job, workflow
from tests.forge_ci.runs.test_events import WF, ZERO, _enable, _event, _outcomes, _process, _runs

ON_TAGS = workflow(job("release"), on="\n  push:\n    tags: ['v*']")
ON_BRANCHES = workflow(job("ci"), on="\n  push:\n    branches: [main]")
ANY_PUSH = workflow(job("any"), on="push")
WITH_NOTICES = workflow(
    job("publish"),
    on="\n  push:\n    tags: ['v*']\n  release:",
    extra="permissions:\n  id-token: write\n",
)


def _tag(forge: Forge, name: str, target: str, annotated: bool) -> str:
    """Create the tag ``name`` at ``target``; the sha the tag ref points at (its new value)."""
    git = forge.git()
    if not annotated:
        git.references.create(f"refs/tags/{name}", pygit2.Oid(hex=target))
        return target
    tagger = pygit2.Signature("Alice", "alice@example.com")
    oid = git.create_tag(name, pygit2.Oid(hex=target), pygit2.enums.ObjectType.COMMIT, tagger, "r")
    return str(oid)


def test_an_annotated_tag_runs_the_workflows_of_the_tagged_commit(forge: Forge) -> None:
    _enable(forge)
    sha = forge.commit(
        {WF + "tags.yml": ON_TAGS, WF + "ci.yml": ON_BRANCHES, WF + "a.yml": ANY_PUSH}
    )
    tag_object = _tag(forge, "v1.0", sha, annotated=True)
    assert tag_object != sha
    outcome = _process(forge, _event(forge, tag_object, ref="refs/tags/v1.0"))
    assert outcome.result == "processed" and outcome.runs == (1, 2)
    found = _outcomes(forge, outcome.event_id)
    assert found["tags.yml"][0] == "run_created"
    assert found["tags.yml"][1] == "tag 'v1.0' matches 'v*' in tags [v*]"
    assert found["a.yml"][:2] == ("run_created", "push on tag 'v1.0' (no tag filter)")
    # Refused: a workflow that filters only branches does not run for a tag.
    assert found["ci.yml"] == (
        "not_matched",
        "tag 'v1.0' was pushed, and the push trigger filters only branches (branches [main])",
        None,
    )
    for number in (1, 2):
        run = forge.run(number)
        # The run is pinned at the peeled commit, never at the tag object.
        assert (run.ref, run.sha) == ("refs/tags/v1.0", sha)
        pinned = forge.git().references[run.pin_ref].target
        assert str(pinned) == sha


def test_a_lightweight_tag_and_a_tag_filter_that_refuses(forge: Forge) -> None:
    _enable(forge)
    sha = forge.commit({WF + "tags.yml": ON_TAGS})
    matched = _process(forge, _event(forge, _tag(forge, "v2", sha, False), ref="refs/tags/v2"))
    assert matched.runs == (1,) and forge.run(1).sha == sha
    other = _process(
        forge, _event(forge, _tag(forge, "nightly", sha, False), ref="refs/tags/nightly")
    )
    assert other.result == "processed" and other.runs == ()
    assert _outcomes(forge, other.event_id)["tags.yml"] == (
        "not_matched",
        "tag 'nightly' is not in tags [v*]",
        None,
    )
    # A branch push does not run a workflow that filters only tags.
    branch = _process(forge, _event(forge, forge.commit({"x": "1"}), old=sha))
    assert branch.runs == ()
    assert "filters only tags" in _outcomes(forge, branch.event_id)["tags.yml"][1]


def test_tag_deletion_and_a_tag_of_no_commit_run_nothing(forge: Forge) -> None:
    _enable(forge)
    sha = forge.commit({WF + "a.yml": ANY_PUSH})
    deleted = _process(forge, _event(forge, ZERO, old=sha, ref="refs/tags/v1"))
    assert (deleted.result, deleted.detail) == (
        "ignored",
        "the tag was deleted; there is nothing to run",
    )
    git = forge.git()
    tree = git[pygit2.Oid(hex=sha)].peel(pygit2.Tree).id
    tagger = pygit2.Signature("Alice", "alice@example.com")
    of_tree = str(git.create_tag("t", tree, pygit2.enums.ObjectType.TREE, tagger, "a tree"))
    outcome = _process(forge, _event(forge, of_tree, ref="refs/tags/t"))
    assert (outcome.result, outcome.detail) == (
        "ignored",
        "the tag refs/tags/t points at no commit, so there is nothing to run",
    )
    assert _runs(forge) == 0


def test_notices_are_recorded_with_the_outcome(forge: Forge) -> None:
    _enable(forge)
    sha = forge.commit({WF + "pub.yml": WITH_NOTICES})
    outcome = _process(forge, _event(forge, _tag(forge, "v3", sha, True), ref="refs/tags/v3"))
    assert outcome.runs == (1,)
    notices = forge.session.scalar(
        select(PushEventWorkflow.diagnostics).where(
            PushEventWorkflow.workflow_path == WF + "pub.yml"
        )
    )
    assert [n["message"] for n in notices or []] == [
        "release never fires on forge-ci",
        "this workflow asked for id-token: write; forge-ci grants no such token",
    ]
    assert [n["message"] for n in forge.run(1).plan["notices"]] == [
        n["message"] for n in notices or []
    ]
