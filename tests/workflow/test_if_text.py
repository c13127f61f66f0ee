"""An ``if`` with text around its ``${{ }}`` is refused (issue #12 item 5).

GitHub turns ``${{ x }}`` plus any other text into a string, which is never empty, so such a
step or job always runs. forge-ci planned ``if: |`` + ``${{ false }}`` (with its final line
break), ``" ${{ false }}"`` and ``"${{ false }} "`` as ``success() && (false)``: a third meaning.
It now refuses them, located, with the fix.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from wf_support import messages

from forge_ci.workflow import Diagnostic

Refuse = Callable[[str | bytes], list[Diagnostic]]
LINE_BREAK = (
    "has a line break around its ${{ }}, so GitHub reads it as text, which is always true; "
    "write only the expression (use |- or >- to drop the final line break)"
)
SPACES = (
    "has spaces around its ${{ }}, so GitHub reads it as text, which is always true; write only "
    "the expression (remove them)"
)


def step_if(value: str) -> str:
    return (
        "on: push\njobs:\n  build:\n    runs-on: self-hosted\n    steps:\n"
        f"      - run: echo hi\n        if: {value}\n"
    )


def job_if(value: str) -> str:
    return (
        f"on: push\njobs:\n  build:\n    runs-on: self-hosted\n    if: {value}\n"
        "    steps:\n      - run: echo hi\n"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (step_if("|\n          ${{ false }}"), f"7:13: a step's if {LINE_BREAK}"),
        (step_if(">\n          ${{ false }}"), f"7:13: a step's if {LINE_BREAK}"),
        (step_if('" ${{ false }}"'), f"7:13: a step's if {SPACES}"),
        (job_if('"${{ false }} "'), f"5:9: a job's if {SPACES}"),
        (job_if("|\n      ${{ false }}"), f"5:9: a job's if {LINE_BREAK}"),
    ],
)
def test_text_around_the_expression_is_refused(refuse: Refuse, text: str, expected: str) -> None:
    assert messages(refuse(text)) == expected


@pytest.mark.parametrize(
    "value",
    ["${{ false }}", '"${{ false }}"', "|-\n          ${{ false }}", ">-\n          ${{ false }}"],
)
def test_the_expression_alone_keeps_its_meaning(
    plan_of: Callable[[str], dict[str, Any]], value: str
) -> None:
    plan = plan_of(step_if(value))
    assert plan["jobs"][0]["steps"][0]["if"] == "success() && (false)"
