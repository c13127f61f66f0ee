"""Static matrices: expansion (GitHub's documented examples), instances, keys and refusals."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from wf_support import Accept, messages

from forge_ci.workflow import Diagnostic

Refuse = Callable[[str | bytes], list[Diagnostic]]
PlanOf = Callable[[str], dict[str, Any]]


def workflow(strategy: str, runs_on: str = "self-hosted", name: str = "", steps: str = "") -> str:
    text = "on: push\njobs:\n  build:\n"
    if name:
        text += f"    name: {name}\n"
    text += f"    runs-on: {runs_on}\n    strategy:\n"
    text += "".join("      " + line + "\n" for line in strategy.strip("\n").splitlines())
    return text + "    steps:\n" + (steps or "      - run: echo hi\n")


def matrices(plan: dict[str, Any]) -> list[Any]:
    return [job["matrix"] for job in plan["jobs"]]


def test_cartesian_product_in_written_order(plan_of: PlanOf) -> None:
    plan = plan_of(workflow("matrix:\n  os: [a, b]\n  v: [1, 2]"))
    assert matrices(plan) == [
        {"os": "a", "v": 1},
        {"os": "a", "v": 2},
        {"os": "b", "v": 1},
        {"os": "b", "v": 2},
    ]
    assert [j["key"] for j in plan["jobs"]] == [
        "build (a, 1)",
        "build (a, 2)",
        "build (b, 1)",
        "build (b, 2)",
    ]
    assert [j["strategy"]["job-index"] for j in plan["jobs"]] == [0, 1, 2, 3]
    assert {j["strategy"]["job-total"] for j in plan["jobs"]} == {4}


def test_github_include_example(plan_of: PlanOf) -> None:
    # The example of GitHub's "Expanding or adding matrix configurations" documentation.
    plan = plan_of(
        workflow(
            """
matrix:
  fruit: [apple, pear]
  animal: [cat, dog]
  include:
    - color: green
    - color: pink
      animal: cat
    - fruit: apple
      shape: circle
    - fruit: banana
    - fruit: banana
      animal: cat
"""
        )
    )
    assert matrices(plan) == [
        {"fruit": "apple", "animal": "cat", "color": "pink", "shape": "circle"},
        {"fruit": "apple", "animal": "dog", "color": "green", "shape": "circle"},
        {"fruit": "pear", "animal": "cat", "color": "pink"},
        {"fruit": "pear", "animal": "dog", "color": "green"},
        {"fruit": "banana"},
        {"fruit": "banana", "animal": "cat"},
    ]


def test_exclude_removes_partial_matches(plan_of: PlanOf) -> None:
    plan = plan_of(
        workflow(
            "matrix:\n  os: [macos, windows]\n  version: [12, 14, 16]\n"
            "  environment: [staging, production]\n  exclude:\n    - os: macos\n      version: 12\n"
            "      environment: production\n    - os: windows\n      version: 16\n"
        )
    )
    assert len(plan["jobs"]) == 12 - 1 - 2
    assert {"os": "macos", "version": 12, "environment": "production"} not in matrices(plan)
    assert not [m for m in matrices(plan) if m["os"] == "windows" and m["version"] == 16]


def test_include_only_matrix(plan_of: PlanOf) -> None:
    plan = plan_of(workflow("matrix:\n  include:\n    - a: 1\n    - a: 2\n      b: x"))
    assert matrices(plan) == [{"a": 1}, {"a": 2, "b": "x"}]


def test_values_are_typed_like_github(plan_of: PlanOf) -> None:
    plan = plan_of(workflow("matrix:\n  v: [3.10, '3.10', true, null, on, 0x10, {a: [1]}]"))
    assert [m["v"] for m in matrices(plan)] == [3.1, "3.10", True, None, "on", 16, {"a": [1]}]
    assert [j["key"] for j in plan["jobs"]] == [
        "build (3.1)",
        "build (3.10)",
        "build (true)",
        "build ()",
        "build (on)",
        "build (16)",
        'build ({"a":[1]})',
    ]


def test_colliding_keys_are_made_unique(plan_of: PlanOf) -> None:
    plan = plan_of(workflow("matrix:\n  v: ['1', 1]"))
    assert [j["key"] for j in plan["jobs"]] == ["build (1)", "build (1) #2"]


def test_matrix_in_names_labels_and_steps(plan_of: PlanOf) -> None:
    plan = plan_of(
        workflow(
            "matrix:\n  gpu: [a100, h100]\nfail-fast: false\nmax-parallel: 1",
            runs_on="[self-hosted, '${{ matrix.gpu }}']",
            name="Test on ${{ matrix.gpu }}",
            steps="      - run: echo ${{ matrix.gpu }} ${{ strategy.job-index }}\n"
            "        name: ${{ format('{0}-{1}', matrix.gpu, strategy.job-total) }}\n",
        )
    )
    first, second = plan["jobs"]
    assert (first["key"], first["name"]) == ("build (a100)", "Test on a100")
    assert second["runs_on"] == ["self-hosted", "linux", "h100"]
    assert first["strategy"] == {
        "fail-fast": False,
        "job-index": 0,
        "job-total": 2,
        "max-parallel": 1,
    }
    assert second["steps"][0]["run"] == "echo h100 1"
    assert second["steps"][0]["name"] == "h100-2"


def test_runs_on_from_a_matrix_value_that_is_a_list(plan_of: PlanOf, refuse: Refuse) -> None:
    plan = plan_of(
        workflow("matrix:\n  labels: [[self-hosted, gpu]]", runs_on="${{ matrix.labels }}")
    )
    assert plan["jobs"][0]["runs_on"] == ["self-hosted", "linux", "gpu"]
    diagnostics = refuse(
        workflow("matrix:\n  os: [ubuntu-latest, 'a b']", runs_on="${{ matrix.os }}")
    )
    assert diagnostics == [
        Diagnostic(
            4,
            14,
            "'a b' is not a valid runner label (letters, digits, '.', '_' and '-', at most 64 "
            "characters)",
        )
    ]


def test_inserted_matrix_values_stay_text_beside_runtime_expressions(plan_of: PlanOf) -> None:
    plan = plan_of(
        workflow(
            'matrix:\n  v: ["$(reboot) \'}}"]',
            steps="      - id: a\n        run: echo\n"
            "      - run: echo ${{ matrix.v }} ${{ steps.a.outputs.x }}\n",
        )
    )
    step = plan["jobs"][0]["steps"][1]
    # The matrix value is text of the script; the step output reaches it as a variable.
    assert step["run"] == "echo $(reboot) '}} ${_FORGE_CI_EXPR_1}"
    assert step["env"]["_FORGE_CI_EXPR_1"] == {"template": [{"expr": "steps.a.outputs.x"}]}


@pytest.mark.parametrize(
    ("strategy", "reason"),
    [
        (
            "matrix: ${{ fromJSON(needs.a.outputs.m) }}",
            "a matrix computed by an expression is not supported",
        ),
        ("matrix:\n  os: ${{ fromJSON('[1]') }}", "computed by an expression is not supported"),
        ("matrix:\n  os: []", "matrix vector 'os' does not contain any values"),
        ("matrix:\n  os: linux", "matrix vector 'os' must be a list"),
        ("matrix: {}", "the matrix has no vectors and no include entries"),
        (
            "matrix:\n  os: [a]\n  exclude:\n    - oss: a",
            "exclude key 'oss' is not a matrix vector; did you mean \"os\"?",
        ),
        ("matrix:\n  os: [a]\n  exclude:\n    - os: a", "exclude removes every combination"),
        (
            "matrix:\n  os: [a]\n  include: [x]",
            "each matrix include entry must be a non-empty mapping",
        ),
        ("matrix:\n  v: [.inf]", "invalid matrix value: .inf is not a finite number"),
        ("matrix:\n  v: [99999999999999999999]", "is too large"),
        ("matrix:\n  v: ['${{ github.sha }}']", "expressions are not allowed in matrix values"),
        ("fail-fast: yes\nmatrix:\n  v: [1]", "strategy.fail-fast must be true or false"),
        ("max-parallel: 0\nmatrix:\n  v: [1]", "strategy.max-parallel must be at least 1"),
        ("max-parallel: x\nmatrix:\n  v: [1]", "strategy.max-parallel must be a whole number"),
        ("fail-fast: maybe", "strategy.fail-fast must be true or false"),
        ("max-parallel: -1", "strategy.max-parallel must be a whole number"),
        ("matrix:\n  v: [1]\nmatix: {}", 'did you mean "matrix"?'),
    ],
)
def test_refused_strategies(refuse: Refuse, strategy: str, reason: str) -> None:
    assert reason in messages(refuse(workflow(strategy)))


def test_at_most_256_combinations(plan_of: PlanOf, refuse: Refuse) -> None:
    sixteen = "[" + ", ".join(str(i) for i in range(16)) + "]"
    assert len(plan_of(workflow(f"matrix:\n  a: {sixteen}\n  b: {sixteen}"))["jobs"]) == 256
    diagnostics = refuse(
        workflow(f"matrix:\n  a: {sixteen}\n  b: {sixteen}\n  include:\n    - c: 1\n      a: x")
    )
    assert "the matrix expands to 257 jobs; the limit is 256" in messages(diagnostics)
    huge = "[" + ", ".join(str(i) for i in range(100)) + "]"
    diagnostics = refuse(workflow(f"matrix:\n  a: {huge}\n  b: {huge}\n  c: {huge}"))
    assert "the matrix expands to more than 256 jobs" in messages(diagnostics)


def test_matrix_references_are_checked(accept: Accept) -> None:
    # A key the matrix lacks (or a job without a matrix) reads null, as on GitHub: a notice.
    typo = accept(
        workflow("matrix:\n  python: [1]", steps="      - run: echo ${{ matrix.pyhton }}\n")
    )
    assert "the matrix has no key 'pyhton'; did you mean \"python\"?" in typo.notices[0].message
    without = (
        "on: push\njobs:\n  a:\n    runs-on: self-hosted\n    steps:\n"
        "      - run: ${{ matrix.x }}\n"
    )
    assert "the job has no strategy.matrix" in accept(without).notices[0].message
