"""The runner's entry point: harden, read standard input, run the job, report, exit.

The runner protects itself before it reads the credential (non-dumpable, no new privileges,
child subreaper). Standard input is read once, to EOF, with a deadline and a size limit, and
then replaced by ``/dev/null``. SIGTERM and SIGINT stop the job like a cancellation (as PID 1 in
a container, SIGTERM would otherwise be ignored).
"""

from __future__ import annotations

import os
import select
import signal
import sys
import traceback
from types import FrameType

from forge_ci.protocol import MAX_RUNNER_INPUT_BYTES, ProtocolError, parse_runner_input
from worker.runner.clock import now
from worker.runner.job import JobRunner
from worker.runner.processes import HardeningError, harden
from worker.runner.report import Report, say

STDIN_SECONDS = 30.0
#: Runs the runner outside a job container (its own tests, on a trusted machine).
UNSAFE_LOCAL = "--unsafe-local"


def placement_problem(argv: list[str], pid: int, uid: int, euid: int) -> str | None:
    """Why the runner must not run here, or None (seed 000's runner safety switch).

    In a job container the runner is PID 1 of the container's own PID namespace and runs as
    UID 10001, so its steps' processes are its children and nothing else lives beside them.
    Anywhere else (started by hand on a host, as root) its cleanup would signal and reap
    processes that are not the job's, and steps would run with the caller's privileges.
    """
    if argv == [UNSAFE_LOCAL]:
        return None
    if argv:
        return f"unknown arguments {' '.join(argv)!r}; the only one is {UNSAFE_LOCAL}"
    if pid != 1:
        return (
            f"the runner must be PID 1 of its own PID namespace (a job container), not PID {pid}; "
            f"{UNSAFE_LOCAL} runs it anyway, for trusted tests only"
        )
    if uid == 0 or euid == 0:
        return "the runner must not run as root; the job image runs it as UID 10001"
    return None


class InputError(Exception):
    pass


def read_input(fd: int = 0, seconds: float = STDIN_SECONDS) -> bytes:
    """Everything on ``fd`` up to EOF (at most the envelope limit, within ``seconds``)."""
    deadline = now() + seconds
    data = bytearray()
    while True:
        remaining = deadline - now()
        if remaining <= 0:
            raise InputError(f"standard input was not closed within {seconds:g} seconds")
        ready, _, _ = select.select([fd], [], [], remaining)
        if not ready:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            return bytes(data)
        data += chunk
        if len(data) > MAX_RUNNER_INPUT_BYTES:
            raise InputError(f"standard input is larger than {MAX_RUNNER_INPUT_BYTES} bytes")


def _detach_stdin() -> None:
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)


def main(argv: list[str] | None = None) -> int:
    problem = placement_problem(
        sys.argv[1:] if argv is None else argv, os.getpid(), os.getuid(), os.geteuid()
    )
    if problem is not None:
        return _configuration_error(problem)
    try:
        harden()
    except HardeningError as exc:
        report = Report(0, "", "error", reason=str(exc))
        say(str(exc))
        report.write()
        return report.exit_status()
    try:
        raw = read_input()
        runner_input = parse_runner_input(raw)
    except (InputError, OSError) as exc:
        return _configuration_error(f"cannot read the runner input: {exc}")
    except ProtocolError as exc:
        return _configuration_error(f"invalid runner input: {exc.message}")
    finally:
        _detach_stdin()
    del raw
    runner = JobRunner(runner_input)

    def interrupted(signum: int, frame: FrameType | None) -> None:
        runner.watchdog.request_stop(
            "interrupted", f"the runner received {signal.Signals(signum).name}"
        )

    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGINT, interrupted)
    try:
        report = runner.run()
    except Exception as exc:  # noqa: BLE001 - a bug must not look like a result
        # Nothing is confirmed: exit 2, and the attempt's lease decides what happened.
        report = runner.report
        report.result = "error"
        report.reason = f"internal error: {type(exc).__name__}: {exc}"
        report.reported = False
        report.server = None
        say(traceback.format_exc())
    if report.reason:
        say(f"attempt {report.attempt_id}: {report.result}: {report.reason}")
    report.write()
    return report.exit_status()


def _configuration_error(reason: str) -> int:
    say(reason)
    report = Report(0, "", "error", reason=reason)
    report.write()
    return report.exit_status()


if __name__ == "__main__":
    sys.exit(main())
