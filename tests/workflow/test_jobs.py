"""Jobs: keys, ids, needs and cycles, runner labels, timeouts, permissions, outputs, limits."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from wf_support import messages

from forge_ci import protocol
from forge_ci.workflow import Diagnostic
from forge_ci.workflow.jobs import MAX_JOB_OUTPUTS
from forge_ci.workflow.labels import normalize_labels

Refuse = Callable[[str | bytes], list[Diagnostic]]
PlanOf = Callable[[str], dict[str, Any]]


def job(extra: str = "", job_id: str = "build", runs_on: str = "self-hosted") -> str:
    text = f"  {job_id}:\n    runs-on: {runs_on}\n"
    text += "".join("    " + line + "\n" for line in extra.strip("\n").splitlines() if extra)
    return text + "    steps:\n      - run: echo hi\n"


def workflow(*jobs: str, head: str = "on: push\n") -> str:
    return head + "jobs:\n" + "".join(jobs)


def test_job_plan_defaults(plan_of: PlanOf) -> None:
    (planned,) = plan_of(workflow(job()))["jobs"]
    assert {k: v for k, v in planned.items() if k != "steps"} == {
        "key": "build",
        "id": "build",
        "name": "build",
        "needs": [],
        "if": "success()",
        "runs_on": ["self-hosted", "linux"],
        "timeout_minutes": 360,
        "permissions": {"contents": "read"},
        "matrix": None,
        "strategy": None,
        "outputs": {},
    }


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        ("runs_on: x", "'runs_on' is not a job key; did you mean \"runs-on\"?"),
        ("timeout_minutes: 5", 'did you mean "timeout-minutes"?'),
        ("step: []", 'did you mean "steps"?'),
        ("container: node:20", "job containers are not supported"),
        ("services: {}", "service containers are not supported"),
        ("environment: {url: x}", "environment needs a name"),
        ("environment: {name: p, ur: x}", "'ur' is not an environment key; did you mean \"url\"?"),
        ("environment: {name: p, deployment: maybe}", "environment.deployment must be true or"),
        ("environment: [a]", "environment.name must be a string"),
        ("concurrency: x", "job-level concurrency is not supported"),
        ("timeout-minutes: 0", "from 1 through 360"),
        ("timeout-minutes: 361", "from 1 through 360"),
        ("timeout-minutes: ${{ matrix.t }}", "from 1 through 360"),
        ("continue-on-error: maybe", "continue-on-error must be true or false"),
        ("continue-on-error: x ${{ true }}", "must be true, false or one ${{ }} expression"),
        ("continue-on-error: ${{ steps.a.outcome }}", "the steps context is not available"),
        ("permissions: read", "permissions must be read-all, write-all or a mapping"),
        ("permissions:\n  contents: admin", "contents must be read, write or none"),
        ("permissions:\n  issues: [read]", "issues must be read, write or none"),
        ("permissions:\n  bogus: read", "'bogus' is not a permission scope"),
        ("permissions:\n  id_token: write", 'did you mean "id-token"?'),
        ("if: ''", "a job's if needs an expression"),
        ("outputs:\n  bad.name: x", "the output name 'bad.name' is invalid"),
        ("outputs: x", "outputs must be a mapping"),
        ("name: ${{ steps.a.outcome }}", "the steps context is not available in a job name"),
        ("defaults:\n  run:\n    shell: zsh", "shell 'zsh' is not supported"),
    ],
)
def test_refused_job_keys(refuse: Refuse, extra: str, reason: str) -> None:
    assert reason in messages(refuse(workflow(job(extra))))


def test_required_job_keys(refuse: Refuse) -> None:
    diagnostics = refuse(workflow("  build:\n    name: x\n"))
    assert messages(diagnostics) == "4:5: job 'build' needs runs-on\n4:5: job 'build' needs steps"
    assert "reusable workflows (jobs.<id>.uses) are not supported" in messages(
        refuse(workflow("  call:\n    uses: o/r/.github/workflows/w.yml@v1\n"))
    )


def test_job_ids(refuse: Refuse, plan_of: PlanOf) -> None:
    plan = plan_of(workflow(job(job_id="_a"), job(job_id="b-1"), job(job_id="c_")))
    assert [j["id"] for j in plan["jobs"]] == ["_a", "b-1", "c_"]
    assert "the job id 'my.job' is invalid" in messages(refuse(workflow(job(job_id="my.job"))))
    assert "ids starting with '__' are reserved" in messages(refuse(workflow(job(job_id="__a"))))
    duplicate = refuse(workflow(job(job_id="build"), job(job_id="BUILD")))
    assert duplicate == [
        Diagnostic(
            7,
            3,
            "the job id 'BUILD' is already used (line 3); job ids are compared without regard "
            "to case",
        )
    ]


def test_jobs_must_be_a_non_empty_mapping(refuse: Refuse) -> None:
    assert "jobs must define at least one job" in messages(refuse("on: push\njobs: {}\n"))
    assert "jobs must be a mapping" in messages(refuse("on: push\njobs: [a]\n"))
    assert "the workflow needs 'jobs'" in messages(refuse("on: push\n"))
    assert "the workflow needs 'on'" in messages(refuse(workflow(job(), head="")))


def test_at_most_16_jobs(plan_of: PlanOf, refuse: Refuse) -> None:
    sixteen = [job(job_id=f"j{i}") for i in range(16)]
    assert len(plan_of(workflow(*sixteen))["jobs"]) == 16
    diagnostics = refuse(workflow(*sixteen, job(job_id="j16")))
    assert diagnostics == [Diagnostic(3 + 16 * 4, 3, "a workflow has at most 16 jobs")]


def test_needs(plan_of: PlanOf, refuse: Refuse) -> None:
    plan = plan_of(
        workflow(job(job_id="a"), job("needs: a", job_id="b"), job("needs: [A, b]", job_id="c"))
    )
    assert [j["needs"] for j in plan["jobs"]] == [[], ["a"], ["a", "b"]]
    unknown = refuse(workflow(job(job_id="lint"), job("needs: [lnt]", job_id="b")))
    assert unknown == [Diagnostic(9, 13, "job 'b' needs unknown job 'lnt'; did you mean \"lint\"?")]
    twice = refuse(workflow(job(job_id="a"), job("needs: [a, a]", job_id="b")))
    assert "job 'a' is listed twice in needs" in messages(twice)


def test_dependency_cycles_are_named(refuse: Refuse) -> None:
    diagnostics = refuse(
        workflow(
            job(job_id="root"),
            job("needs: [root, c]", job_id="b"),
            job("needs: b", job_id="c"),
        )
    )
    assert diagnostics == [Diagnostic(9, 19, "jobs depend on each other in a cycle: b -> c -> b")]


def test_self_dependency_and_no_root(refuse: Refuse) -> None:
    diagnostics = refuse(workflow(job("needs: a", job_id="a")))
    assert messages(diagnostics) == (
        "3:3: every job needs another job, so no job can start\n"
        "5:12: jobs depend on each other in a cycle: a -> a"
    )


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        (["self-hosted"], ["self-hosted", "linux"]),
        (["linux"], ["self-hosted", "linux"]),
        (["self-hosted", "linux", "gpu"], ["self-hosted", "linux", "gpu"]),
        (["gpu", "Self-Hosted"], ["self-hosted", "linux", "gpu"]),
        (["ubuntu-latest"], ["self-hosted", "linux", "x64", "ubuntu-latest"]),
        (["ubuntu-22.04", "self-hosted"], ["self-hosted", "linux", "x64", "ubuntu-22.04"]),
        (["x64", "ubuntu-24.04"], ["self-hosted", "linux", "x64", "ubuntu-24.04"]),
        (
            ["ubuntu-latest", "ubuntu-24.04"],
            ["self-hosted", "linux", "x64", "ubuntu-latest", "ubuntu-24.04"],
        ),
    ],
)
def test_label_normalisation(labels: list[str], expected: list[str]) -> None:
    assert normalize_labels(labels) == (expected, [])


@pytest.mark.parametrize(
    ("labels", "reason"),
    [
        ([], "at least one label"),
        (["windows-latest", "Windows-Latest"], "listed twice"),
        (["ubuntu-24.04-arm"], "not a supported image label"),
        (["a", "A"], "listed twice"),
        (["label one"], "not a valid runner label"),
        ([f"l{i}" for i in range(9)], "runs-on lists 9 labels; the limit is 8"),
    ],
)
def test_refused_labels(labels: list[str], reason: str) -> None:
    result, refusals = normalize_labels(labels)
    assert result == [] and len(refusals) == 1 and reason in refusals[0][1]


def test_runs_on_in_a_workflow(plan_of: PlanOf, refuse: Refuse) -> None:
    plan = plan_of(workflow(job(runs_on="[self-hosted, gpu]")))
    assert plan["jobs"][0]["runs_on"] == ["self-hosted", "linux", "gpu"]
    eight = "[" + ", ".join(f"l{i}" for i in range(8)) + "]"
    assert len(plan_of(workflow(job(runs_on=eight)))["jobs"][0]["runs_on"]) == 10
    assert plan_of(workflow(job(runs_on="windows-latest")))["jobs"][0]["runs_on"] == [
        "windows-latest"
    ]
    group = refuse(workflow(job(runs_on="{group: g, labels: [a]}")))
    assert "runner groups (runs-on: {group, labels}) are not supported" in messages(group)
    assert "the github context is not available in runs-on" in messages(
        refuse(workflow(job(runs_on="${{ github.sha }}")))
    )


def test_permissions(plan_of: PlanOf, refuse: Refuse) -> None:
    head = "on: push\npermissions:\n  contents: none\n"
    plan = plan_of(
        workflow(job(job_id="a"), job("permissions:\n  contents: read", job_id="b"), head=head)
    )
    assert [j["permissions"] for j in plan["jobs"]] == [{"contents": "none"}, {"contents": "read"}]
    empty = plan_of(workflow(job("permissions: {}")))
    assert empty["jobs"][0]["permissions"] == {"contents": "none"}
    text = workflow(job("permissions: {}")).replace(
        "- run: echo hi", "- uses: forge-ci/checkout@v1"
    )
    assert "permissions contents: none, so it cannot check out the source" in messages(refuse(text))


def test_job_if_and_outputs(plan_of: PlanOf) -> None:
    text = workflow(
        job(job_id="a"),
        job(
            "needs: a\nif: needs.a.result == 'success'\noutputs:\n  out: ${{ steps.s.outputs.x }}",
            job_id="b",
        ).replace("- run: echo hi", "- run: echo hi\n        id: s"),
        job("needs: [a, b]\nif: always()", job_id="c"),
    )
    _, second, third = plan_of(text)["jobs"]
    assert second["if"] == "success() && (needs.a.result == 'success')"
    assert second["outputs"] == {"out": {"template": [{"expr": "steps.s.outputs.x"}]}}
    assert third["if"] == "always()"


def test_expanded_limits(refuse: Refuse, plan_of: PlanOf) -> None:
    matrix = "strategy:\n  matrix:\n    a: [" + ", ".join(str(i) for i in range(128)) + "]"
    plan = plan_of(workflow(job(matrix, job_id="x"), job(matrix, job_id="y")))
    assert len(plan["jobs"]) == 256
    diagnostics = refuse(
        workflow(job(matrix, job_id="x"), job(matrix, job_id="y"), job(job_id="z"))
    )
    assert "the jobs expand to 257 job instances; the limit is 256" in messages(diagnostics)
    many_steps = job(matrix, job_id="x").replace(
        "      - run: echo hi\n", "      - run: echo hi\n" * 33
    )
    diagnostics = refuse(workflow(many_steps))
    assert "the jobs expand to 4224 steps; the limit is 4096" in messages(diagnostics)


def test_unknown_top_level_keys(refuse: Refuse) -> None:
    text = workflow(job()).replace("on: push\n", "on: push\nnmae: x\nrun-name: [y]\n")
    assert messages(refuse(text)) == (
        "2:1: 'nmae' is not a workflow key; did you mean \"name\"?\n"
        "3:11: run-name must be a string, not a sequence"
    )
    assert "expressions are not allowed in the workflow name" in messages(
        refuse("name: ${{ github.sha }}\n" + workflow(job()))
    )


def test_concurrency(plan_of: PlanOf, refuse: Refuse) -> None:
    plan = plan_of("concurrency: ci-${{ github.head_ref }}\n" + workflow(job()))
    assert plan["concurrency"] == {
        "group": {"template": ["ci-", {"expr": "github.head_ref"}]},
        "cancel_in_progress": False,
    }
    plan = plan_of("concurrency:\n  group: deploy\n  cancel-in-progress: true\n" + workflow(job()))
    assert plan["concurrency"] == {"group": "deploy", "cancel_in_progress": True}
    plan = plan_of(
        "concurrency:\n  group: g\n  cancel-in-progress: ${{ github.ref != 'refs/heads/main' }}\n"
        + workflow(job())
    )
    assert plan["concurrency"]["cancel_in_progress"] == {"expr": "github.ref != 'refs/heads/main'"}
    for text, reason in [
        ("concurrency:\n  group: g\n  cancel-in-progress: ${{ runner.os }}\n", "runner context"),
        (
            "concurrency:\n  group: g\n  cancel-in-progress: x${{ true }}\n",
            "cancel-in-progress must be true, false or one ${{ }} expression",
        ),
        ("concurrency:\n  cancel-in-progress: true\n", "concurrency needs a group"),
        ("concurrency: ''\n", "concurrency.group must not be empty"),
        ("concurrency:\n  group: g\n  queue: max\n", "'queue' is not a concurrency key"),
        ("concurrency: ${{ github.refs }}\n", "github.refs is not available"),
        ("concurrency: ${{ runner.os }}\n", "the runner context is not available"),
        (
            "concurrency: ${{ matrix.x }}\n",
            "the matrix context is not available in concurrency.group",
        ),
    ]:
        assert reason in messages(refuse(text + workflow(job())))


def test_outputs_may_read_any_step_of_the_job(plan_of: PlanOf, refuse: Refuse) -> None:
    text = workflow(
        job("outputs:\n  last: ${{ steps.last.outputs.x }}").replace(
            "- run: echo hi", "- run: echo hi\n      - id: last\n        run: echo"
        )
    )
    assert plan_of(text)["jobs"][0]["outputs"] == {
        "last": {"template": [{"expr": "steps.last.outputs.x"}]}
    }
    diagnostics = refuse(workflow(job("outputs:\n  x: ${{ steps.nope.output.x }}")))
    assert "steps.nope.output does not exist; use outputs, outcome or conclusion" in messages(
        diagnostics
    )


def test_at_most_64_outputs_the_runner_protocol_can_carry(plan_of: PlanOf, refuse: Refuse) -> None:
    assert MAX_JOB_OUTPUTS == protocol.MAX_OUTPUTS  # the plan never promises what cannot be sent

    def with_outputs(count: int) -> str:
        lines = "".join(f"\n  o{i}: x" for i in range(count))
        return workflow(job(f"outputs:{lines}"))

    assert len(plan_of(with_outputs(64))["jobs"][0]["outputs"]) == 64
    assert "a job has at most 64 outputs" in messages(refuse(with_outputs(65)))


def test_job_names_may_use_what_is_known_when_the_run_is_queued(
    plan_of: PlanOf, refuse: Refuse
) -> None:
    plan = plan_of(workflow(job("name: Build ${{ github.ref_name }} ${{ inputs.level }}")))
    assert plan["jobs"][0]["name"] == {
        "template": ["Build ", {"expr": "github.ref_name"}, " ", {"expr": "inputs.level"}]
    }
    text = workflow(job("name: ${{ runner.os }}"))
    assert "the runner context is not available in a job name" in messages(refuse(text))
    text = workflow(job("name: ${{ needs.x.result }}"))
    assert "the needs context is not available in a job name" in messages(refuse(text))
