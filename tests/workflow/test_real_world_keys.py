"""Keys real files use that forge-ci now accepts (issue #16 item 3), each accepted and refused.

What is accepted but not done carries a notice; what GitHub simply allows (a strategy without a
matrix, a null step name) is accepted as GitHub reads it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from wf_support import messages

from forge_ci.workflow import Diagnostic, Workflow, build_plan

Accept = Callable[[str], Workflow]
Refuse = Callable[[str | bytes], list[Diagnostic]]


def _file(job: str, head: str = "on: push\n") -> str:
    return head + "jobs:\n  build:\n    runs-on: ubuntu-latest\n" + job


def _plan(accept: Accept, text: str) -> dict[str, Any]:
    return build_plan(accept(text))


def test_a_strategy_without_a_matrix(accept: Accept, refuse: Refuse) -> None:
    plan = _plan(
        accept,
        _file(
            "    strategy:\n      fail-fast: false\n      max-parallel: 2\n    steps:\n"
            "      - run: echo ${{ strategy.max-parallel }}\n"
        ),  # fmt: skip
    )
    (only,) = plan["jobs"]
    assert only["key"] == "build" and only["matrix"] is None
    assert only["strategy"] == {
        "fail-fast": False,
        "max-parallel": 2,
        "job-index": 0,
        "job-total": 1,
    }
    assert only["steps"][0]["run"] == "echo 2"
    found = messages(
        refuse(_file("    strategy:\n      fail-fast: 1\n    steps:\n      - run: x\n"))
    )
    assert "strategy.fail-fast must be true or false" in found
    no_matrix = _file(
        "    strategy:\n      fail-fast: true\n    steps:\n      - run: ${{ matrix.x }}\n"
    )
    # As on GitHub, matrix.x of a job without a matrix is null: accepted, with a notice.
    assert "the job has no strategy.matrix" in accept(no_matrix).notices[0].message


def test_null_step_name_and_working_directory_mean_none(accept: Accept, refuse: Refuse) -> None:
    plan = _plan(accept, _file("    steps:\n      - name:\n        working-directory: ~\n"
                               "        run: make\n"))  # fmt: skip
    step = plan["jobs"][0]["steps"][0]
    assert step["name"] == "Run make" and step["working_directory"] is None
    assert "a step name must be a string, not a sequence" in messages(
        refuse(_file("    steps:\n      - name: [a]\n        run: make\n"))
    )


def test_job_environment_is_kept_with_a_notice(accept: Accept, refuse: Refuse) -> None:
    text = _file(
        "    strategy:\n      matrix:\n        stage: [dev, prod]\n"
        "    environment:\n      name: ${{ matrix.stage }}\n"
        "      url: https://${{ matrix.stage }}.example/${{ steps.d.outputs.path }}\n"
        "    steps:\n      - id: d\n        run: echo path=x >> $GITHUB_OUTPUT\n"
    )
    workflow = accept(text)
    jobs = build_plan(workflow)["jobs"]
    assert [job["environment"]["name"] for job in jobs] == ["dev", "prod"]
    assert jobs[0]["environment"]["url"] == {
        "template": ["https://dev.example/", {"expr": "steps.d.outputs.path"}]
    }
    assert [n.message for n in workflow.notices] == [
        "environment '${{ matrix.stage }}' is kept and shown; its protection rules are not "
        "enforced on forge-ci"
    ]
    plain = accept(_file("    environment: production\n    steps:\n      - run: x\n"))
    assert build_plan(plain)["jobs"][0]["environment"] == {"name": "production", "url": None}
    empty = accept(_file("    environment: ''\n    steps:\n      - run: x\n"))
    assert "environment" not in build_plan(empty)["jobs"][0] and not empty.notices
    refused = _file("    environment:\n      name: ${{ secrets.X }}\n    steps:\n      - run: x\n")
    assert "secrets" in messages(refuse(refused))


def test_permissions_give_one_notice_per_run(accept: Accept, refuse: Refuse) -> None:
    job = (
        "    permissions:\n      id-token: write\n      contents: write\n"
        "    steps:\n      - run: x\n"
    )
    text = "on: push\njobs:\n" + "".join(
        f"  {name}:\n    runs-on: ubuntu-latest\n" + job for name in ("a", "b")
    )
    workflow = accept(text)
    assert [(n.line, n.message) for n in workflow.notices] == [
        (6, "this job asked for id-token: write; forge-ci grants no such token"),
        (7, "this job asked for contents: write; forge-ci grants no such token"),
    ]
    plan = build_plan(workflow)
    assert [j["permissions"] for j in plan["jobs"]] == [{"contents": "read"}] * 2
    none = accept(_file("    permissions:\n      packages: none\n    steps:\n      - run: x\n"))
    assert none.notices == ()  # asks for nothing
    assert "'idtoken' is not a permission scope" in messages(
        refuse(_file("    permissions:\n      idtoken: write\n    steps:\n      - run: x\n"))
    )


def test_windows_and_macos_legs_are_planned_with_their_labels(accept: Accept) -> None:
    text = (
        "on: push\njobs:\n  t:\n    strategy:\n      matrix:\n"
        "        os: [ubuntu-latest, windows-latest, macos-latest]\n"
        "    runs-on: ${{ matrix.os }}\n    steps:\n      - run: x\n"
    )
    workflow = accept(text)
    assert [j["runs_on"] for j in build_plan(workflow)["jobs"]] == [
        ["self-hosted", "linux", "x64", "ubuntu-latest"],
        ["windows-latest"],
        ["macos-latest"],
    ]
    assert len(workflow.notices) == 2


def test_github_env_names_and_run_name(accept: Accept, refuse: Refuse) -> None:
    text = "run-name: Deploy ${{ github.sha }}\n" + _file(
        "    env:\n      GITHUB_TOKEN: x\n      GITHUB_CONTEXT: y\n    steps:\n      - run: x\n"
    )
    workflow = accept(text)
    assert set(build_plan(workflow)["jobs"][0]["steps"][0]["env"]) == {
        "GITHUB_TOKEN",
        "GITHUB_CONTEXT",
    }
    assert [n.message for n in workflow.notices] == [
        "run-name is not used; runs are named after the workflow"
    ]
    refused = _file("    env:\n      RUNNER_X: x\n    steps:\n      - run: x\n")
    assert "env names starting with RUNNER_ are reserved for the executor" in messages(
        refuse(refused)
    )
