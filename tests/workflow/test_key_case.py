"""Keys that differ only by case are refused where GitHub refuses them (issue #12 item 4).

GitHub compares the keys of env, matrices, outputs (and inputs) without regard to case and
refuses a second spelling ("'a' is already defined"). forge-ci accepted ``env: {A: 1, a: 2}``
and matrix keys ``version_name`` / ``VERSION_NAME``, and then resolved ``matrix.Version_Name``
to one or the other depending on where it was used. (forge-ci supports no ``inputs``:
``workflow_dispatch`` inputs and checkout ``with`` are refused whole.)
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from wf_support import messages

from forge_ci.workflow import Diagnostic

Refuse = Callable[[str | bytes], list[Diagnostic]]
JOB = "on: push\n{head}jobs:\n  build:\n    runs-on: self-hosted\n{extra}    steps:\n{steps}"
STEP = "      - run: echo hi\n"


def wf(extra: str = "", head: str = "", steps: str = STEP) -> str:
    return JOB.format(head=head, extra=extra, steps=steps)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            wf("    env: {A: 1, a: 2}\n"),
            "5:17: 'a' is already defined as 'A' (line 5); env names are compared without "
            "regard to case",
        ),
        (
            wf(head="env:\n  Path: x\n  PATH: y\n"),
            "4:3: 'PATH' is already defined as 'Path' (line 3); env names are compared without "
            "regard to case",
        ),
        (
            wf(steps="      - run: echo hi\n        env:\n          Tag: a\n          TAG: b\n"),
            "9:11: 'TAG' is already defined as 'Tag' (line 8); env names are compared without "
            "regard to case",
        ),
        (
            wf(
                "    strategy:\n      matrix:\n"
                "        version_name: [1]\n        VERSION_NAME: [2]\n"
            ),
            "8:9: 'VERSION_NAME' is already defined as 'version_name' (line 7); matrix keys are "
            "compared without regard to case",
        ),
        (
            wf(
                "    strategy:\n      matrix:\n"
                "        os: [a]\n        include:\n          - OS: b\n"
            ),
            "9:13: include key 'OS' is already defined as 'os'; matrix keys are compared "
            "without regard to case",
        ),
        (
            wf("    strategy:\n      matrix:\n        include:\n          - {x: 1, X: 2}\n"),
            "8:20: 'X' is already defined as 'x' (line 8); matrix keys are compared without "
            "regard to case",
        ),
        (
            wf("    strategy:\n      matrix:\n        x: [{a: 1, A: 2}]\n"),
            "7:20: 'A' is already defined as 'a' (line 7); keys of a matrix value are compared "
            "without regard to case",
        ),
        (
            wf("    outputs: {x: a, X: b}\n"),
            "5:21: 'X' is already defined as 'x' (line 5); output names are compared without "
            "regard to case",
        ),
    ],
)
def test_a_second_spelling_of_a_key_is_refused(refuse: Refuse, text: str, expected: str) -> None:
    assert messages(refuse(text)) == expected


def test_one_spelling_used_in_any_case_is_still_accepted(
    accept: Callable[[str], object],
) -> None:
    accept(
        wf(
            "    strategy:\n      matrix:\n        Version_Name: [1]\n"
            "    env:\n      V: ${{ matrix.version_name }}\n"
        )
    )
