"""Where expressions may appear and which contexts and functions they may use there."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from wf_support import messages

from forge_ci.workflow import Diagnostic, Workflow

Accept = Callable[[str], Workflow]
Refuse = Callable[[str | bytes], list[Diagnostic]]
PlanOf = Callable[[str], dict[str, Any]]

TEMPLATE = """\
on: push
env:
  W: {workflow_env}
jobs:
  first:
    runs-on: self-hosted
    outputs:
      out: ${{{{ steps.one.outputs.value }}}}
    steps:
      - id: one
        run: echo
  second:
    needs: first
    runs-on: self-hosted
    if: {job_if}
    strategy:
      matrix:
        os: [linux]
    env:
      J: {job_env}
    steps:
      - id: early
        run: echo
      - name: {step_name}
        if: {step_if}
        run: {run}
        env:
          S: {step_env}
"""

DEFAULTS = {
    "workflow_env": "w",
    "job_if": "success()",
    "job_env": "j",
    "step_name": "n",
    "step_if": "success()",
    "run": "echo",
    "step_env": "s",
}


def workflow(**values: str) -> str:
    return TEMPLATE.format(**{**DEFAULTS, **values})


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("workflow_env", "${{ github.sha }}"),
        ("workflow_env", "${{ github.event_name == 'push' }}"),
        ("job_if", "needs.first.outputs.out == 'x' && github.base_ref != ''"),
        ("job_if", "${{ failure() }}"),
        ("job_env", "${{ needs.first.result }}-${{ matrix.os }}-${{ strategy.job-index }}"),
        ("step_name", "${{ matrix.os }}"),
        ("step_if", "steps.early.outcome == 'success' && matrix.os == 'linux'"),
        ("step_if", "always()"),
        (
            "run",
            "echo ${{ steps.early.outputs.x }} ${{ needs.first.outputs.out }} "
            "${{ github.head_ref }}",
        ),
        ("step_env", "${{ steps.EARLY.conclusion }}"),
        ("step_env", "${{ toJSON(matrix) }}"),
        ("run", "echo ${{ format('{0}', github['sha']) }}"),
        ("step_name", "${{ github.sha }} ${{ steps.early.outcome }} ${{ runner.os }}"),
        ("run", "echo ${{ env.HOME }} ${{ runner.os }} ${{ runner.temp }} ${{ job.status }}"),
        ("run", "echo ${{ vars.X }} ${{ inputs.x }} ${{ github.ref }} ${{ github.ref_name }}"),
        ("run", "echo ${{ github.event.after }} ${{ github.event.head_commit.message }}"),
        ("run", "echo ${{ github.workflow }} ${{ github.run_id }} ${{ github.token }}"),
        ("run", "echo ${{ secrets.X }} ${{ secrets.GITHUB_TOKEN }}"),
        ("workflow_env", "${{ inputs.x }}-${{ vars.Y }}-${{ github.event.ref }}"),
        ("job_if", "inputs.deploy && vars.ENABLED == 'yes' && github.ref_type == 'branch'"),
        ("step_if", "runner.os == 'Linux' && env.X == 'a' && job.status == 'success'"),
        ("run", "echo ${{ hashFiles('**/x') }}"),
        ("step_if", "hashFiles('**/requirements.txt', '!vendor/**') != ''"),
        ("step_env", "${{ hashFiles('a', 'b') }}-${{ matrix.os }}"),
        ("step_name", "lock ${{ hashFiles('**/*.lock') }}"),
    ],
)
def test_allowed_uses(accept: Accept, key: str, value: str) -> None:
    accept(workflow(**{key: value}))


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("workflow_env", "${{ matrix.os }}", "the matrix context is not available in workflow env"),
        (
            "workflow_env",
            "${{ needs.first.result }}",
            "the needs context is not available in workflow env",
        ),
        ("job_if", "matrix.os == 'linux'", "the matrix context is not available in a job's if"),
        ("job_if", "steps.one.outcome", "the steps context is not available in a job's if"),
        ("job_if", "needs.other.result", "job 'other' is not listed in this job's needs"),
        (
            "job_env",
            "${{ steps.early.outputs.x }}",
            "the steps context is not available in job env",
        ),
        (
            "job_env",
            "${{ needs.first.output }}",
            "needs.first.output does not exist; use outputs or result",
        ),
        ("step_name", "${{ secrets.X }}", "(not in a step name)"),
        ("workflow_env", "${{ runner.os }}", "the runner context is not available in workflow env"),
        ("job_env", "${{ env.X }}", "the env context is not available in job env"),
        ("job_if", "job.status == 'x'", "the job context is not available in a job's if"),
        ("step_if", "steps.early.result", "steps.early.result does not exist"),
        (
            "step_if",
            "strategy.fail_fast",
            'strategy.fail_fast does not exist; did you mean "fail-fast"?',
        ),
        ("run", "echo ${{ success() }}", "success() can only be used in an if condition"),
        ("run", "echo ${{ runner.cpu }}", "runner.cpu does not exist; use arch, debug"),
        ("run", "echo ${{ job.steps }}", "job.steps does not exist; use container"),
        ("run", "echo ${{ github.sha.short }}", "github.sha is text; it has no field 'short'"),
        ("run", "echo ${{ jobs.x.result }}", "the jobs context is not supported by forge-ci"),
        (
            "run",
            "echo ${{ gihtub.sha }}",
            "unrecognized named-value 'gihtub'; did you mean \"github\"?",
        ),
        (
            "run",
            "echo ${{ github.refname }}",
            'github.refname is not available; did you mean "ref_name"?',
        ),
        (
            "job_env",
            "${{ hashFiles('**/x') }}",
            "hashFiles() reads the job's workspace, so only step keys can use it (not job env)",
        ),
        (
            "job_if",
            "hashFiles('x') != ''",
            "hashFiles() reads the job's workspace, so only step keys can use it (not a job's if)",
        ),
        ("run", "echo ${{ nope(1) }}", "Unrecognized function: 'nope'"),
        ("run", "echo ${{ github.sha", "The expression is not closed"),
        ("run", "echo ${{ }}", "An expression was expected"),
        ("run", "echo ${{ 1 + 2 }}", "invalid expression in run"),
        ("step_if", "${{ github.sha }} == 'x'", "a step's if is one expression"),
        ("step_if", "(", "invalid expression in a step's if"),
    ],
)
def test_refused_uses(refuse: Refuse, key: str, value: str, reason: str) -> None:
    diagnostics = refuse(workflow(**{key: value}))
    assert reason in messages(diagnostics)


def test_expression_errors_point_into_the_source(refuse: Refuse) -> None:
    diagnostics = refuse(workflow(run="|\n          line one\n          echo ${{ github.nope }}"))
    assert [(d.line, d.column) for d in diagnostics] == [(28, 20)]
    diagnostics = refuse(workflow(step_if="steps.early.outcome == 'x' && (", run="echo"))
    assert len(diagnostics) == 1 and diagnostics[0].line == 25
    assert diagnostics[0].column > 13


def test_expression_position_inside_quoted_value(refuse: Refuse) -> None:
    diagnostics = refuse(workflow(run="'echo ${{ jobs.X }}'"))
    assert [(d.line, d.column) for d in diagnostics] == [(26, 24)]


def test_if_forms(plan_of: PlanOf) -> None:
    plan = plan_of(workflow(job_if="${{ needs.first.result == 'success' }}", step_if="true"))
    second = plan["jobs"][1]
    assert second["if"] == "success() && (needs.first.result == 'success')"
    assert second["steps"][1]["if"] == "success() && (true)"


def test_whole_value_that_is_an_object_is_refused(refuse: Refuse) -> None:
    diagnostics = refuse(workflow(step_env="${{ matrix }}"))
    assert "${{ matrix }} is a mapping, where text is expected" in messages(diagnostics)


def test_static_expressions_are_evaluated_in_the_plan(plan_of: PlanOf) -> None:
    plan = plan_of(workflow(step_env="${{ format('{0}-{1}', matrix.os, 3) }}"))
    assert plan["jobs"][1]["steps"][1]["env"]["S"] == "linux-3"


def test_runtime_expressions_stay_templates(plan_of: PlanOf) -> None:
    plan = plan_of(workflow(step_env="a ${{ matrix.os }} ${{ steps.early.outputs.x }} b"))
    assert plan["jobs"][1]["steps"][1]["env"]["S"] == {
        "template": ["a linux ", {"expr": "steps.early.outputs.x"}, " b"]
    }


def test_scope_copies_are_what_the_constructor_makes() -> None:
    """Scope.narrowed and Scope.at fill a new scope's fields at once; they must name them all."""
    from forge_ci.records import fields, replace
    from forge_ci.workflow.templates import Scope

    job = Scope(
        "job", frozenset({"github"}), True, True, True, True, True, frozenset({"os"}),
        frozenset({"a"}), frozenset({"s1"}),
    )  # fmt: skip
    narrowed = job.narrowed("with", frozenset({"env"}), files=True, steps=frozenset({"s2"}))
    assert narrowed == Scope(
        "with", frozenset({"env"}), files=True, matrix_keys=frozenset({"os"}),
        needs=frozenset({"a"}), steps=frozenset({"s2"}),
    )  # fmt: skip
    assert job.at("with.x") == replace(job, where="with.x")
    names = {field.name for field in fields(Scope)}
    assert set(vars(narrowed)) == set(vars(job.at("y"))) == names
    assert hash(narrowed) == hash(replace(narrowed))
