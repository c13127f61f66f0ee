"""Workflow commands and the GITHUB_STATE / GITHUB_STEP_SUMMARY files, end to end."""

from __future__ import annotations

from sqlalchemy import select

from forge_ci.models import AttemptAnnotation, AttemptStep
from tests.worker.runner.conftest import Forge, workflow


def stored_annotations(forge: Forge, attempt_id: int) -> list[tuple[str, str, str, str, int, int]]:
    with forge.database.session() as session:
        rows = session.scalars(
            select(AttemptAnnotation)
            .where(AttemptAnnotation.attempt_id == attempt_id)
            .order_by(AttemptAnnotation.position)
        )
        return [(r.step_id, r.level, r.message, r.file, r.line, r.col) for r in rows]


def summaries(forge: Forge, attempt_id: int) -> dict[str, str | None]:
    with forge.database.session() as session:
        rows = session.scalars(select(AttemptStep).where(AttemptStep.attempt_id == attempt_id))
        return {row.step_id: row.summary for row in rows}


def test_workflow_commands_are_applied_as_github_applies_them(forge: Forge) -> None:
    steps = """\
      - id: commands
        run: |
          echo "before: hunter2-secret-value"
          echo "::add-mask::hunter2-secret-value"
          echo "after: hunter2-secret-value"
          printf 'split: hunter2-sec'; sleep 0.3; printf 'ret-value\\n'
          echo "::group::Build output"
          echo "inside"
          echo "::endgroup::"
          where="file=src/app.py,line=12,col=4,title=Bad%3A thing"
          echo "::error $where::it broke%0Ahere: hunter2-secret-value"
          echo "::warning::careful"
          echo "  ::notice::indented works"
          echo "::debug::details"
          echo "::set-output name=answer::41"
          echo "::add-matcher::matcher.json"
          echo "::stop-commands::pause-token-1"
          echo "::error::not a command"
          echo "::pause-token-1::"
          echo "::set-env name=SNEAKY::yes"
          echo "### Result: hunter2-secret-value" >> "$GITHUB_STEP_SUMMARY"
          echo "<b>not html</b>" >> "$GITHUB_STEP_SUMMARY"
      - id: after
        run: echo "answer=[${{ steps.commands.outputs.answer }}] sneaky=[${SNEAKY:-}]"
      - id: leak
        run: echo "out=hunter2-secret-value" >> "$GITHUB_OUTPUT"
"""
    outputs = "      leaked: ${{ steps.leak.outputs.out }}\n"
    claimed, finished = forge.run_job(workflow(steps, outputs=outputs))
    assert finished.returncode == 0, finished
    attempt = claimed.attempt_id
    stdout = forge.log(attempt, "commands", "stdout")
    # Masked from the command on, also across reads (text of the same batch just before the
    # command may be masked too: the mask travels with the chunk).
    assert "hunter2" not in stdout
    assert "after: ***\n" in stdout and "split: ***\n" in stdout
    assert "::add-mask::" not in forge.log(attempt)
    assert "##[group]Build output\ninside\n##[endgroup]\n" in stdout
    assert "##[debug]details\n" in stdout
    assert "::error::not a command\n" in stdout  # while commands were stopped
    stderr = forge.log(attempt, "commands", "stderr")
    assert "set-output` command is deprecated" in stderr
    assert "::add-matcher:: accepted; problem matchers are not applied" in stderr
    assert "`set-env` command is disabled" in stderr
    assert forge.log(attempt, "after") == "answer=[41] sneaky=[]\n"
    found = stored_annotations(forge, attempt)
    assert found[0][:2] == ("commands", "error")
    assert found[0][3:] == ("src/app.py", 12, 4)
    assert found[0][2].startswith("it broke\nhere: ") and "hunter2" not in found[0][2]
    assert found[1] == ("commands", "warning", "careful", "", 0, 0)
    assert found[2] == ("commands", "notice", "indented works", "", 0, 0)
    assert [item[1] for item in found[3:]] == ["error"]  # the refused set-env
    summary = summaries(forge, attempt)["commands"]
    assert summary is not None and summary.startswith("### Result: ")
    assert "hunter2" not in summary and "<b>not html</b>" in summary
    assert summaries(forge, attempt)["after"] is None
    # Job outputs are masked too.
    assert "hunter2" not in forge.job_outputs(attempt)["leaked"]


def test_at_most_ten_annotations_of_a_level_are_kept_per_step(forge: Forge) -> None:
    steps = """\
      - id: many
        run: for i in $(seq 1 13); do echo "::warning::w$i"; done; echo "::error::e"
"""
    claimed, finished = forge.run_job(workflow(steps))
    assert finished.returncode == 0, finished
    found = stored_annotations(forge, claimed.attempt_id)
    assert [item[2] for item in found] == [f"w{i}" for i in range(1, 11)] + ["e"]
    assert "3 more warning annotations were not kept" in forge.log(claimed.attempt_id, "many")
