"""The checkout step's git checkout in the real runner, against the real runner API."""

from __future__ import annotations

from tests.worker.runner.conftest import Forge, workflow


def test_clean_false_keeps_untracked_files_of_an_earlier_repository(forge: Forge) -> None:
    steps = """\
      - run: git init -q src && echo mine > src/untracked.txt
      - uses: actions/checkout@v4
        with:
          path: src
          clean: false
      - run: cat src/untracked.txt src/README.md && git -C src status --porcelain
"""
    claimed, finished = forge.run_job(workflow(steps), {"README.md": "read me\n"})
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
