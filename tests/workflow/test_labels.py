"""Runner labels (issue #12 items 6, 8, 9): what providers can carry, where errors point."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from wf_support import messages

from forge_ci.coordinator.providers import normalize_labels as provider_labels
from forge_ci.workflow import Diagnostic

Refuse = Callable[[str | bytes], list[Diagnostic]]
PlanOf = Callable[[str], dict[str, Any]]


def runs_on(value: str, extra: str = "", steps: str = "      - run: echo hi\n") -> str:
    return f"on: push\njobs:\n  build:\n{extra}    runs-on: {value}\n    steps:\n{steps}"


@pytest.mark.parametrize(
    "value",
    [
        "ubuntu-24.04",
        "ubuntu-latest",
        "[self-hosted, gpu.a100]",
        "[self-hosted, " + "a" * 64 + "]",
        "[self-hosted, x_y, x-y, x.y]",
    ],
)
def test_every_label_a_job_asks_for_is_one_a_provider_can_have(plan_of: PlanOf, value: str) -> None:
    # A job whose labels no provider can register waits in the queue forever (item 8).
    labels = plan_of(runs_on(value))["jobs"][0]["runs_on"]
    assert set(provider_labels(labels)) == set(labels)


def test_a_label_longer_than_a_provider_can_carry_is_refused(refuse: Refuse) -> None:
    long = "a" * 65
    assert messages(refuse(runs_on(f"[self-hosted, {long}]"))) == (
        f"4:28: '{long}' is not a valid runner label (letters, digits, '.', '_' and '-', "
        "at most 64 characters)"
    )


def test_label_errors_are_located_at_each_bad_label_of_a_block_list(refuse: Refuse) -> None:
    text = (
        "on: push\njobs:\n  build:\n    runs-on:\n      - self-hosted\n      - 'a b'\n"
        "      - 'bad label'\n      - Self-Hosted\n    steps:\n      - run: echo hi\n"
    )
    assert messages(refuse(text)) == "\n".join(
        [
            "6:9: 'a b' is not a valid runner label (letters, digits, '.', '_' and '-', "
            "at most 64 characters)",
            "7:9: 'bad label' is not a valid runner label (letters, digits, '.', '_' and '-', "
            "at most 64 characters)",
            "8:9: the runner label 'Self-Hosted' is listed twice",
        ]
    )


def test_label_errors_in_a_flow_list_point_at_the_label(refuse: Refuse) -> None:
    assert messages(refuse(runs_on("[self-hosted, Self-Hosted, ubuntu-24.04-arm]"))) == (
        "4:28: the runner label 'Self-Hosted' is listed twice\n"
        "4:41: 'ubuntu-24.04-arm' is not a supported image label; use ubuntu-latest or "
        "ubuntu-YY.MM (x64 images)"
    )
    assert messages(refuse(runs_on("[ubuntu-24.04-arm, x]"))) == (
        "4:15: 'ubuntu-24.04-arm' is not a supported image label; use ubuntu-latest or "
        "ubuntu-YY.MM (x64 images)"
    )


def test_label_errors_are_reported_beside_other_errors_of_the_job(refuse: Refuse) -> None:
    text = runs_on("'bad label'", steps="      - uses: docker://node:20\n")
    found = messages(refuse(text))
    assert "4:14: 'bad label' is not a valid runner label" in found
    assert "6:15: uses: docker://node:20: Docker container actions are not supported" in found


def test_matrix_labels_are_located_at_the_expression_and_all_reported(refuse: Refuse) -> None:
    extra = "    strategy:\n      matrix:\n        os: ['a b', 'c d', ubuntu-latest]\n"
    found = messages(refuse(runs_on("${{ matrix.os }}", extra)))
    assert found == "\n".join(
        [
            f"7:14: '{label}' is not a valid runner label (letters, digits, '.', '_' and '-', "
            "at most 64 characters)"
            for label in ("a b", "c d")
        ]
    )


@pytest.mark.parametrize(
    ("matrix", "value", "what"),
    [
        ("[{name: a}]", "${{ matrix.x }}", "mapping"),
        ("[[a, b]]", "[self-hosted, '${{ matrix.x }}']", "sequence"),
        ("[{name: a}]", "'gpu-${{ matrix.x }}'", "mapping"),
        ("[[[a]]]", "${{ matrix.x }}", "sequence"),
    ],
)
def test_runs_on_from_a_mapping_or_list_value_is_refused(
    refuse: Refuse, matrix: str, value: str, what: str
) -> None:
    # Item 6: the label used to be the text of the value, 'object' or 'array'.
    extra = f"    strategy:\n      matrix:\n        x: {matrix}\n"
    found = messages(refuse(runs_on(value, extra)))
    assert f"runs-on: ${{{{ matrix.x }}}} gives a {what}; a runner label is text" in found
    assert found.startswith("7:")


def test_runs_on_from_a_list_value_gives_its_labels(plan_of: PlanOf) -> None:
    extra = "    strategy:\n      matrix:\n        x: [[self-hosted, gpu]]\n"
    plan = plan_of(runs_on("${{ matrix.x }}", extra))
    assert plan["jobs"][0]["runs_on"] == ["self-hosted", "linux", "gpu"]
