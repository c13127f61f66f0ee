"""Action archives through the coordinator (issue #15): a claimed, running attempt gets the
assignment's actions map and each pinned action tree; nothing else does."""

from __future__ import annotations

from pygit2.enums import FileMode

from forge_ci.coordinator.credentials import new_request_id, new_token
from forge_ci.coordinator.service import AttemptRefused
from forge_ci.protocol import Assignment, ClaimRequest, CompleteRequest, SourceRequest, StartRequest
from forge_ci.runs.dispatch import dispatch_run
from tests.forge_ci.coordinator.test_sources import (  # noqa: F401 (the fixture)
    CI,
    EXECUTION,
    Source,
    _members,
    source,
)

LOCAL = """\
name: Local
inputs:
  who:
    default: ${{ github.actor }}
runs:
  using: composite
  steps:
    - run: echo hi ${{ inputs.who }}
      shell: bash
    - uses: ./tools/inner
"""
INNER = "name: Inner\nruns:\n  using: node20\n  main: main.js\n  post: post.js\n"
WORKFLOW = """\
name: CI
on: workflow_dispatch
jobs:
  build:
    runs-on: self-hosted
    steps:
      - uses: ./tools/local
        with:
          who: me
      - run: echo done
"""


def _running(forge: Source) -> tuple[Assignment, str]:
    forge.commit(
        {
            CI: WORKFLOW,
            "tools/local/action.yml": LOCAL,
            "tools/inner/action.yml": INNER,
            "tools/inner/main.js": (FileMode.BLOB_EXECUTABLE, b"console.log(1)\n"),
            "tools/inner/post.js": "console.log(2)\n",
            "tools/inner/link": (FileMode.LINK, b"main.js"),
        }
    )
    with forge.database.session() as session:
        dispatch_run(session, forge.settings, forge.owner, "o/r", "main", CI)
        session.commit()
    token = new_token()
    result = forge.coordinator.claim(forge.provider_token, ClaimRequest(new_request_id(), token, 0))
    assert result.assignment is not None
    forge.coordinator.start(token, result.assignment.attempt_id, StartRequest(EXECUTION))
    return result.assignment, token


def _fetch(forge: Source, assignment: Assignment, token: str, index: int) -> bytes:
    archive, _ = forge.coordinator.action_source(
        token, assignment.attempt_id, index, SourceRequest(EXECUTION)
    )
    with archive.file:
        return archive.file.read()


def test_the_assignment_carries_every_action_and_each_tree_is_served(source: Source) -> None:  # noqa: F811
    assignment, token = _running(source)
    sha = assignment.contexts["github"]["sha"]
    local, inner = f"{sha}:tools/local", f"{sha}:tools/inner"
    assert set(assignment.actions) == {local, inner}
    first = assignment.steps[0]
    assert (first.uses, first.action, first.inputs) == ("./tools/local", local, {"who": "me"})
    assert assignment.steps[1].action == ""
    composite = assignment.actions[local].metadata
    assert composite.runs.steps[1].action == inner
    assert composite.inputs["who"].default == {"template": [{"expr": "github.actor"}]}
    # The JSON a runner parses round-trips (keys checked against the map).
    assert Assignment.from_json(assignment.to_json()) == assignment
    for key, expected in ((local, {"action.yml"}), (inner, {"action.yml", "main.js", "post.js"})):
        index = int(assignment.actions[key].archive_path.rsplit("/", 1)[1].removesuffix(".tar"))
        members = _members(_fetch(source, assignment, token, index))
        assert {name for name, (kind, _, _) in members.items() if kind == "file"} == expected
    inner_index = int(assignment.actions[inner].archive_path.rsplit("/", 1)[1][:-4])
    members = _members(_fetch(source, assignment, token, inner_index))
    assert members["main.js"] == ("file", 0o755, b"console.log(1)\n")
    assert members["post.js"][1] == 0o644


def test_refusals(source: Source) -> None:  # noqa: F811
    assignment, token = _running(source)
    try:
        _fetch(source, assignment, token, 9)
    except AttemptRefused as refused:
        assert refused.error.code == "source_refused"
        assert "has no action number 9" in refused.error.message
    else:
        raise AssertionError("an action the job does not have was served")
    try:
        source.coordinator.action_source(token, assignment.attempt_id, 0, SourceRequest("f" * 32))
    except AttemptRefused as refused:
        assert refused.error.code == "execution_mismatch"
    else:
        raise AssertionError("another execution was served")
    source.coordinator.complete(
        token, assignment.attempt_id, CompleteRequest(EXECUTION, "failure", 0)
    )
    try:
        _fetch(source, assignment, token, 0)
    except AttemptRefused as refused:
        assert refused.error.code == "attempt_ended"
    else:
        raise AssertionError("a completed attempt was served")
