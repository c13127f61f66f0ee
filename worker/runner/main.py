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


def main() -> int:
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
