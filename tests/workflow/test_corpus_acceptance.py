"""Issue #16's acceptance measure over the real-world corpus, and the classification behind it.

``bench/corpus_acceptance.py`` prints the figures and the reasons; this test keeps the figures
from sliding back below what was measured when they were recorded in bench/README.md (floors, not
the goal: the goal needs issue #15 and the rest of #16), and checks the classification itself on
small files, accepted and refused.
"""

from __future__ import annotations

from pathlib import Path

from forge_ci_testing.acceptance import GOAL, judge, measure, reason

BASE = "on: push\njobs:\n  a:\n    runs-on: {runs_on}\n    steps:\n      - {step}\n"


def _file(runs_on: str = "ubuntu-latest", step: str = "run: echo hi") -> bytes:
    return BASE.format(runs_on=runs_on, step=step).encode()


def test_an_accepted_linux_file() -> None:
    result = judge(_file(), "a.yml")
    assert result.accepted and not result.all_foreign and result.reasons == ()


def test_a_file_with_actions_is_accepted_since_issue_15() -> None:
    result = judge(_file(step="uses: actions/setup-node@v4"), "a.yml")
    assert result.accepted and not result.only_uses
    checkout = judge(_file(step="uses: actions/checkout@v4\n        with: {fetch-depth: 0}"), "b")
    assert checkout.accepted
    refused = judge(_file(step="uses: docker://node:20"), "c.yml")
    assert not refused.accepted and not refused.only_uses


def test_a_file_refused_for_more_than_uses_does_not() -> None:
    text = (
        _file(step="uses: actions/setup-node@v4")
        .decode()
        .replace(
            "jobs:",
            "jobs:\n  b:\n    runs-on: x\n    container: node\n    steps:\n      - run: x\n",
        )
    )
    result = judge(text.encode(), "a.yml")
    assert not result.accepted and not result.only_uses
    assert "job containers are not supported; every job runs in the provider's container" in (
        result.reasons
    )


def test_windows_and_macos_only_files_are_left_out_accepted_or_refused() -> None:
    assert judge(_file(runs_on="windows-latest"), "w.yml").all_foreign
    matrix = "${{ matrix.os }}\n    strategy:\n      matrix:\n        os: [macos-14, windows-2022]"
    assert judge(_file(runs_on=matrix), "m.yml").all_foreign
    refused = _file(runs_on=matrix, step="uses: actions/setup-node@v4")
    assert judge(refused, "r.yml").all_foreign
    mixed = matrix.replace("macos-14", "ubuntu-latest")
    assert not judge(_file(runs_on=mixed), "x.yml").all_foreign
    assert not judge(_file(runs_on=mixed, step="uses: a/b@v1"), "y.yml").all_foreign


def test_reasons_drop_the_values() -> None:
    assert reason("'windows latest' is not a valid runner label") == "X is not a valid runner label"


def test_the_corpus_figures_stay_at_least_where_they_were_recorded(corpus_dir: Path) -> None:
    tally = measure(corpus_dir)["all"]
    assert tally.files == 1678 and tally.foreign == 81
    # 86.3 % (goal 85 %) once env names, unknown step ids and matrix keys, empty path parts,
    # job defaults with contexts, the whole github context and GITHUB_* overrides were
    # accepted as GitHub accepts them (#16); 82.3 % before.
    assert tally.share(tally.accepted) >= GOAL
    assert tally.share(tally.accepted_with_uses) >= GOAL
    assert tally.share(tally.accepted_projected) >= GOAL
