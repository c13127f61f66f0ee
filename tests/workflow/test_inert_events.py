"""Events forge-ci never fires: accepted, inert, and said so ("release never fires on forge-ci")."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from wf_support import messages

from forge_ci.workflow import Diagnostic, Workflow, build_plan, match_pull_request, match_push
from forge_ci.workflow.inert import OPTIONS
from forge_ci.workflow.triggers import EVENTS, GITHUB_EVENTS, inert_events

Accept = Callable[[str], Workflow]
Refuse = Callable[[str | bytes], list[Diagnostic]]

JOBS = """
jobs:
  build:
    runs-on: self-hosted
    steps:
      - run: echo hi
"""
#: GitHub's "Events that trigger workflows" page and its schema (each must be known).
DOCUMENTED = """branch_protection_rule check_run check_suite create delete deployment
deployment_status discussion discussion_comment fork gollum image_version issue_comment issues
label merge_group milestone page_build project project_card project_column public pull_request
pull_request_comment pull_request_review pull_request_review_comment pull_request_target push
registry_package release repository_dispatch schedule status watch workflow_call workflow_dispatch
workflow_run""".split()


def test_every_documented_event_is_known() -> None:
    assert set(DOCUMENTED) == GITHUB_EVENTS
    assert set(EVENTS) <= GITHUB_EVENTS
    assert inert_events() == GITHUB_EVENTS - set(EVENTS)


@pytest.mark.parametrize("event", sorted(inert_events()))
def test_each_inert_event_is_accepted_with_a_notice_and_never_fires(
    accept: Accept, event: str
) -> None:
    workflow = accept(f"on:\n  push:\n  {event}:\n" + JOBS)
    assert [(n.line, n.message) for n in workflow.notices] == [
        (3, f"{event} never fires on forge-ci")
    ]
    assert workflow.triggers.inert == (event,)
    assert match_push(workflow, "refs/heads/main", None).matched
    assert build_plan(workflow)["notices"] == [
        {"line": 3, "column": 3, "message": f"{event} never fires on forge-ci"}
    ]


def test_a_file_without_a_fireable_trigger_is_valid_and_inert(accept: Accept) -> None:
    workflow = accept("on:\n  release:\n    types: [published]\n  workflow_run:\n" + JOBS)
    assert not workflow.triggers.fireable
    result = match_push(workflow, "refs/heads/main", None)
    assert not result.matched
    assert result.reason == "inert: release and workflow_run never fire on forge-ci"
    assert not match_pull_request(workflow, "opened", "main", None).matched


@pytest.mark.parametrize(
    "on",
    [
        "on:\n  workflow_run:\n    workflows: [CI]\n    types: [completed]\n    branches: [main]",
        "on:\n  workflow_call:\n    inputs:\n      x: {type: string}\n    secrets:\n"
        "      T: {required: true}",
        "on:\n  repository_dispatch:\n    types: [anything-goes]",
        "on:\n  pull_request_target:\n    types: [labeled]\n    branches: [main]",
        "on:\n  merge_group:\n    types: [checks_requested]",
        "on:\n  release:\n    types: [published, created]",
        "on:\n  issue_comment:\n    types: created",
    ],
)
def test_inert_event_options_as_github_defines_them(accept: Accept, on: str) -> None:
    workflow = accept(on + JOBS)
    assert not workflow.triggers.fireable and len(workflow.notices) == 1


@pytest.mark.parametrize(
    ("on", "notice"),
    [
        ("on:\n  release:\n    branches: [main]", "'branches' is not an option of release and is"),
        ("on:\n  create:\n    types: [x]", "create takes no options"),
        ("on:\n  workflow_run:\n    workflow: [ci]", 'ignored; did you mean "workflows"?'),
    ],
)
def test_options_an_event_does_not_have_are_ignored_with_a_notice(
    accept: Accept, on: str, notice: str
) -> None:
    # As GitHub does (its reader's on-workflow_dispatch-unknown-keys-ignored case).
    workflow = accept(on + JOBS)
    assert notice in "\n".join(n.message for n in workflow.notices)


def test_inert_events_in_list_form(accept: Accept) -> None:
    workflow = accept("on: [push, release, workflow_call]" + JOBS)
    assert workflow.triggers.inert == ("release", "workflow_call")
    assert [n.message for n in workflow.notices] == [
        "release never fires on forge-ci",
        "workflow_call never fires on forge-ci",
    ]


def test_pull_request_types_forge_ci_does_not_report_are_inert(accept: Accept) -> None:
    mixed = accept("on:\n  pull_request:\n    types: [opened, closed]\n" + JOBS)
    assert mixed.triggers.pull_request is not None
    assert mixed.triggers.pull_request.types == ("opened",)
    assert [n.message for n in mixed.notices] == ["pull_request closed never fires on forge-ci"]
    assert match_pull_request(mixed, "opened", "main", None).matched
    assert not match_pull_request(mixed, "closed", "main", None).matched
    only = accept("on:\n  pull_request:\n    types: [closed, labeled]\n" + JOBS)
    assert only.triggers.pull_request is None and not only.triggers.fireable
    result = match_pull_request(only, "opened", "main", None)
    assert result.reason == (
        "inert: pull_request closed and pull_request labeled never fire on forge-ci"
    )


@pytest.mark.parametrize(
    ("on", "expected"),
    [
        ("on:\n  release: published", "release takes a mapping of options, not"),
        ("on: [push, releases]", "'releases' is not a workflow event; did you mean \"release\"?"),
        ("on: [release, release]", "the event 'release' is listed twice"),
        ("on:\n  pull_request:\n    types: [closd]", "'closd' is not a pull_request type"),
        ("on:\n  issue_comment:\n    types: [opened]", "'opened' is not a issue_comment activity"),
        ("on:\n  release:\n    types: [publish]", 'did you mean "published"?'),
    ],
)
def test_inert_events_are_still_checked(refuse: Refuse, on: str, expected: str) -> None:
    assert expected in messages(refuse(on + JOBS))


def test_inert_options_follow_githubs_schema(corpus_dir: Path) -> None:
    """OPTIONS agrees with GitHub's own workflow schema (actions/languageservices)."""
    schema = corpus_dir / "actions-languageservices/workflow-parser/src/workflow-v1.0.json"
    definitions = json.loads(schema.read_text())["definitions"]
    events = definitions["on-mapping-strict"]["mapping"]["properties"]
    assert set(events) == GITHUB_EVENTS
    for name, ref in events.items():
        if name in EVENTS:
            continue
        keys: dict[str, str] = {}
        for alternative in definitions[ref].get("one-of", []):
            keys = definitions.get(alternative, {}).get("mapping", {}).get("properties", keys)
        ours, types = OPTIONS[name]
        assert set(ours) == set(keys), name
        if "types" not in keys:
            continue
        found = None
        for alternative in definitions[keys["types"]].get("one-of", []):
            found = definitions.get(alternative, {}).get("allowed-values", found)
        assert (types is None) == (found is None), name
        assert types is None or set(types) == set(found), name
