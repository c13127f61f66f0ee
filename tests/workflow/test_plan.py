"""The normalized plan: shape, determinism, digest, canonical JSON and the 1 MiB limit."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from wf_support import MINIMAL, messages

from forge_ci.workflow import (
    Diagnostic,
    Workflow,
    build_plan,
    canonical,
    parse_workflow,
    plan_digest,
)
from forge_ci.workflow.canonical import canonical_json, es_number
from forge_ci.workflow.parser import workflow_plan_digest

Accept = Callable[[str], Workflow]
Refuse = Callable[[str | bytes], list[Diagnostic]]
PlanOf = Callable[[str], dict[str, Any]]

SAMPLE = """\
name: CI
on:
  push:
    branches: [main]
  pull_request:
env:
  TESTED_SHA: ${{ github.sha }}
jobs:
  build:
    runs-on: [self-hosted, linux]
    strategy:
      matrix:
        py: ['3.11', '3.12']
    steps:
      - uses: forge-ci/checkout@v1
      - run: make test
  after:
    needs: build
    runs-on: self-hosted
    steps:
      - run: echo done
"""


def test_plan_top_level(plan_of: PlanOf) -> None:
    plan = plan_of(SAMPLE)
    assert plan["version"] == 1
    assert plan["name"] == "CI"
    assert plan["on"] == {
        "push": {"branches": ["main"]},
        "pull_request": {"types": ["opened", "reopened", "synchronize"]},
    }
    assert plan["concurrency"] is None
    assert [job["key"] for job in plan["jobs"]] == ["build (3.11)", "build (3.12)", "after"]
    json.dumps(plan, allow_nan=False)


def test_plan_is_deterministic_and_digest_is_sha256_of_canonical_json(accept: Accept) -> None:
    first = build_plan(accept(SAMPLE))
    second = build_plan(parse_workflow(SAMPLE.encode(), "other/path.yml"))
    assert first == second
    expected = hashlib.sha256(
        json.dumps(first, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    ).hexdigest()
    assert plan_digest(first) == plan_digest(second) == expected


def test_digest_changes_with_the_plan(plan_of: PlanOf) -> None:
    assert plan_digest(plan_of(SAMPLE)) != plan_digest(plan_of(SAMPLE.replace("make test", "make")))


def test_build_plan_returns_a_copy(accept: Accept) -> None:
    workflow = accept(SAMPLE)
    plan = build_plan(workflow)
    plan["jobs"].clear()
    assert build_plan(workflow)["jobs"]


def test_workflow_carries_source_and_triggers(accept: Accept) -> None:
    workflow = accept(SAMPLE)
    assert workflow.source == SAMPLE
    assert workflow.path == "test.yml"
    assert workflow.triggers.push is not None and workflow.triggers.pull_request is not None
    assert not workflow.triggers.workflow_dispatch


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0.0, "0"),
        (-0.0, "0"),
        (1.0, "1"),
        (0.1, "0.1"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1e-7, "1e-7"),
        (1.5e-6, "0.0000015"),
        (123.456, "123.456"),
        (-2.5, "-2.5"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
    ],
)
def test_numbers_serialise_like_ecmascript(value: float, expected: str) -> None:
    assert es_number(value) == expected


def test_canonical_json_rfc8785() -> None:
    value = {"b": [1, 2.5, None, True, False], "a": 'é\n"\\\u2028', "\ue000": 1, "\U0001f600": 2}
    assert (
        canonical_json(value)
        == (
            '{"a":"é\\n\\"\\\\\u2028","b":[1,2.5,null,true,false],"\U0001f600":2,"\ue000":1}'
        ).encode()
    )
    with pytest.raises(ValueError):
        canonical_json({"x": float("nan")})
    with pytest.raises(TypeError):
        canonical_json({1: "x"})


_KEYS = st.text(st.characters(codec="utf-8") | st.sampled_from('\ue000\uffff\U0001f600"\\\x00'))
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | _KEYS,
    lambda inner: st.lists(inner) | st.tuples(inner) | st.dictionaries(_KEYS, inner),
    max_leaves=30,
)


@given(_JSON)
def test_the_c_encoder_path_writes_what_the_rfc_8785_walk_writes(value: Any) -> None:
    # canonical_json takes the C encoder for values without floats or keys beyond U+FFFF.
    walked: list[str] = []
    canonical._write(value, walked.append)
    assert canonical_json(value) == "".join(walked).encode("utf-8")


@given(_JSON)
def test_canonical_json_decodes_and_encodes_to_the_same_bytes(value: Any) -> None:
    # What lets workflow_plan_digest hash a workflow's plan_json instead of re-encoding its plan.
    encoded = canonical_json(value)
    assert canonical_json(json.loads(encoded)) == encoded


def test_the_digest_of_a_workflow_is_the_digest_of_its_plan(accept: Accept) -> None:
    workflow = accept(SAMPLE.replace("'3.11', '3.12'", "3.10, 1e3, 2.5"))
    assert workflow_plan_digest(workflow) == plan_digest(build_plan(workflow))


def test_plan_over_one_mebibyte_is_refused(refuse: Refuse, plan_of: PlanOf) -> None:
    big_env = "".join(f"  V{i}: {'x' * 990}\n" for i in range(20))
    head = "on: push\nenv:\n" + big_env
    matrix = "    strategy:\n      matrix:\n        n: [" + ", ".join(map(str, range(40))) + "]\n"
    job = "jobs:\n  build:\n    runs-on: self-hosted\n" + matrix + "    steps:\n      - run: a\n"
    assert len(plan_of(head + job)["jobs"]) == 40
    bigger = job.replace("range", "").replace(
        ", ".join(map(str, range(40))), ", ".join(map(str, range(60)))
    )
    diagnostics = refuse(head + bigger)
    assert len(diagnostics) == 1
    assert "the normalized plan is" in diagnostics[0].message
    assert "the limit is 1048576 (1 MiB)" in diagnostics[0].message


def test_every_problem_is_reported_at_once(refuse: Refuse) -> None:
    text = MINIMAL.replace("runs-on: self-hosted", "runs_on: self-hosted\n    timeout-minutes: 0")
    text = text.replace("on: push", "on: [push, shedule]")
    text += "      - uses: docker://node:20\n"
    diagnostics = refuse(text)
    assert messages(diagnostics).splitlines() == [
        "1:12: 'shedule' is not a workflow event; did you mean \"schedule\"? (forge-ci fires "
        "push, pull_request, workflow_dispatch and schedule)",
        "4:5: 'runs_on' is not a job key; did you mean \"runs-on\"?",
        "4:5: job 'build' needs runs-on",
        "5:22: timeout-minutes must be a whole number of minutes from 1 through 360, not '0'",
        "8:15: uses: docker://node:20: Docker container actions are not supported (jobs run "
        "without Docker); use a node or composite action, or a run step",
    ]


def _reference_c_encodable(value: Any) -> bool:
    """The recursive form of canonical._c_encodable, as it was written first."""
    kind = type(value)
    if kind is dict:
        return all(
            type(key) is str and max(key, default="a") <= "\uffff" and _reference_c_encodable(item)
            for key, item in value.items()
        )
    if kind is list or kind is tuple:
        return all(_reference_c_encodable(item) for item in value)
    return kind is str or kind is int or kind is bool or value is None


@given(_JSON | st.builds(lambda v: [{"k": [v, (1, v)]}], _JSON))
def test_the_c_encoder_check_is_its_recursive_reference(value: Any) -> None:
    assert canonical._c_encodable(value) == _reference_c_encodable(value)
    assert not canonical._c_encodable([1, {"a": [object()]}])
    assert not canonical._c_encodable({1: "x"})


def test_a_value_that_holds_itself_is_refused_as_before() -> None:
    looped: list[Any] = []
    looped.append(looped)
    with pytest.raises(RecursionError):
        canonical_json(looped)
