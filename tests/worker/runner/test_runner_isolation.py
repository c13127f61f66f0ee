"""What steps can and cannot see, and how the runner refuses bad input before starting."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

from tests.worker.runner.conftest import REPO_ROOT, Forge, wait_for, workflow


def test_the_credential_is_in_no_step_environment_argv_or_file(forge: Forge) -> None:
    steps = """\
      - id: look
        run: |
          env > "$GITHUB_WORKSPACE/env.txt"
          cat /proc/$$/environ > "$GITHUB_WORKSPACE/self-environ.bin"
          for p in /proc/[0-9]*; do cat "$p/cmdline" 2>/dev/null || true; echo; done \\
            > "$GITHUB_WORKSPACE/cmdlines.bin"
          cat /proc/$PPID/environ > "$GITHUB_WORKSPACE/runner-environ.bin" 2>/dev/null || true
          ls -l /proc/$$/fd > "$GITHUB_WORKSPACE/fds.txt"
"""
    claimed, finished = forge.run_job(workflow(steps))
    assert finished.returncode == 0, finished
    token = claimed.token.encode()
    workspace = forge.workspace()
    for name in ("env.txt", "self-environ.bin", "cmdlines.bin", "runner-environ.bin", "fds.txt"):
        assert token not in (workspace / name).read_bytes(), name
    for path in workspace.rglob("*"):
        if path.is_file():
            assert token not in path.read_bytes(), path
    # The step inherits no descriptor but its three standard streams (and the shell's script).
    fds = (workspace / "fds.txt").read_text()
    assert "api.sock" not in fds and "socket:" not in fds
    # The runner never printed it either.
    assert claimed.token not in json.dumps(finished.report) + finished.stderr


def test_secrets_reach_only_the_steps_that_declare_them(forge: Forge) -> None:
    value = "s3cr3t-value-for-tests"
    forge.use_secrets({"DEPLOY_TOKEN": value})
    steps = """\
      - id: uses_it
        env:
          TOKEN: ${{ secrets.DEPLOY_TOKEN }}
        run: |
          echo "token is $TOKEN"
          printf '%s' "$TOKEN" | sha256sum | cut -d' ' -f1 > "$GITHUB_WORKSPACE/digest"
      - id: does_not
        run: echo "token is [${TOKEN:-}]"
"""
    claimed, finished = forge.run_job(workflow(steps))
    assert finished.returncode == 0, finished
    digest = (forge.workspace() / "digest").read_text().strip()
    assert digest == hashlib.sha256(value.encode()).hexdigest()
    assert forge.log(claimed.attempt_id, "does_not") == "token is []\n"
    # The server masks what was issued before storing the log.
    log = forge.log(claimed.attempt_id)
    assert value not in log and "token is ***" in log


def test_the_runner_is_not_dumpable() -> None:
    code = (
        "import ctypes; from worker.runner.processes import harden; harden(); "
        "print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))"
    )
    result = subprocess.run(
        [sys.executable, "-S", "-c", code],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"},
        check=True,
        timeout=30,
    )
    assert result.stdout.strip() == "0"


def test_a_workspace_that_is_not_empty_is_a_configuration_error(forge: Forge) -> None:
    forge.dispatch(workflow("      - run: echo hi\n"))
    claimed = forge.claim()
    workspace = forge.workspace()
    (workspace / "stale").write_text("from an earlier job")
    finished = forge.finish(forge.start_runner(forge.envelope(claimed, workspace)))
    assert finished.returncode == 2
    assert finished.report["result"] == "error"
    assert "must be empty" in finished.report["reason"]
    assert forge.attempt(claimed.attempt_id).state == "leased"  # nothing was started


def test_an_assignment_that_is_already_running_is_never_started_again(forge: Forge) -> None:
    forge.dispatch(workflow("      - run: echo first\n"))
    claimed = forge.claim()
    claimed.assignment["state"] = "running"
    finished = forge.finish(forge.start_runner(forge.envelope(claimed, forge.workspace())))
    assert finished.returncode == 2
    assert "already running" in finished.report["reason"]


def test_a_second_runner_for_the_same_attempt_is_refused(forge: Forge) -> None:
    steps = """\
      - run: |
          touch "$GITHUB_WORKSPACE/started"
          while [ ! -e "$GITHUB_WORKSPACE/go" ]; do sleep 0.05; done
          echo first runner finished
"""
    forge.dispatch(workflow(steps))
    claimed = forge.claim()
    workspace = forge.workspace()
    first = forge.start_runner(forge.envelope(claimed, workspace))
    wait_for(lambda: (workspace / "started").exists(), what="the first runner's step")
    other = forge.workdir / "other-workspace"
    other.mkdir()
    second = forge.finish(forge.start_runner(forge.envelope(claimed, other)))
    assert second.returncode == 2
    assert second.report["result"] == "refused"
    assert "another runner instance" in second.report["reason"]
    assert sorted(p.name for p in other.iterdir()) == []
    (workspace / "go").touch()
    done = forge.finish(first)
    assert done.returncode == 0, done
    assert forge.log(claimed.attempt_id, "step_1") == "first runner finished\n"


def test_bad_input_is_a_configuration_error(forge: Forge) -> None:
    for stdin, message in [
        (b"", "the runner input is empty"),
        (b"{not json", "not valid JSON"),
        (b'{"version": 1}', "field 'credential' is required"),
        (
            json.dumps(
                {
                    "version": 1,
                    "credential": "x" * 64,
                    "api_socket": "/run/forge-ci/api.sock",
                    "workspace": "/workspace",
                    "assignment": {},
                }
            ).encode(),
            "credential must be 64 lowercase hexadecimal characters",
        ),
    ]:
        finished = forge.finish(forge.start_runner(stdin))
        assert finished.returncode == 2, stdin
        assert finished.report["result"] == "error"
        assert message in finished.report["reason"], finished.report
