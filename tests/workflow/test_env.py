"""Env names and values, reserved names, secrets as whole values, precedence."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from wf_support import messages

from forge_ci.workflow import Diagnostic
from forge_ci.workflow.env import env_name_problem

Refuse = Callable[[str | bytes], list[Diagnostic]]
PlanOf = Callable[[str], dict[str, Any]]


def workflow(
    workflow_env: str = "", job_env: str = "", step_env: str = "", run: str = "echo hi"
) -> str:
    text = "on: push\n"
    if workflow_env:
        text += "env:\n" + workflow_env
    text += "jobs:\n  build:\n    runs-on: self-hosted\n"
    if job_env:
        text += "    env:\n" + "\n".join("    " + line for line in job_env.splitlines()) + "\n"
    text += f"    steps:\n      - run: {run}\n"
    if step_env:
        text += (
            "        env:\n" + "\n".join("        " + line for line in step_env.splitlines()) + "\n"
        )
    return text


def step_env(plan: dict[str, Any]) -> dict[str, Any]:
    env: dict[str, Any] = plan["jobs"][0]["steps"][0]["env"]
    return env


@pytest.mark.parametrize(
    "name",
    [
        "A", "_x", "PATH_2", "lower", "a" * 255, "GITHUB_TOKEN", "GITHUB_CONTEXT", "github_x",
        # Any name, as on GitHub: programs read them even where a shell cannot expand them.
        "1A", "A-B", "A B", "ruby-version", "x.y", "é",
    ],
)  # fmt: skip
def test_valid_names(name: str) -> None:
    assert env_name_problem(name) is None


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("A=B", "contains '='"),
        ("A\x00B", "contains a control character"),
        ("A\nB", "contains a control character"),
        ("", "must not be empty"),
        ("${{ runner.name }}", "is not supported as an env name"),
        ("a" * 256, "longer than 255"),
        ("FORGE_CI_TOKEN", "reserved for the executor"),
        ("GITHUB_SHA", "GITHUB_SHA is set by the runner; a workflow cannot override it"),
        ("github_sha", "is set by the runner"),
        ("GITHUB_ENV", "is set by the runner"),
        ("GITHUB_WORKSPACE", "is set by the runner"),
        ("GITHUB_EVENT_PATH", "is set by the runner"),
        ("RUNNER_TEMP", "reserved for the executor"),
        ("BASH_ENV", "run other code"),
        ("ENV", "run other code"),
        ("SHELLOPTS", "run other code"),
        ("BASHOPTS", "run other code"),
        ("NODE_OPTIONS", "run other code"),
        ("LD_PRELOAD", "run other code"),
        ("LD_LIBRARY_PATH", "run other code"),
        ("DYLD_INSERT_LIBRARIES", "run other code"),
    ],
)
def test_refused_names(name: str, reason: str) -> None:
    problem = env_name_problem(name)
    assert problem is not None and reason in problem


@pytest.mark.parametrize("where", ["workflow_env", "job_env", "step_env"])
def test_names_are_checked_at_every_level(refuse: Refuse, where: str) -> None:
    diagnostics = refuse(workflow(**{where: "  LD_PRELOAD: x\n"}))
    assert "LD_PRELOAD would let the shell or the loader run other code" in messages(diagnostics)


def test_values_keep_their_spelling(plan_of: PlanOf) -> None:
    plan = plan_of(workflow(workflow_env="  A: 1.50\n  B: false\n  C: |\n    two\n    lines\n"))
    assert step_env(plan) == {"A": "1.50", "B": "false", "C": "two\nlines\n"}


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("", "is empty; write '' for an empty value"),
        ("~", "is empty"),
        ("[a]", "must be a string, number or boolean, not a sequence"),
        ("{a: 1}", "must be a string, number or boolean, not a mapping"),
    ],
)
def test_refused_values(refuse: Refuse, value: str, reason: str) -> None:
    assert reason in messages(refuse(workflow(step_env=f"  A: {value}\n")))


def test_empty_string_is_a_value(plan_of: PlanOf) -> None:
    assert step_env(plan_of(workflow(step_env="  A: ''\n"))) == {"A": ""}


def test_at_most_100_entries_per_scope(plan_of: PlanOf, refuse: Refuse) -> None:
    hundred = "".join(f"  V{i}: x\n" for i in range(100))
    assert len(step_env(plan_of(workflow(workflow_env=hundred)))) == 100
    diagnostics = refuse(workflow(job_env=hundred + "  V100: x\n"))
    assert "job env has 101 entries; the limit is 100" in messages(diagnostics)


def test_env_must_be_a_mapping(refuse: Refuse) -> None:
    text = workflow().replace("jobs:", "env: ${{ fromJSON('{}') }}\njobs:")
    assert "workflow env must be a mapping" in messages(refuse(text))


def test_precedence_workflow_job_step(plan_of: PlanOf) -> None:
    plan = plan_of(
        workflow(
            workflow_env="  A: workflow\n  B: workflow\n  C: workflow\n",
            job_env="  B: job\n  C: job\n",
            step_env="  C: step\n",
        )
    )
    assert step_env(plan) == {"A": "workflow", "B": "job", "C": "step"}


def test_secret_is_kept_by_name_only(plan_of: PlanOf) -> None:
    plan = plan_of(workflow(step_env="  TOKEN: ${{ secrets.deploy_Token }}\n"))
    assert step_env(plan) == {"TOKEN": {"secret": "DEPLOY_TOKEN"}}


def test_secret_spacing_is_optional(plan_of: PlanOf) -> None:
    plan = plan_of(workflow(workflow_env="  TOKEN: ${{secrets.X}}\n"))
    assert step_env(plan) == {"TOKEN": {"secret": "X"}}


def test_public_value_replaces_a_secret_of_an_outer_scope(plan_of: PlanOf) -> None:
    plan = plan_of(
        workflow(workflow_env="  TOKEN: ${{ secrets.X }}\n", step_env="  TOKEN: public\n")
    )
    assert step_env(plan) == {"TOKEN": "public"}


@pytest.mark.parametrize(
    ("text_env", "value", "holders"),
    [
        ("  T: prefix-${{ secrets.X }}\n", ["prefix-", {"expr": "secrets.X"}], ["X"]),
        (
            "  T: ${{ secrets.X }}${{ secrets.y }}\n",
            [{"expr": "secrets.X"}, {"expr": "secrets.y"}],
            ["X", "Y"],
        ),
        (
            "  T: ${{ format('{0}', secrets.X) }}\n",
            [{"expr": "format('{0}', secrets.X)"}],
            ["X"],
        ),
        ("  T: ${{ secrets['X'] }}\n", [{"expr": "secrets['X']"}], ["X"]),
        (
            "  T: ${{ secrets.PAT || secrets.GITHUB_TOKEN }}\n",
            [{"expr": "secrets.PAT || secrets.GITHUB_TOKEN"}],
            ["PAT"],  # the job token is no stored secret
        ),
    ],
)
def test_expressions_over_secrets_keep_names_and_hold_the_values(
    plan_of: PlanOf, text_env: str, value: list[Any], holders: list[str]
) -> None:
    env = step_env(plan_of(workflow(step_env=text_env)))
    assert env.pop("T") == {"template": value}
    assert env == {f"_FORGE_CI_EXPR_SECRET_{name}": {"secret": name} for name in holders}


@pytest.mark.parametrize(
    ("text_env", "reason"),
    [
        ("  T: ${{ secrets }}\n", "name one secret, like secrets.NAME, not secrets (step env)"),
        ("  T: ${{ toJSON(secrets) }}\n", "name one secret, like secrets.NAME, not secrets"),
        ("  T: ${{ secrets[github.sha] }}\n", "name one secret, like secrets.NAME, not secrets"),
        ("  T: ${{ secrets.A.b }}\n", "name one secret, like secrets.NAME, not secrets.A.b"),
        ("  T: ${{ secrets.GITHUB_APP }}\n", "uses the reserved prefix GITHUB_"),
        ("  T: x${{ secrets.FORGE_CI_X }}\n", "uses the reserved prefix FORGE_CI_"),
    ],
)
def test_refused_secret_uses_in_env(refuse: Refuse, text_env: str, reason: str) -> None:
    assert reason in messages(refuse(workflow(step_env=text_env)))


def test_github_token_is_the_job_token_not_a_stored_secret(plan_of: PlanOf) -> None:
    plan = plan_of(workflow(step_env="  T: ${{ secrets.GITHUB_TOKEN }}\n"))
    assert step_env(plan) == {"T": {"template": [{"expr": "github.token"}]}}


def test_secrets_in_run_expressions_become_variables_and_are_refused_elsewhere(
    plan_of: PlanOf, refuse: Refuse
) -> None:
    env = step_env(plan_of(workflow(run="echo ${{ secrets.X || 'none' }}")))
    assert env == {
        "_FORGE_CI_EXPR_1": {"template": [{"expr": "secrets.X || 'none'"}]},
        "_FORGE_CI_EXPR_SECRET_X": {"secret": "X"},
    }
    text = workflow().replace("      - run: echo hi", "      - run: echo hi\n        if: secrets.X")
    assert (
        "secrets can only be used in env, run and with values, like NAME: ${{ secrets.NAME }} "
        "(not in a step's if)" in messages(refuse(text))
    )
