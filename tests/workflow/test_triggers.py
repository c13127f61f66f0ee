"""The ``on`` key: its forms, its refusals, and push / pull request matching."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from wf_support import messages

from forge_ci.workflow import (
    Diagnostic,
    Match,
    Workflow,
    match_pull_request,
    match_push,
)

Accept = Callable[[str], Workflow]
Refuse = Callable[[str | bytes], list[Diagnostic]]

JOBS = """
jobs:
  build:
    runs-on: self-hosted
    steps:
      - run: echo hi
"""


def with_on(on: str) -> str:
    return on + JOBS


@pytest.mark.parametrize(
    "on",
    [
        "on: push",
        "on: [push, pull_request]",
        "on:\n  push:\n  pull_request:\n  workflow_dispatch:",
        "on:\n  workflow_dispatch: {}",
        "'on': pull_request",
    ],
)
def test_event_forms(accept: Accept, on: str) -> None:
    accept(with_on(on))


def test_forms_declare_the_same_triggers(accept: Accept) -> None:
    as_list = accept(with_on("on: [push, pull_request, workflow_dispatch]")).triggers
    as_mapping = accept(with_on("on:\n  push:\n  pull_request:\n  workflow_dispatch:")).triggers
    assert as_list == as_mapping
    assert as_list.workflow_dispatch
    assert as_list.pull_request is not None
    assert as_list.pull_request.types == ("opened", "reopened", "synchronize")


@pytest.mark.parametrize(
    ("on", "expected"),
    [
        ("on: schedule", "schedule needs a list of cron entries"),
        ("on: pusj", "'pusj' is not a workflow event; did you mean \"push\"?"),
        ("on: [push, push]", "the event 'push' is listed twice"),
        ("on: []", "'on' lists no event"),
        ("on: {}", "'on' lists no event"),
        ("on:", "'on' needs push, pull_request, workflow_dispatch or schedule"),
        ("on: [push, relase]", "'relase' is not a workflow event; did you mean \"release\"?"),
        ("on:\n  push:\n    tags: [v1]\n    tags-ignore: [v2]", "tags and tags-ignore cannot"),
        ("on:\n  push:\n    tags: ['[v']", "invalid pattern '[v' in tags"),
        ("on:\n  push:\n    tags-ignore: ['!v1']", "'!' patterns belong in tags"),
        ("on:\n  pull_request:\n    tags: [v1]", "'tags' is not a pull_request filter"),
        ("on:\n  push:\n    branch: [main]", 'did you mean "branches"?'),
        ("on:\n  push:\n    types: [opened]", "'types' is not a push filter"),
        ("on:\n  pull_request:\n    types: [close]", 'did you mean "closed"?'),
        ("on:\n  pull_request:\n    types: [open]", 'did you mean "opened"?'),
        ("on:\n  pull_request:\n    types: []", "pull_request types must not be empty"),
        (
            "on:\n  push:\n    branches: [main]\n    branches-ignore: [dev]",
            "branches and branches-ignore cannot be used together",
        ),
        (
            "on:\n  pull_request:\n    paths: [a]\n    paths-ignore: [b]",
            "paths and paths-ignore cannot be used together",
        ),
        (
            "on:\n  push:\n    branches: ['!main']",
            "branches needs at least one pattern without '!'",
        ),
        ("on:\n  push:\n    branches-ignore: ['!main']", "'!' patterns belong in branches"),
        ("on:\n  push:\n    branches: ['[main']", "invalid pattern '[main' in branches"),
        ("on:\n  push:\n    branches: [{a: 1}]", "branches must be strings"),
        ("on:\n  push:\n    paths: ['${{ github.sha }}']", "expressions are not allowed in paths"),
    ],
)
def test_refused_triggers(refuse: Refuse, on: str, expected: str) -> None:
    assert expected in messages(refuse(with_on(on)))


def test_trigger_errors_are_located(refuse: Refuse) -> None:
    diagnostics = refuse(with_on("on:\n  push:\n    branches: [main, '[bad']\n    tags: ['[v']"))
    assert [(d.line, d.column) for d in diagnostics] == [(3, 22), (4, 12)]


def push_workflow(accept: Accept, filters: str) -> Workflow:
    return accept(with_on("on:\n  push:\n" + filters))


def test_push_without_filters_matches_every_branch_and_tag(accept: Accept) -> None:
    workflow = accept(with_on("on: push"))
    assert match_push(workflow, "refs/heads/main", None).matched
    assert match_push(workflow, "refs/heads/feature/x", []).matched
    result = match_push(workflow, "refs/tags/v1", None)
    assert result == Match(True, "push on tag 'v1' (no tag filter)")
    assert not match_push(workflow, "refs/pull/1/head", None).matched
    assert not match_push(workflow, "refs/tags/", None).matched
    assert not match_push(workflow, "refs/heads/", None).matched


def test_push_branch_filter_includes_and_excludes_in_order(accept: Accept) -> None:
    workflow = push_workflow(
        accept, "    branches: [main, 'releases/**', '!releases/**-alpha', releases/x-alpha]\n"
    )
    assert match_push(workflow, "refs/heads/main", None).matched
    assert match_push(workflow, "refs/heads/releases/1/2", None).matched
    assert match_push(workflow, "refs/heads/releases/x-alpha", None).matched
    refused = match_push(workflow, "refs/heads/releases/1-alpha", None)
    assert not refused.matched
    assert refused.reason.startswith(
        "branch 'releases/1-alpha' is excluded by '!releases/**-alpha'"
    )
    other = match_push(workflow, "refs/heads/dev", None)
    assert other == Match(
        False,
        "branch 'dev' is not in branches [main, releases/**, !releases/**-alpha, releases/x-alpha]",
    )


def test_reason_names_the_branch_and_the_filter(accept: Accept) -> None:
    workflow = push_workflow(accept, "    branches: [main]\n")
    assert match_push(workflow, "refs/heads/dev", None).reason == (
        "branch 'dev' is not in branches [main]"
    )
    assert match_push(workflow, "refs/heads/main", None).reason == (
        "branch 'main' matches 'main' in branches [main]"
    )


def test_branches_ignore(accept: Accept) -> None:
    workflow = push_workflow(accept, "    branches-ignore: ['docs/*']\n")
    assert match_push(workflow, "refs/heads/main", None).matched
    assert match_push(workflow, "refs/heads/docs/a/b", None).matched  # '*' stops at '/'
    result = match_push(workflow, "refs/heads/docs/a", None)
    assert result == Match(False, "branch 'docs/a' matches 'docs/*' in branches-ignore [docs/*]")


def test_paths_filter(accept: Accept) -> None:
    workflow = push_workflow(accept, "    paths: ['src/**', '!src/**/*.md']\n")
    assert match_push(workflow, "refs/heads/main", ["README.md", "src/a.py"]).matched
    assert not match_push(workflow, "refs/heads/main", ["src/docs/a.md", "README.md"]).matched
    no_match = match_push(workflow, "refs/heads/main", ["README.md"])
    assert no_match.reason == "no changed path matches paths [src/**, !src/**/*.md]"
    assert not match_push(workflow, "refs/heads/main", []).matched
    unknown = match_push(workflow, "refs/heads/main", None)
    assert unknown.matched and "unknown" in unknown.reason


def test_paths_ignore(accept: Accept) -> None:
    workflow = push_workflow(accept, "    paths-ignore: ['docs/**', '*.md']\n")
    assert match_push(workflow, "refs/heads/main", ["docs/a", "src/a.py"]).matched
    skipped = match_push(workflow, "refs/heads/main", ["docs/a", "README.md"])
    assert skipped == Match(False, "every changed path matches paths-ignore [docs/**, *.md]")
    assert match_push(workflow, "refs/heads/main", None).matched


def test_branch_and_path_filters_both_apply(accept: Accept) -> None:
    workflow = push_workflow(accept, "    branches: [main]\n    paths: ['src/**']\n")
    assert match_push(workflow, "refs/heads/main", ["src/a"]).matched
    assert not match_push(workflow, "refs/heads/dev", ["src/a"]).matched
    assert not match_push(workflow, "refs/heads/main", ["docs/a"]).matched


def test_no_push_trigger(accept: Accept) -> None:
    workflow = accept(with_on("on: pull_request"))
    assert match_push(workflow, "refs/heads/main", None) == Match(
        False, "the workflow has no push trigger"
    )


def test_pull_request_types_and_target_branch(accept: Accept) -> None:
    workflow = accept(
        with_on("on:\n  pull_request:\n    types: [opened, synchronize]\n    branches: [main]")
    )
    assert match_pull_request(workflow, "opened", "main", None).matched
    assert match_pull_request(workflow, "synchronize", "refs/heads/main", ["a"]).matched
    reopened = match_pull_request(workflow, "reopened", "main", None)
    assert reopened == Match(
        False, "pull_request action 'reopened' is not in types [opened, synchronize]"
    )
    wrong_base = match_pull_request(workflow, "opened", "dev", None)
    assert wrong_base == Match(False, "branch 'dev' is not in branches [main]")
    assert not match_pull_request(workflow, "closed", "main", None).matched
    assert not match_pull_request(workflow, "opened", "refs/tags/v1", None).matched
    assert not match_pull_request(accept(with_on("on: push")), "opened", "main", None).matched


def test_pull_request_default_types(accept: Accept) -> None:
    workflow = accept(with_on("on: pull_request"))
    for action in ("opened", "reopened", "synchronize"):
        assert match_pull_request(workflow, action, "anything", None).matched
    assert not match_pull_request(workflow, "edited", "main", None).matched
