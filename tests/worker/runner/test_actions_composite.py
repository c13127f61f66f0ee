"""Composite actions in the real runner: inputs, outputs, nesting, if and continue-on-error."""

from __future__ import annotations

import io
import tarfile

import pytest

from tests.worker.runner.actions_world import (
    ActionSpec,
    composite,
    declare,
    install,
    node,
    step,
)
from tests.worker.runner.conftest import Forge, workflow

INNER = ActionSpec(
    files={"data.txt": "inner data\n"},
    runs=composite(
        step(
            "echoed",
            run='echo "inner got ${{ inputs.name }}: $(cat "$GITHUB_ACTION_PATH/data.txt")"\n'
            'echo "value=[${{ inputs.name }}]" >> "$GITHUB_OUTPUT"',
        ),
    ),
    inputs={"name": declare(required=True)},
    outputs={"echoed": "${{ steps.echoed.outputs.value }}"},
)
OUTER = ActionSpec(
    files={"outer.txt": "outer data\n"},
    runs=composite(
        step(
            "say",
            run='echo "text=hello ${{ inputs.who }}${{ inputs.punct }}" >> "$GITHUB_OUTPUT"\n'
            'cat "$GITHUB_ACTION_PATH/outer.txt"; echo "mode=$MODE"',
        ),
        step("skipped", run="echo should not run", condition="inputs.who == 'nobody'"),
        step("nested", uses="inner", **{"with": {"name": "${{ steps.say.outputs.text }}"}}),
        step("flaky", run="exit 4", continue_on_error=True),
        step("after_flaky", run="echo after flaky ran"),
    ),
    inputs={"who": declare(required=True), "punct": declare(default="!")},
    outputs={
        "greeting": "${{ steps.say.outputs.text }}",
        "inner": "${{ steps.nested.outputs.echoed }}",
        "skipped": "${{ steps.skipped.outcome }}",
    },
)
BROKEN = ActionSpec(
    files={},
    runs=composite(
        step("boom", run="echo boom; exit 2"),
        step("never", run="echo never"),
        step("cleanup", run="echo cleanup ran", condition="failure()"),
    ),
)


def test_composite_inputs_outputs_nesting_and_conditions(
    forge: Forge, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(
        forge,
        monkeypatch,
        {"outer": OUTER, "inner": INNER, "broken": BROKEN},
        {
            "greet": ("outer", {"who": "${{ github.actor }}"}),
            "not_run": ("outer", {"who": "x"}),
            "tolerated": ("broken", {}),
        },
    )
    steps = """\
      - id: greet
        env:
          MODE: fast
        run: placeholder
      - id: show
        run: |
          echo "greeting=[${{ steps.greet.outputs.greeting }}]"
          echo "inner=[${{ steps.greet.outputs.inner }}]" \\
            "skipped=[${{ steps.greet.outputs.skipped }}]"
      - id: not_run
        if: github.event_name == 'nobody'
        run: placeholder
      - id: tolerated
        continue-on-error: true
        run: placeholder
      - id: last
        run: echo "tolerated=${{ steps.tolerated.outcome }}/${{ steps.tolerated.conclusion }}"
"""
    claimed, finished = forge.run_job(workflow(steps))
    assert finished.returncode == 0, finished
    attempt = claimed.attempt_id
    seen = forge.steps(attempt)
    assert seen["greet"][:2] == ("completed", "success")
    assert seen["not_run"][:2] == ("completed", "skipped")
    assert seen["tolerated"][:2] == ("completed", "failure")  # forgiven: the job succeeds
    log = forge.log(attempt, "greet", "stdout")
    assert "outer data\nmode=fast\n" in log
    assert "inner got hello alice!: inner data\n" in log
    assert "should not run" not in log and "after flaky ran\n" in log
    assert forge.log(attempt, "show") == (
        "greeting=[hello alice!]\ninner=[[hello alice!]] skipped=[skipped]\n"
    )
    broken = forge.log(attempt, "tolerated")
    assert "boom\n" in broken and "never" not in broken and "cleanup ran\n" in broken
    assert forge.log(attempt, "last") == "tolerated=failure/success\n"


def test_a_missing_required_input_of_a_nested_action_fails_the_composite(
    forge: Forge, monkeypatch: pytest.MonkeyPatch
) -> None:
    lonely = ActionSpec(files={}, runs=composite(step("nested", uses="inner")))
    install(forge, monkeypatch, {"lonely": lonely, "inner": INNER}, {"use": ("lonely", {})})
    claimed, finished = forge.run_job(workflow("      - id: use\n        run: placeholder\n"))
    assert finished.returncode == 1, finished
    assert forge.steps(claimed.attempt_id)["use"][:2] == ("completed", "failure")
    log = forge.log(claimed.attempt_id, "use")
    assert "requires input 'name'" in log and "inner got" not in log


def _tar_with_link() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        data = b"console.log('ran')\n"
        info = tarfile.TarInfo("main.js")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        # Links are kept as leaves only: a file written through one refuses the action.
        link = tarfile.TarInfo("escape")
        link.type = tarfile.SYMTYPE
        link.linkname = "/etc"
        tar.addfile(link)
        through = tarfile.TarInfo("escape/passwd")
        through.size = len(data)
        tar.addfile(through, io.BytesIO(data))
    return buffer.getvalue()


def _tar_with_traversal() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        data = b"console.log('ran')\n"
        for name in ("main.js", "../outside.js"):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.mark.parametrize(
    "archive, reason",
    [(_tar_with_link(), "is inside a file"), (_tar_with_traversal(), "'..'")],
)
def test_an_action_archive_with_links_or_traversal_is_refused_and_nothing_runs(
    forge: Forge, monkeypatch: pytest.MonkeyPatch, archive: bytes, reason: str
) -> None:
    bad = ActionSpec(files={}, runs=node("main.js"), archive=archive)
    install(forge, monkeypatch, {"bad": bad}, {"use": ("bad", {})})
    claimed, finished = forge.run_job(workflow("      - id: use\n        run: placeholder\n"))
    assert finished.returncode == 1, finished
    assert forge.steps(claimed.attempt_id)["use"][:2] == ("completed", "failure")
    log = forge.log(claimed.attempt_id, "use")
    assert "the action tests/bad@v1" in log and "was refused" in log and reason in log
    assert "ran" not in forge.log(claimed.attempt_id, "use", "stdout")
