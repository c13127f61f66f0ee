"""Integer literals are bounded before they are converted (issue #12 item 3).

Python refuses to convert a decimal string of more than 4,300 digits; such a literal used to end
validation with a traceback (``timeout-minutes``, ``strategy.max-parallel``) or with Python's own
message (a matrix value).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from wf_support import messages

from forge_ci.workflow import Diagnostic

Refuse = Callable[[str | bytes], list[Diagnostic]]
HUGE = "1" * 4301
SHOWN = "'" + "1" * 37 + "...'"


def job(extra: str, step: str = "") -> str:
    return (
        f"on: push\njobs:\n  build:\n    runs-on: self-hosted\n{extra}"
        f"    steps:\n      - run: echo hi\n{step}"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            job(f"    timeout-minutes: {HUGE}\n"),
            f"5:22: timeout-minutes must be a whole number of minutes from 1 through 360, "
            f"not {SHOWN}",
        ),
        (
            job("", f"        timeout-minutes: +{HUGE}\n"),
            f"7:26: timeout-minutes must be a whole number of minutes from 1 through 360, "
            f"not '+{'1' * 36}...'",
        ),
        (
            job(f"    strategy:\n      max-parallel: {HUGE}\n      matrix:\n        a: [1]\n"),
            f"6:21: strategy.max-parallel is at most 9007199254740991, not {SHOWN}",
        ),
        (
            job(
                "    strategy:\n      max-parallel: 9007199254740992\n"
                "      matrix:\n        a: [1]\n"
            ),
            "6:21: strategy.max-parallel is at most 9007199254740991, not '9007199254740992'",
        ),
        (
            job(f"    strategy:\n      matrix:\n        a: [-{HUGE}]\n"),
            f"7:13: invalid matrix value: the number -{'1' * 36}... is too large "
            "(at most 9007199254740991)",
        ),
        (
            job(f"    strategy:\n      matrix:\n        a: [{HUGE}.5]\n"),
            f"7:13: invalid matrix value: {'1' * 37}... is not a finite number",
        ),
    ],
)
def test_huge_integer_literals_are_located_errors(refuse: Refuse, text: str, expected: str) -> None:
    assert messages(refuse(text)) == expected


def test_long_literals_that_are_small_numbers_are_still_read(
    plan_of: Callable[[str], dict[str, object]],
) -> None:
    # Leading zeros do not count against the bound: 0...010 is ten.
    plan = plan_of(job(f"    timeout-minutes: {'0' * 5000}10\n"))
    assert plan["jobs"][0]["timeout_minutes"] == 10  # type: ignore[index]
