"""The checkout step's git checkout in the real runner, against the real runner API."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.worker.runner.conftest import Forge, workflow
from worker.runner.checkout import CheckoutError
from worker.runner.gitcheckout import target_directory


def test_clean_false_keeps_untracked_files_of_an_earlier_repository(forge: Forge) -> None:
    # with.path evaluated by the runner: the job's env, under an absolute workspace path.
    steps = """\
      - run: git init -q src && echo mine > src/untracked.txt
      - uses: actions/checkout@v4
        with:
          path: ${{ github.workspace }}/${{ env.SRC }}
          clean: false
      - run: cat src/untracked.txt src/README.md && git -C src status --porcelain
"""
    job_env = "    env:\n      SRC: s${{ github.run_attempt == '1' && 'rc' || 'x' }}\n"
    claimed, finished = forge.run_job(workflow(steps, extra=job_env), {"README.md": "read me\n"})
    assert finished.report["result"] == "success", forge.log(claimed.attempt_id)
    assert forge.log(claimed.attempt_id, "step_3", "stdout") == "mine\nread me\n?? untracked.txt\n"


def test_clean_true_empties_the_workspace_but_keeps_home_and_tmp(forge: Forge) -> None:
    steps = """\
      - run: echo stale > stale.txt && echo kept > "$HOME/kept"
      - uses: actions/checkout@v4
      - run: |
          test ! -e stale.txt && cat "$HOME/kept" README.md
          git rev-parse --is-inside-work-tree
"""
    claimed, finished = forge.run_job(workflow(steps), {"README.md": "read me\n"})
    assert finished.report["result"] == "success", forge.log(claimed.attempt_id)
    assert forge.log(claimed.attempt_id, "step_3", "stdout") == "kept\nread me\ntrue\n"


def test_a_checkout_path_evaluated_outside_the_workspace_fails_the_step(forge: Forge) -> None:
    steps = """\
      - id: where
        run: echo dir=../elsewhere >> $GITHUB_OUTPUT
      - uses: actions/checkout@v4
        with:
          path: ${{ steps.where.outputs.dir }}
"""
    claimed, finished = forge.run_job(workflow(steps), {"README.md": "read me\n"})
    assert finished.report["result"] == "failure"
    assert "with.path '../elsewhere' must be a relative path in the workspace" in forge.log(
        claimed.attempt_id
    )


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ("src", "src"),
        ("./a//b/", "a/b"),
        ("{ws}/src", "src"),  # an expression's absolute result inside the workspace
        ("{ws}", ""),
        ("{ws}/", ""),
        ("/etc", None),
        ("{ws}/../x", None),
        ("{ws}x/y", None),  # a sibling that starts with the workspace's name
        ("a/../..", None),
        (".git/x", None),
        (".home", None),
        ("a\nb", None),
    ],
)
def test_the_checkout_target_stays_in_the_workspace(
    tmp_path: Path, written: str, expected: str | None
) -> None:
    workspace = str(tmp_path / "ws")
    os.mkdir(workspace)
    relative = written.replace("{ws}", workspace)
    if expected is None:
        with pytest.raises(CheckoutError):
            target_directory(workspace, relative)
    else:
        parts = [part for part in expected.split("/") if part]
        assert target_directory(workspace, relative) == os.path.join(workspace, *parts)
