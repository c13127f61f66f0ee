"""Node actions in the real runner: inputs and defaults, outputs, state, pre and post steps
(their order, conditions, and the clean-up window after the job's time limit)."""

from __future__ import annotations

import pytest

from tests.worker.runner.actions_world import ActionSpec, declare, install, node
from tests.worker.runner.conftest import Forge, wait_for, workflow

GREETER_MAIN = """\
const fs = require('fs');
const env = process.env;
console.log(`main: who=${env.INPUT_WHO} greeting=${env.INPUT_GREETING}`);
console.log(`path=${env.GITHUB_ACTION_PATH === __dirname} action=${env.GITHUB_ACTION}`);
console.log(`pre state=${env.STATE_from_pre || ''}`);
fs.appendFileSync(env.GITHUB_OUTPUT, `said=${env.INPUT_GREETING} ${env.INPUT_WHO}\\n`);
fs.appendFileSync(env.GITHUB_STATE, `seen=${env.INPUT_WHO}\\n`);
console.log('::save-state name=old::kept');
console.log('::set-output name=legacy::41');
"""
PRE = """\
require('fs').appendFileSync(process.env.GITHUB_STATE, 'from_pre=yes\\n');
console.log(`pre: who=${process.env.INPUT_WHO}`);
"""
POST = (
    "const e = process.env;\n"
    "console.log(`post ${e.INPUT_WHO}: seen=${e.STATE_seen} old=${e.STATE_old} "
    "pre=${e.STATE_from_pre}`);\n"
)


def greeter(**runs: str) -> ActionSpec:
    return ActionSpec(
        files={"main.js": GREETER_MAIN, "pre.js": PRE, "post.js": POST},
        runs=node("main.js", **runs),
        inputs={
            "who": declare(required=True),
            "Greeting": declare(default="hello ${{ github.actor }}"),
        },
        outputs={"said": None, "legacy": None},
    )


def test_node_action_inputs_outputs_state_and_post_order_after_a_failure(
    forge: Forge, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(
        forge,
        monkeypatch,
        {
            "greeter": greeter(pre="pre.js", post="post.js"),
            "second": greeter(post="post.js"),
            "careful": greeter(post="post.js", post_if="success()"),
        },
        {
            "first": ("greeter", {"who": "alice"}),
            "again": ("second", {"WHO": "bob", "greeting": "hi"}),
            "guarded": ("careful", {"who": "carol"}),
        },
    )
    steps = """\
      - id: first
        run: placeholder
      - id: again
        run: placeholder
      - id: guarded
        run: placeholder
      - id: show
        run: |
          echo "said=[${{ steps.first.outputs.said }}]" \\
            "legacy=[${{ steps.first.outputs.legacy }}]"
      - id: fail
        run: exit 3
      - id: later
        run: echo never
"""
    claimed, finished = forge.run_job(workflow(steps))
    assert finished.returncode == 1, finished
    attempt = claimed.attempt_id
    steps_seen = forge.steps(attempt)
    assert list(steps_seen) == [
        "pre-first",
        "first",
        "again",
        "guarded",
        "show",
        "fail",
        "later",
        "post-guarded",
        "post-again",
        "post-first",
    ]
    assert steps_seen["pre-first"][:2] == ("completed", "success"), forge.log(attempt, "pre-first")[
        :600
    ]
    assert steps_seen["first"][:2] == ("completed", "success")
    assert steps_seen["fail"][:2] == ("completed", "failure")
    assert steps_seen["later"][:2] == ("completed", "skipped")
    # post-if: success() is false after the failure; the others run (always()), newest first.
    assert steps_seen["post-guarded"][:2] == ("completed", "skipped")
    assert steps_seen["post-again"][:2] == ("completed", "success")
    assert steps_seen["post-first"][:2] == ("completed", "success")
    assert forge.log(attempt, "pre-first", "stdout") == "pre: who=alice\n"
    main = forge.log(attempt, "first", "stdout")
    assert "main: who=alice greeting=hello alice\n" in main  # the default is a template
    assert "path=true action=first\n" in main
    assert "pre state=yes\n" in main
    assert "main: who=bob greeting=hi\n" in forge.log(attempt, "again", "stdout")
    assert "set-output` command is deprecated" in forge.log(attempt, "first", "stderr")
    assert "::set-output" not in forge.log(attempt, "first")
    assert forge.log(attempt, "show") == "said=[hello alice alice] legacy=[41]\n"
    assert forge.log(attempt, "post-first", "stdout") == "post alice: seen=alice old=kept pre=yes\n"
    assert (
        forge.log(attempt, "post-again", "stdout") == "post bob: seen=bob old=kept pre=undefined\n"
    )


def test_a_missing_required_input_fails_the_step_before_anything_runs(
    forge: Forge, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(forge, monkeypatch, {"greeter": greeter(post="post.js")}, {"first": ("greeter", {})})
    steps = """\
      - id: first
        run: placeholder
"""
    claimed, finished = forge.run_job(workflow(steps))
    assert finished.returncode == 1, finished
    seen = forge.steps(claimed.attempt_id)
    assert seen["first"][:2] == ("completed", "failure")
    # The main never ran, so neither does its post.
    assert seen["post-first"][:2] == ("completed", "skipped")
    log = forge.log(claimed.attempt_id, "first")
    assert "requires input 'who'" in log and "main:" not in log


def test_pre_steps_run_first_whatever_their_main_step_does_unless_pre_if_says_no(
    forge: Forge, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As on GitHub, every pre step runs at the start of the job, before the first main step,
    in order: also the pre of a step whose own ``if`` is false (only ``pre-if`` decides) and of
    a step after one that fails; each with its own outcome and log."""
    guarded = greeter(pre="pre.js", pre_if="github.event_name == 'push'")
    install(
        forge,
        monkeypatch,
        {"greeter": guarded, "eager": greeter(pre="pre.js", post="post.js")},
        {
            "first": ("greeter", {"who": "dan"}),
            "quiet": ("eager", {"who": "quinn"}),
            "late": ("eager", {"who": "lee"}),
        },
    )
    steps = """\
      - id: first
        run: placeholder
      - id: quiet
        if: false
        run: placeholder
      - id: fail
        run: echo "main steps start"; exit 1
      - id: late
        run: placeholder
"""
    claimed, finished = forge.run_job(workflow(steps))
    assert finished.returncode == 1, finished
    attempt = claimed.attempt_id
    seen = {name: state[:2] for name, state in forge.steps(attempt).items()}
    assert seen == {
        "pre-first": ("completed", "skipped"),  # dispatched, not pushed
        "pre-quiet": ("completed", "success"),
        "pre-late": ("completed", "success"),
        "first": ("completed", "success"),
        "quiet": ("completed", "skipped"),
        "fail": ("completed", "failure"),
        "late": ("completed", "skipped"),
        "post-late": ("completed", "skipped"),  # their main never ran
        "post-quiet": ("completed", "skipped"),
    }
    assert "main: who=dan" in forge.log(attempt, "first")
    assert "pre state=\n" in forge.log(attempt, "first")
    assert forge.log(attempt, "pre-quiet", "stdout") == "pre: who=quinn\n"
    assert forge.log(attempt, "pre-late", "stdout") == "pre: who=lee\n"
    assert forge.log(attempt, "quiet") == forge.log(attempt, "late") == ""


HANGING_POST = "console.log('hanging post started'); setInterval(() => {}, 1000);\n"


def test_post_steps_run_after_the_job_time_limit_within_the_clean_up_window(
    forge: Forge, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As on GitHub, the time limit does not skip the actions' post steps: their default
    ``post-if`` (always()) holds, ``success()`` does not, ``cancelled()`` does; a post step that
    hangs is stopped when the window ends, and the job is still reported timed out."""
    hangs = ActionSpec(files={"main.js": "", "post.js": HANGING_POST}, runs=node(post="post.js"))
    install(
        forge,
        monkeypatch,
        {
            "greeter": greeter(post="post.js"),
            "careful": greeter(post="post.js", post_if="success()"),
            "hangs": hangs,
            "told": greeter(post="post.js", post_if="cancelled()"),
        },
        {
            "stuck": ("hangs", {}),
            "first": ("greeter", {"who": "erin"}),
            "guarded": ("careful", {"who": "carol"}),
            "noticed": ("told", {"who": "tom"}),
        },
    )
    steps = "".join(
        f"      - id: {name}\n        run: placeholder\n"
        for name in ("stuck", "first", "guarded", "noticed")
    )
    steps += """\
      - id: sleeper
        run: echo started; sleep 1000
      - id: later
        if: always()
        run: echo "after the limit"
      - id: plain
        run: echo never
"""
    forge.dispatch(workflow(steps, timeout_minutes=1))
    claimed = forge.claim()
    process = forge.start_runner(forge.envelope(claimed, forge.workspace()))
    wait_for(lambda: "started" in forge.log(claimed.attempt_id, "sleeper"), 20, "the sleeper")
    # 46 of the 60 s pass at once for the server: the runner learns 14 s are left and stops
    # 2 s later (10 s for the post steps and 2 s to report are kept), then cleans up until
    # 2 s before the deadline.
    forge.clock.advance(46)
    finished = forge.finish(process, timeout=30)

    assert finished.returncode == 1, finished
    assert finished.report["result"] == "timed_out"
    assert forge.attempt(claimed.attempt_id).conclusion == "timed_out"
    attempt = claimed.attempt_id
    seen = {name: state[:2] for name, state in forge.steps(attempt).items()}
    assert seen == {
        "stuck": ("completed", "success"),
        "first": ("completed", "success"),
        "guarded": ("completed", "success"),
        "noticed": ("completed", "success"),
        "sleeper": ("completed", "timed_out"),
        "later": ("completed", "success"),  # always() holds after the limit too
        "plain": ("completed", "skipped"),
        "post-noticed": ("completed", "success"),
        "post-guarded": ("completed", "skipped"),
        "post-first": ("completed", "success"),
        "post-stuck": ("completed", "timed_out"),
    }
    assert (
        forge.log(attempt, "post-first", "stdout")
        == "post erin: seen=erin old=kept pre=undefined\n"
    )
    assert forge.log(attempt, "later") == "after the limit\n"
    assert "post tom:" in forge.log(attempt, "post-noticed", "stdout")
    assert "hanging post started" in forge.log(attempt, "post-stuck")
    assert "the clean-up window (10 s after the stop) ran out" in forge.log(attempt, "post-stuck")
