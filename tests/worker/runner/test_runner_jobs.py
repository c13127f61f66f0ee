"""The real runner against the real runner API: results, logs, step states, outputs."""

from __future__ import annotations

import pytest

from tests.worker.runner.conftest import Executable, Forge, Link, workflow


@pytest.mark.parametrize("db_kind", ["sqlite", "postgres"])
def test_a_successful_job_with_its_log(forge: Forge) -> None:
    steps = """\
      - uses: forge-ci/checkout@v1
      - id: hello
        run: |
          echo "hello from $GITHUB_REPOSITORY at $GITHUB_SHA"
          echo "to stderr" >&2
          ./tools/build.sh
      - run: cat README.md
"""
    claimed, finished = forge.run_job(
        workflow(steps),
        {"README.md": "read me\n", "tools/build.sh": Executable("#!/bin/sh\necho built\n")},
    )
    attempt = forge.attempt(claimed.attempt_id)
    assert finished.returncode == 0, finished
    assert finished.report["result"] == "success"
    assert finished.report["reported"] and finished.report["confirmed"]
    assert (attempt.state, attempt.conclusion) == ("completed", "success")
    assert forge.steps(claimed.attempt_id) == {
        "step_1": ("completed", "success", None),
        "hello": ("completed", "success", 0),
        "step_3": ("completed", "success", 0),
    }
    sha = claimed.assignment["contexts"]["github"]["sha"]
    assert f"Checked out {sha} into the workspace: 1 commit (full history), 0 tags" in forge.log(
        claimed.attempt_id, "step_1"
    )
    assert forge.log(claimed.attempt_id, "hello", "stdout") == (
        f"hello from alice/demo at {sha}\nbuilt\n"
    )
    assert forge.log(claimed.attempt_id, "hello", "stderr") == "to stderr\n"
    assert forge.log(claimed.attempt_id, "step_3") == "read me\n"
    assert finished.report["log_sequence"] == str(attempt.acknowledged_sequence)


def test_a_failing_step_fails_the_job_with_its_exit_code(forge: Forge) -> None:
    steps = """\
      - run: echo first
      - id: broken
        run: |
          echo about to fail
          exit 3
          echo never printed
      - id: skipped
        run: echo must not run
      - id: on_failure
        if: failure()
        run: echo "cleaning up after ${{ steps.broken.outcome }}"
      - id: always
        if: always()
        run: echo always
      - id: only_on_success
        if: success()
        run: echo must not run either
"""
    claimed, finished = forge.run_job(workflow(steps))
    assert finished.returncode == 1, finished
    assert finished.report["result"] == "failure"
    assert finished.report["confirmed"] and finished.report["conclusion"] == "failure"
    assert forge.attempt(claimed.attempt_id).conclusion == "failure"
    assert forge.steps(claimed.attempt_id) == {
        "step_1": ("completed", "success", 0),
        "broken": ("completed", "failure", 3),
        "skipped": ("completed", "skipped", None),
        "on_failure": ("completed", "success", 0),
        "always": ("completed", "success", 0),
        "only_on_success": ("completed", "skipped", None),
    }
    assert forge.log(claimed.attempt_id, "broken", "stdout") == "about to fail\n"
    assert "failed with exit status 3" in forge.log(claimed.attempt_id, "broken", "stderr")
    assert forge.log(claimed.attempt_id, "on_failure") == "cleaning up after failure\n"
    assert forge.log(claimed.attempt_id, "skipped") == ""


def test_shells_stop_at_the_first_failure_and_pipefail_only_when_explicit(forge: Forge) -> None:
    steps = """\
      - id: implicit
        run: |
          false | true
          echo implicit bash ignores a failing pipe stage
      - id: explicit
        shell: bash
        continue-on-error: true
        run: |
          false | true
          echo not reached
      - id: posix
        shell: sh
        run: |
          echo "sh: $0" | sed 's|/.*/||'
          test -n "${BASH_VERSION:-}" && echo bash || echo not bash
"""
    claimed, finished = forge.run_job(workflow(steps))
    assert finished.returncode == 0, finished
    states = forge.steps(claimed.attempt_id)
    assert states["implicit"] == ("completed", "success", 0)
    assert states["explicit"] == ("completed", "failure", 1)
    assert "implicit bash ignores" in forge.log(claimed.attempt_id, "implicit")
    assert "not reached" not in forge.log(claimed.attempt_id, "explicit")
    assert forge.log(claimed.attempt_id, "posix", "stdout") == "sh: step-3.sh\nnot bash\n"


def test_continue_on_error_keeps_the_job_successful(forge: Forge) -> None:
    steps = """\
      - id: flaky
        continue-on-error: true
        run: exit 7
      - id: computed
        continue-on-error: ${{ github.event_name == 'workflow_dispatch' }}
        run: exit 1
      - id: after
        run: |
          echo "${{ steps.flaky.outcome }}/${{ steps.flaky.conclusion }}"
          echo "${{ steps.computed.outcome }}/${{ steps.computed.conclusion }}"
"""
    claimed, finished = forge.run_job(workflow(steps))
    assert finished.returncode == 0, finished
    assert forge.attempt(claimed.attempt_id).conclusion == "success"
    assert forge.steps(claimed.attempt_id) == {
        "flaky": ("completed", "failure", 7),
        "computed": ("completed", "failure", 1),
        "after": ("completed", "success", 0),
    }
    assert forge.log(claimed.attempt_id, "after") == "failure/success\nfailure/success\n"
    steps_report = {step["id"]: step for step in finished.report["steps"]}
    assert steps_report["flaky"] == {
        "id": "flaky",
        "outcome": "failure",
        "conclusion": "success",
        "exit_code": 7,
    }


def test_file_commands_step_outputs_and_job_outputs(forge: Forge) -> None:
    steps = """\
      - id: produce
        env:
          PLAN_VALUE: from the plan
        run: |
          echo "GREETING=hello world" >> "$GITHUB_ENV"
          printf 'MULTI<<END\\nline one\\nline two\\nEND\\n' >> "$GITHUB_ENV"
          mkdir -p "$HOME/bin"
          printf '#!/bin/sh\\necho tool ran\\n' > "$HOME/bin/mytool"
          chmod +x "$HOME/bin/mytool"
          echo "$HOME/bin" >> "$GITHUB_PATH"
          echo "answer=42" >> "$GITHUB_OUTPUT"
          printf 'notes<<EOF\\nfirst\\nsecond\\nEOF\\n' >> "$GITHUB_OUTPUT"
          echo "PLAN_VALUE=overridden by GITHUB_ENV" >> "$GITHUB_ENV"
      - id: consume
        env:
          PLAN_VALUE: the plan wins for its step
        run: |
          echo "$GREETING"
          echo "$MULTI"
          mytool
          echo "answer is ${{ steps.produce.outputs.answer }}"
          echo "$PLAN_VALUE"
      - id: plain
        run: echo "$PLAN_VALUE"
"""
    outputs = """\
      answer: ${{ steps.produce.outputs.answer }}
      notes: ${{ steps.produce.outputs.notes }}
      combined: n=${{ steps.produce.outputs.answer }} (${{ github.event_name }})
"""
    claimed, finished = forge.run_job(workflow(steps, outputs=outputs))
    assert finished.returncode == 0, finished
    assert forge.log(claimed.attempt_id, "consume", "stdout") == (
        "hello world\nline one\nline two\ntool ran\nanswer is 42\nthe plan wins for its step\n"
    )
    assert forge.log(claimed.attempt_id, "plain") == "overridden by GITHUB_ENV\n"
    assert forge.job_outputs(claimed.attempt_id) == {
        "answer": "42",
        "combined": "n=42 (workflow_dispatch)",
        "notes": "first\nsecond",
    }
    assert "outputs" not in finished.report


def test_reserved_names_and_bad_file_commands_fail_the_step(forge: Forge) -> None:
    steps = """\
      - id: sneaky
        run: echo "PATH=/tmp/evil" >> "$GITHUB_ENV"
      - id: after
        if: always()
        run: echo "$PATH"
"""
    claimed, finished = forge.run_job(workflow(steps))
    assert finished.returncode == 1, finished
    assert forge.steps(claimed.attempt_id)["sneaky"] == ("completed", "failure", 1)
    assert "GITHUB_ENV: PATH is reserved" in forge.log(claimed.attempt_id, "sneaky", "stderr")
    assert "/tmp/evil" not in forge.log(claimed.attempt_id, "after")


def test_github_names_the_runner_does_not_set_are_ordinary_variables(forge: Forge) -> None:
    steps = """\
      - id: set
        env:
          GITHUB_CONTEXT: from-the-workflow
        run: |
          echo "$GITHUB_CONTEXT"
          echo "GITHUB_TOKEN_NOTE=from-a-step" >> "$GITHUB_ENV"
      - id: read
        run: echo "$GITHUB_TOKEN_NOTE"
      - id: override
        run: echo "GITHUB_SHA=0000" >> "$GITHUB_ENV"
      - id: after
        if: always()
        run: echo "$GITHUB_SHA"
"""
    claimed, finished = forge.run_job(workflow(steps))
    assert finished.returncode == 1, finished
    assert forge.log(claimed.attempt_id, "set") == "from-the-workflow\n"
    assert forge.log(claimed.attempt_id, "read") == "from-a-step\n"
    # Refused: a variable the runner sets cannot be overridden.
    assert forge.steps(claimed.attempt_id)["override"] == ("completed", "failure", 1)
    assert "GITHUB_ENV: GITHUB_SHA is reserved" in forge.log(
        claimed.attempt_id, "override", "stderr"
    )
    sha = claimed.assignment["contexts"]["github"]["sha"]
    assert forge.log(claimed.attempt_id, "after") == f"{sha}\n"


def test_the_environment_is_built_from_scratch(forge: Forge) -> None:
    steps = """\
      - id: env
        run: env | sort
      - id: places
        working-directory: sub/dir
        run: |
          pwd
          test "$HOME" = "$GITHUB_WORKSPACE/.home" && test -d "$HOME" && echo home ok
          test "$TMPDIR" = "$GITHUB_WORKSPACE/.tmp" && test -d "$TMPDIR" && echo tmp ok
          stat -c %a "$HOME" "$TMPDIR"
"""
    claimed, finished = forge.run_job(workflow(steps), {"sub/dir/keep": "x"})
    assert finished.returncode == 0, finished
    names = {
        line.split("=", 1)[0]
        for line in forge.log(claimed.attempt_id, "env", "stdout").splitlines()
        if "=" in line
    }
    assert {"PATH", "HOME", "TMPDIR", "CI", "GITHUB_WORKSPACE", "GITHUB_SHA", "GITHUB_ENV"} <= names
    # Nothing of the runner's own environment (PYTHONPATH...) reaches the step.
    assert not names & {"PYTHONPATH", "PYTHONSAFEPATH", "PYTHONDONTWRITEBYTECODE"}
    workspace = str(forge.workspace().resolve())
    assert forge.log(claimed.attempt_id, "places", "stdout") == (
        f"{workspace}/sub/dir\nhome ok\ntmp ok\n700\n700\n"
    )


def test_working_directories_cannot_leave_the_workspace(forge: Forge) -> None:
    steps = """\
      - uses: forge-ci/checkout@v1
      - id: make_link
        run: ln -s / escape && ln -s .. up
      - id: through_link
        working-directory: escape
        run: echo must not run
      - id: missing
        if: always()
        working-directory: nowhere
        run: echo must not run
"""
    claimed, finished = forge.run_job(workflow(steps))
    assert finished.returncode == 1, finished
    states = forge.steps(claimed.attempt_id)
    assert states["through_link"] == ("completed", "failure", None)
    assert states["missing"] == ("completed", "failure", None)
    assert "leads outside the workspace" in forge.log(claimed.attempt_id, "through_link")
    assert "does not exist" in forge.log(claimed.attempt_id, "missing")


def test_output_that_is_not_utf8_is_kept_readable(forge: Forge) -> None:
    steps = """\
      - id: bytes
        run: |
          printf 'caf\\xc3\\xa9 \\xff\\xfe and a NUL:\\x00.\\n'
          printf 'split \\xe2\\x82' ; sleep 0.1 ; printf '\\xac euro\\n'
"""
    claimed, finished = forge.run_job(workflow(steps))
    assert finished.returncode == 0, finished
    assert forge.log(claimed.attempt_id, "bytes") == (
        "café \ufffd\ufffd and a NUL:\ufffd.\nsplit € euro\n"
    )


def test_jobs_without_a_checkout_step_get_the_source_first(forge: Forge) -> None:
    steps = """\
      - run: cat data.txt && test -x run.sh && ./run.sh
"""
    claimed, finished = forge.run_job(
        workflow(steps), {"data.txt": "data\n", "run.sh": Executable("#!/bin/sh\necho ran\n")}
    )
    assert finished.returncode == 0, finished
    assert forge.log(claimed.attempt_id, "step_1") == "data\nran\n"
    assert "Checked out" in forge.log(claimed.attempt_id, "")


def test_jobs_without_contents_permission_get_no_source(forge: Forge) -> None:
    steps = """\
      - run: ls -A
"""
    claimed, finished = forge.run_job(
        workflow(steps, extra="    permissions: {}\n"), {"data.txt": "data\n"}
    )
    assert finished.returncode == 0, finished
    assert claimed.assignment["source_archive_path"] == ""
    assert forge.log(claimed.attempt_id, "step_1") == ".home\n.tmp\n"
    # And the server would refuse it anyway.
    path = f"/attempts/{claimed.attempt_id}/source.tar"
    status, answer = forge.post(path, {"version": 1, "execution_id": "0" * 32}, claimed.token)
    assert status == 409 and answer["error"]["code"] == "attempt_ended"


def test_the_checkout_without_clean_needs_an_empty_workspace(forge: Forge) -> None:
    """clean: false never mixes the source with files left by earlier steps (clean: true, the
    default, empties the workspace first: test_runner_git_checkout)."""
    steps = """\
      - run: echo files were left here > leftover.txt
      - uses: forge-ci/checkout@v1
        with:
          clean: false
      - id: report
        if: always()
        run: ls -A
"""
    claimed, finished = forge.run_job(workflow(steps), {"data.txt": "data\n"})
    assert finished.returncode == 1, finished
    states = forge.steps(claimed.attempt_id)
    assert states["step_2"] == ("completed", "failure", None)
    assert states["report"][1] == "success"
    assert forge.log(claimed.attempt_id, "report") == ".home\n.tmp\nleftover.txt\n"
    log = forge.log(claimed.attempt_id, "step_2")
    assert "clean: false needs an empty directory or an earlier checkout" in log
    assert "'leftover.txt'" in log


def test_the_server_refuses_sources_with_links(forge: Forge) -> None:
    steps = """\
      - uses: forge-ci/checkout@v1
"""
    claimed, finished = forge.run_job(workflow(steps), {"docs/link": Link("../../etc")})
    assert finished.returncode == 1, finished
    log = forge.log(claimed.attempt_id, "step_1")
    assert "the commit contains the symbolic link 'docs/link'" in log
    assert sorted(p.name for p in forge.workspace().iterdir()) == [".home", ".tmp"]


def test_needs_outputs_and_results_reach_the_next_job(forge: Forge) -> None:
    pipeline = """\
name: CI
on: workflow_dispatch
jobs:
  build:
    runs-on: self-hosted
    outputs:
      artifact: ${{ steps.pack.outputs.name }}
    steps:
      - id: pack
        run: echo "name=app-1.2.tar" >> "$GITHUB_OUTPUT"
  deploy:
    needs: build
    runs-on: self-hosted
    steps:
      - id: show
        if: needs.build.result == 'success'
        env:
          ARTIFACT: ${{ needs.build.outputs.artifact }}
        run: echo "deploying $ARTIFACT (${{ needs.build.result }})"
      - id: never
        if: needs.build.result != 'success'
        run: echo must not run
"""
    forge.dispatch(pipeline)
    first = forge.claim()
    build = forge.finish(forge.start_runner(forge.envelope(first, forge.workspace())))
    assert build.returncode == 0, build
    second = forge.claim()
    assert second.assignment["contexts"]["needs"] == {
        "build": {"outputs": {"artifact": "app-1.2.tar"}, "result": "success"}
    }
    other = forge.workdir / "deploy-workspace"
    other.mkdir()
    deploy = forge.finish(forge.start_runner(forge.envelope(second, other)))
    assert deploy.returncode == 0, deploy
    assert forge.log(second.attempt_id, "show") == "deploying app-1.2.tar (success)\n"
    assert forge.steps(second.attempt_id)["never"] == ("completed", "skipped", None)
