"""Following a run over SSH, end to end: a real push, a real Docker job, a real OpenSSH client.

``git push && ssh git@HOST run watch`` follows the push's run while its job runs; lines arrive
before the run ends, ``::error::`` and escape sequences arrive defused, the exit status follows
the verdict (0 only for success), and a run cancelled while followed ends the follower with 1
naming it.
"""

from __future__ import annotations

import subprocess

import pytest

from forge_ci_testing.forge import LINUX, Forge, workflow

pytestmark = [pytest.mark.docker, pytest.mark.slow]

FIRST = workflow(
    f"""\
  build:
    runs-on: {LINUX}
    steps:
      - run: |
          echo "started"
          sleep 4
          echo "::error::defused"
          printf '\\033]0;title\\007colour\\n'
          echo "finished"
"""
)

LONG = workflow(
    f"""\
  build:
    runs-on: {LINUX}
    steps:
      - run: |
          echo "waiting for a cancel"
          sleep 120
"""
)


def _read_until(process: subprocess.Popen[bytes], wanted: str) -> list[str]:
    """Lines of ``process``'s stdout up to and including ``wanted``."""
    assert process.stdout is not None
    lines: list[str] = []
    while not lines or lines[-1] != wanted:
        line = process.stdout.readline().decode()
        assert line, f"the output ended before {wanted!r}: {lines}"
        lines.append(line.rstrip("\n"))
    return lines


def test_push_then_watch_then_follow_a_cancelled_run(live: Forge) -> None:
    repository = live.repository("follow")
    live.push(repository, {".github/workflows/ci.yml": FIRST})
    watcher = live.git_client.ssh_process("run", "watch", repository)
    try:
        assert watcher.stdout is not None and watcher.stderr is not None
        _read_until(watcher, "build | started")
        # The line arrived while the job was still sleeping: streamed, not printed at the end.
        view = live.run(repository, 1)
        assert view is not None and view.state != "completed"
        rest = watcher.stdout.read().decode().splitlines()
        # The runner records ::error:: as an annotation (##[error]); whatever the log holds,
        # every line starts with its job's prefix, so none can be a workflow command.
        assert rest.index("build | ##[error]defused") < rest.index("build | finished")
        assert "build | ^[]0;title^Gcolour" in rest
        assert not [line for line in rest if not line.startswith("build | ")]
        assert watcher.wait(60) == 0
        said = watcher.stderr.read().decode().splitlines()
        # The worker may not have decided the push yet: then watch said it waits for it.
        assert said[-2:] == [
            f"following run #1 of {repository}",
            f"run #1 of {repository} succeeded",
        ]
        assert said[:-2] in ([], ["waiting for the push to main to be processed"])
    finally:
        watcher.kill()
        watcher.communicate()

    repository = live.repository("follow-cancel")
    live.push(repository, {".github/workflows/ci.yml": LONG})
    follower = live.git_client.ssh_process("run", "logs", repository, "1", "--follow")
    try:
        assert follower.stdout is not None and follower.stderr is not None
        _read_until(follower, "build | waiting for a cancel")
        done = live.git_client.ssh("run", "cancel", repository, "1")
        assert done.returncode == 0, done.stderr
        assert follower.wait(90) == 1
        assert follower.stderr.read().decode() == (
            f"run #1 of {repository} did not succeed: cancelled\n"
        )
    finally:
        follower.kill()
        follower.communicate()
    assert live.wait_run(repository).conclusion == "cancelled"
