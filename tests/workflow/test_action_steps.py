"""Action steps (issue #15): ``uses`` references, ``with`` inputs, ``if`` and continue-on-error."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_steps import plan_steps, steps
from wf_support import messages

from forge_ci.workflow import Diagnostic
from forge_ci.workflow.actions import (
    ActionReference,
    ReferenceInvalid,
    input_problems,
    parse_reference,
)

Refuse = Callable[[str | bytes], list[Diagnostic]]
PlanOf = Callable[[str], dict[str, Any]]


def test_action_step_plan(plan_of: PlanOf) -> None:
    text = steps(
        "uses: actions/setup-python@v5\nid: py\nwith:\n  python-version: 3.11\n"
        "  cache: ''\n  empty:\nenv:\n  A: b\nif: github.event_name == 'push'\n"
        "continue-on-error: true\ntimeout-minutes: 5",
        "uses: ./.github/actions/local",
    )
    first, second = plan_steps(plan_of(text))
    assert first == {
        "id": "py",
        "generated_id": False,
        "name": "Run actions/setup-python@v5",
        "uses": "actions/setup-python@v5",
        "with": {"python-version": "3.11", "cache": "", "empty": ""},
        "run": None,
        "shell": None,
        "working_directory": None,
        "env": {"A": "b"},
        "if": "success() && (github.event_name == 'push')",
        "continue_on_error": True,
        "timeout_minutes": 5,
    }
    assert second["uses"] == "./.github/actions/local" and second["with"] == {}


def test_with_values_keep_runtime_expressions(plan_of: PlanOf) -> None:
    text = steps(
        "run: echo\nid: a",
        "uses: o/r@v1\nwith:\n  x: v-${{ steps.a.outputs.x }}\ncontinue-on-error: "
        "${{ github.event_name == 'push' }}",
    )
    step = plan_steps(plan_of(text))[1]
    assert step["with"] == {"x": {"template": ["v-", {"expr": "steps.a.outputs.x"}]}}
    assert step["continue_on_error"] == {"expr": "github.event_name == 'push'"}


def test_with_values_read_secrets_by_name_through_holders(plan_of: PlanOf) -> None:
    text = steps(
        "uses: o/r@v1\nwith:\n  token: ${{ secrets.PAT || secrets.GITHUB_TOKEN }}\n"
        "  key: k-${{ secrets.key }}-${{ hashFiles('**/lock') }}\nenv:\n  A: ${{ secrets.A }}",
    )
    step = plan_steps(plan_of(text))[0]
    assert step["with"] == {
        "token": {"template": [{"expr": "secrets.PAT || secrets.GITHUB_TOKEN"}]},
        "key": {"template": ["k-", {"expr": "secrets.key"}, "-", {"expr": "hashFiles('**/lock')"}]},
    }
    # The values are asked for by these names; the plan never holds one.
    assert step["env"] == {
        "A": {"secret": "A"},
        "_FORGE_CI_EXPR_SECRET_KEY": {"secret": "KEY"},
        "_FORGE_CI_EXPR_SECRET_PAT": {"secret": "PAT"},
    }


def test_with_matrix_values_are_filled_in(plan_of: PlanOf) -> None:
    text = steps("uses: actions/setup-node@v4\nwith:\n  node-version: ${{ matrix.node }}")
    text = text.replace(
        "    steps:", "    strategy:\n      matrix:\n        node: [20, 24]\n    steps:"
    )
    plan = plan_of(text)
    assert [job["steps"][0]["with"]["node-version"] for job in plan["jobs"]] == ["20", "24"]


def test_a_refused_reference_is_located(refuse: Refuse) -> None:
    found = refuse(steps("run: echo", "uses: docker://alpine:3"))
    assert found == [
        Diagnostic(
            7,
            15,
            "uses: docker://alpine:3: Docker container actions are not supported (jobs run "
            "without Docker); use a node or composite action, or a run step",
        )
    ]


def test_an_unknown_context_in_with_is_located(refuse: Refuse) -> None:
    found = messages(
        refuse(steps("uses: o/r@v1\nwith:\n  x: ${{ runner.os }}\n  y: ${{ jobs.a }}"))
    )
    assert "9:18: the jobs context is not supported" in found
    assert ":8:" not in found and "runner" not in found  # runner is a step context since #16


def test_local_action_needs_contents(refuse: Refuse) -> None:
    text = steps("uses: ./act").replace(
        "    steps:", "    permissions: {contents: none}\n    steps:"
    )
    assert "cannot use the local action ./act" in messages(refuse(text))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "actions/setup-python@v5",
            ActionReference("", False, "actions", "setup-python", "", "v5"),
        ),
        ("o/r/a/b@main", ActionReference("", False, "o", "r", "a/b", "main")),
        ("o/r@" + "a" * 40, ActionReference("", False, "o", "r", "", "a" * 40)),
        ("./", ActionReference("", True)),
        ("./.github/actions/x", ActionReference("", True, path=".github/actions/x")),
        ("./x/", ActionReference("", True, path="x")),
        ("o/r@release/v1.2", ActionReference("", False, "o", "r", "", "release/v1.2")),
    ],
)
def test_references(text: str, expected: ActionReference) -> None:
    parsed = parse_reference(text)
    assert (parsed.local, parsed.owner, parsed.repo, parsed.path, parsed.ref) == (
        expected.local,
        expected.owner,
        expected.repo,
        expected.path,
        expected.ref,
    )
    assert parsed.text == text


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("docker://alpine", "Docker container actions are not supported"),
        ("DOCKER://alpine", "Docker container actions are not supported"),
        ("o/r", "needs a version"),
        ("o@v1", "expected OWNER/REPO@REF"),
        ("-o/r@v1", "not a valid owner name"),
        ("o/r@", "is not a tag, branch or commit SHA"),
        ("o/r@a..b", "is not a tag, branch or commit SHA"),
        ("o/r@v 1", "is not a tag, branch or commit SHA"),
        ("o/r@refs/heads/main", "write the tag or branch name"),
        ("o/r/../x@v1", "must be a relative folder"),
        ("o/r/.git@v1", "must be a relative folder"),
        ("./a//b", "must be a relative folder"),
        ("/abs", "a local action is written ./PATH"),
        ("a\\b@v1", "a local action is written ./PATH"),
        ("o/r@" + "v" * 600, "the limit is 512"),
    ],
)
def test_refused_references(text: str, reason: str) -> None:
    with pytest.raises(ReferenceInvalid) as caught:
        parse_reference(text)
    assert reason in str(caught.value)


_NAME = st.from_regex(r"[a-z][a-z0-9]{0,8}", fullmatch=True)


@given(_NAME, _NAME, st.lists(_NAME, max_size=3), _NAME)
def test_reference_round_trip(owner: str, repo: str, path: list[str], ref: str) -> None:
    """Reference implementation: splitting on '/' and the last '@'."""
    text = "/".join([owner, repo, *path]) + "@" + ref
    parsed = parse_reference(text)
    assert (parsed.owner, parsed.repo, parsed.path.split("/") if path else [], parsed.ref) == (
        owner,
        repo,
        path,
        ref,
    )
    assert parsed.repository == f"{owner}/{repo}"


def test_input_problems_name_the_inputs_and_the_closest() -> None:
    found = input_problems(
        "actions/setup-python@v5", ["python-version", "cache"], ["Python-Version", "pyhton-version"]
    )
    assert found == [
        (
            "pyhton-version",
            "with.pyhton-version: actions/setup-python@v5 has no input 'pyhton-version'; did "
            'you mean "python-version"? (its inputs: python-version, cache)',
        )
    ]
    assert input_problems("a/b@v1", [], ["x"])[0][1].endswith("(its inputs: none)")
