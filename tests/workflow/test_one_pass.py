"""Every independent problem of a file in one pass (issue #12 item 9).

Before, a problem in one part of a job hid the checks that ran after it: the runner labels (and
so the Windows labels) of a job with any other error, the plan's checks of any file with an
error, the graph through a job with an error, the contents of a job with a refused id.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable

import pytest
from wf_support import messages

from forge_ci.workflow import Diagnostic, WorkflowInvalid, parse_workflow

Refuse = Callable[[str | bytes], list[Diagnostic]]


def test_a_newcomers_file_is_fixed_in_one_round(refuse: Refuse) -> None:
    # The shape of the real file: actions, a bad runner label, and a matrix key used wrongly.
    text = """\
        on: push
        jobs:
          test:
            strategy:
              matrix:
                os: [ubuntu-latest, 'windows latest']
                node: [18, 20]
            runs-on: ${{ matrix.os }}
            steps:
              - uses: actions/setup-node
              - run: npm test
                name: Test on ${{ matrix.nodes }}
        """
    found = messages(refuse(text))
    assert "8:14: 'windows latest' is not a valid runner label" in found
    assert "10:15: uses: actions/setup-node needs a version" in found
    # A key the matrix does not have reads null, as on GitHub: a notice, not one more round.
    assert "matrix" not in found.replace("${{ matrix.os }}", "")


def test_plan_checks_run_beside_other_problems(refuse: Refuse) -> None:
    text = """\
        on: push
        jobs:
          build:
            strategy:
              matrix:
                x: [{a: 1}]
            runs-on: self-hosted
            env:
              BASH_ENV: x
            steps:
              - name: ${{ matrix.x }}
                run: echo hi
        """
    found = messages(refuse(text))
    assert "9:7: BASH_ENV would let the shell or the loader run other code" in found
    assert "11:15: ${{ matrix.x }} is a mapping, where text is expected" in found


def test_a_cycle_through_a_job_with_problems_is_reported(refuse: Refuse) -> None:
    text = """\
        on: push
        jobs:
          a:
            needs: b
            runs-on: self-hosted
            timeout-minutes: 0
            steps:
              - run: echo a
          b:
            needs: a
            runs-on: self-hosted
            steps:
              - run: echo b
        """
    found = messages(refuse(text))
    assert "timeout-minutes must be a whole number of minutes" in found
    assert "jobs depend on each other in a cycle" in found


def test_a_job_with_a_refused_id_is_still_checked(refuse: Refuse) -> None:
    text = """\
        on: push
        jobs:
          build:
            runs-on: self-hosted
            steps:
              - run: echo a
          Build:
            runs-on: 'windows latest'
            steps:
              - run: echo b
        """
    found = messages(refuse(text))
    assert "7:3: the job id 'Build' is already used (line 3)" in found
    assert "8:14: 'windows latest' is not a valid runner label" in found


def test_a_strategy_option_error_leaves_the_matrix_checked(refuse: Refuse) -> None:
    text = """\
        on: push
        jobs:
          build:
            strategy:
              fail-fast: off
              matrix:
                os: ['windows latest']
            runs-on: ${{ matrix.os }}
            steps:
              - run: echo ${{ matrix.OSes }}
        """
    found = messages(refuse(text))
    assert "5:18: strategy.fail-fast must be true or false, not 'off'" in found
    assert "8:14: 'windows latest' is not a valid runner label" in found
    # The matrix keys are still known: the typo gets its notice (it reads null, as on GitHub).
    with pytest.raises(WorkflowInvalid) as caught:
        parse_workflow(textwrap.dedent(text), "test.yml")
    assert "the matrix has no key 'OSes'" in messages(list(caught.value.notices))


def test_the_rest_of_a_step_without_run_or_uses_is_checked(refuse: Refuse) -> None:
    text = """\
        on: push
        jobs:
          build:
            runs-on: self-hosted
            steps:
              - name: test
                runs: make test
        """
    assert messages(refuse(text)) == (
        "6:9: a step needs run (a script) or uses: forge-ci/checkout@v1\n"
        "7:9: 'runs' is not a step key; did you mean \"run\"?"
    )


def test_a_refused_actions_env_and_if_are_checked(refuse: Refuse) -> None:
    text = """\
        on: push
        jobs:
          build:
            runs-on: self-hosted
            steps:
              - uses: docker://node:20
                if: github.event.pull_request.draft == runner.nope
                env:
                  FORGE_CI_X: x
        """
    found = messages(refuse(text))
    assert "6:15: uses: docker://node:20: Docker container actions are not supported" in found
    assert "runner.nope does not exist" in found
    assert "9:11: env names starting with FORGE_CI_ are reserved for the executor" in found
