"""Run-context resolution: github.* fields filled in once, inserted values never re-evaluated."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from forge_ci.errors import InvalidInput
from forge_ci.workflow import RunContext, RunContextInvalid, plan_digest, resolve_run_context

PlanOf = Callable[[str], dict[str, Any]]

SHA = "0123456789abcdef0123456789abcdef01234567"

WORKFLOW = """\
on: [push, pull_request]
concurrency: ci-${{ github.base_ref }}
env:
  TESTED_SHA: ${{ github.sha }}
  SOURCE_BRANCH: ${{github.head_ref}}
  BUILD_LABEL: build-${{ github.sha }}-${{ github.event_name }}
  REPO: ${{ github.repository }}
  TOKEN: ${{ secrets.TOKEN }}
jobs:
  test:
    runs-on: self-hosted
    steps:
      - id: a
        run: echo ${{ github.sha }}
      - run: echo
        env:
          COMPARE: ${{ github.event_name == 'push' }}
          MIXED: ${{ github.sha }}/${{ steps.a.outputs.x }}
"""


def pr_context(head_ref: str = "feature/x") -> RunContext:
    return RunContext("alice/project", SHA, "pull_request", head_ref=head_ref, base_ref="main")


def test_simple_references_are_resolved_in_env_and_concurrency(plan_of: PlanOf) -> None:
    resolved = resolve_run_context(plan_of(WORKFLOW), pr_context())
    env = resolved["jobs"][0]["steps"][0]["env"]
    assert env["TESTED_SHA"] == SHA
    assert env["SOURCE_BRANCH"] == "feature/x"
    assert env["BUILD_LABEL"] == f"build-{SHA}-pull_request"
    assert env["REPO"] == "alice/project"
    assert env["TOKEN"] == {"secret": "TOKEN"}
    assert resolved["concurrency"]["group"] == "ci-main"


def test_other_expressions_stay_runtime_templates(plan_of: PlanOf) -> None:
    resolved = resolve_run_context(plan_of(WORKFLOW), pr_context())
    first, second = resolved["jobs"][0]["steps"]
    assert first["run"] == {"template": ["echo ", {"expr": "github.sha"}]}
    assert second["env"]["COMPARE"] == {"template": [{"expr": "github.event_name == 'push'"}]}
    assert second["env"]["MIXED"] == {"template": [f"{SHA}/", {"expr": "steps.a.outputs.x"}]}


@pytest.mark.parametrize("branch", ["${{ github.sha }}", "$(reboot)", "`id`", "a}}b${{"])
def test_inserted_values_are_never_evaluated_again(plan_of: PlanOf, branch: str) -> None:
    resolved = resolve_run_context(plan_of(WORKFLOW), pr_context(head_ref=branch))
    env = resolved["jobs"][0]["steps"][0]["env"]
    assert env["SOURCE_BRANCH"] == branch
    # Resolving the stored result again (a buggy rerun) cannot change it either.
    again = resolve_run_context(resolved, pr_context(head_ref="other"))
    assert again["jobs"][0]["steps"][0]["env"]["SOURCE_BRANCH"] == branch


def test_push_runs_have_empty_refs(plan_of: PlanOf) -> None:
    resolved = resolve_run_context(plan_of(WORKFLOW), RunContext("o/r", SHA, "push"))
    env = resolved["jobs"][0]["steps"][0]["env"]
    assert (env["SOURCE_BRANCH"], resolved["concurrency"]["group"]) == ("", "ci-")


def test_the_plan_given_is_not_changed(plan_of: PlanOf) -> None:
    plan = plan_of(WORKFLOW)
    before = copy.deepcopy(plan)
    resolved = resolve_run_context(plan, pr_context())
    assert plan == before
    assert plan_digest(resolved) != plan_digest(plan)
    assert resolve_run_context(plan, pr_context()) == resolved


@pytest.mark.parametrize(
    "context",
    [
        RunContext("noslash", SHA, "push"),
        RunContext("o/r", "abc", "push"),
        RunContext("o/r", SHA.upper(), "push"),
        RunContext("o/r", SHA, "release"),
        RunContext("o/r", SHA, "push", head_ref="a\x00b"),
        RunContext("o/r", SHA, "push", base_ref="a\nb"),
    ],
)
def test_malformed_contexts_are_refused(plan_of: PlanOf, context: RunContext) -> None:
    with pytest.raises(RunContextInvalid):
        resolve_run_context(plan_of(WORKFLOW), context)


def test_sha256_object_ids_are_accepted(plan_of: PlanOf) -> None:
    sha256 = "ab" * 32
    resolved = resolve_run_context(plan_of(WORKFLOW), RunContext("o/r", sha256, "push"))
    assert resolved["jobs"][0]["steps"][0]["env"]["TESTED_SHA"] == sha256


def test_resolved_values_over_64_kib_are_refused(plan_of: PlanOf) -> None:
    text = (
        "on: push\njobs:\n  a:\n    runs-on: self-hosted\n    steps:\n      - run: x\n"
        "        env:\n          BIG: " + "${{ github.head_ref }}" * 20 + "\n"
    )
    plan = plan_of(text)
    resolve_run_context(plan, pr_context(head_ref="b" * 3000))
    with pytest.raises(RunContextInvalid) as caught:
        resolve_run_context(plan, pr_context(head_ref="b" * 4000))
    assert isinstance(caught.value, InvalidInput)
    assert "env BIG of step step_1 in job a is over 65536 bytes" in caught.value.message
