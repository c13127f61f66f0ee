"""``forge-ci workflow validate`` of many files in worker processes: what one process prints.

The workers are real forked processes; the command runs as a real process where its output,
exit status and Ctrl-C handling are what is checked.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from wf_support import MINIMAL

from forge_ci.cli import validating, validating_workers
from forge_ci.cli.validating_workers import check_in_workers, worker_count


def _tree(root: Path, count: int) -> list[str]:
    """``count`` workflow files of every outcome: valid, invalid, noticed, unreadable, not UTF-8."""
    kinds = [
        MINIMAL,
        MINIMAL.replace("runs-on", "runs_on"),
        MINIMAL.replace("on: push", "on: [push, watch]"),
        None,  # missing
        b"on: push\njobs: {a: {runs-on: x, steps: [{run: \xff}]}}\n",
        "[unclosed",
    ]
    paths = []
    for index in range(count):
        kind = kinds[index % len(kinds)]
        path = root / f"w{index:04}.yml"
        if isinstance(kind, bytes):
            path.write_bytes(kind)
        elif kind is not None:
            path.write_text(kind)
        paths.append(str(path))
    paths.append(str(root))  # a directory: "Is a directory"
    return paths


def _run(args: list[str], workers: int) -> subprocess.CompletedProcess[bytes]:
    env = dict(os.environ, FORGE_CI_VALIDATE_WORKERS=str(workers))
    return subprocess.run(
        [sys.executable, "-m", "forge_ci", "workflow", "validate", *args],
        env=env,
        capture_output=True,
        timeout=120,
    )


@pytest.mark.parametrize("mode", [[], ["--json"]])
def test_workers_print_what_one_process_prints(tmp_path: Path, mode: list[str]) -> None:
    paths = _tree(tmp_path, 100)
    serial = _run([*mode, *paths], 1)
    for workers in (2, 3):
        parallel = _run([*mode, *paths], workers)
        assert (parallel.returncode, parallel.stdout, parallel.stderr) == (
            serial.returncode,
            serial.stdout,
            serial.stderr,
        )
    assert serial.returncode == 2
    assert serial.stderr.decode().count("cannot read") == 18  # 17 missing files, 1 directory
    assert b"not a job key" in serial.stdout and b"not valid UTF-8" in serial.stdout


def test_outcomes_come_back_in_order_from_every_worker() -> None:
    outcomes = check_in_workers(50, 3, lambda index: (index, None, {"pid": os.getpid()}))
    assert outcomes is not None
    assert [index for index, _, _ in outcomes] == list(range(50))
    pids = {result["pid"] for _, _, result in outcomes if result is not None}
    assert len(pids) == 3 and os.getpid() in pids
    assert [outcomes[i][2] for i in (0, 3, 6)] == [{"pid": os.getpid()}] * 3


@pytest.mark.parametrize("failure", ["raise", "exit", "kill"])
def test_a_worker_that_fails_means_nothing_from_the_workers(failure: str) -> None:
    parent = os.getpid()

    def check_one(index: int) -> tuple[int, None, dict[str, Any]]:
        if os.getpid() != parent and index == 7:
            if failure == "raise":
                raise RuntimeError("a bug")
            if failure == "exit":
                os._exit(0)  # ends before sending anything
            os.kill(os.getpid(), signal.SIGKILL)
        return index, None, {}

    assert check_in_workers(20, 2, check_one) is None


def test_after_a_failed_worker_every_file_is_checked_serially(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = _tree(tmp_path, 40)
    monkeypatch.setattr(validating_workers, "FILES_PER_WORKER", 1)
    monkeypatch.setenv("FORGE_CI_VALIDATE_WORKERS", "1")
    assert validating.validate_files(False, paths, validating._echo) == 2
    serial = capsys.readouterr()
    parent, check = os.getpid(), validating.check

    def crash_in_a_worker(path: str, data: bytes) -> dict[str, Any]:
        if os.getpid() != parent:
            raise RuntimeError("a bug in a worker")
        return check(path, data)

    monkeypatch.setattr(validating, "check", crash_in_a_worker)
    monkeypatch.setattr(validating_workers, "worker_count", lambda files: 2)
    returned = []

    def spy(*args: Any) -> Any:
        returned.append(check_in_workers(*args))
        return returned[-1]

    monkeypatch.setattr(validating_workers, "check_in_workers", spy)
    assert validating.validate_files(False, paths, validating._echo) == 2
    assert returned == [None]  # the workers were tried and failed
    assert capsys.readouterr() == serial


def test_few_files_one_worker_or_threads_are_checked_in_this_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FORGE_CI_VALIDATE_WORKERS", "4")
    assert worker_count(15) == 1  # fewer than 16 files a worker
    monkeypatch.setattr("threading.active_count", lambda: 1)
    assert worker_count(64) == 4
    assert worker_count(40) == 2
    monkeypatch.setenv("FORGE_CI_VALIDATE_WORKERS", "1")
    assert worker_count(1000) == 1
    monkeypatch.setenv("FORGE_CI_VALIDATE_WORKERS", "4")
    monkeypatch.setattr("threading.active_count", lambda: 2)
    assert worker_count(1000) == 1  # forking beside another thread is not safe


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                status = Path(f"/proc/{entry}/status").read_text()
            except OSError:
                continue
            if f"\nPPid:\t{pid}\n" in status:
                found.append(int(entry))
    return found


def _validating_with_workers(
    tmp_path: Path, text: str, copies: int, **popen: Any
) -> tuple[subprocess.Popen[bytes], list[int]]:
    """``workflow validate`` of ``copies`` copies of one file with 2 workers, once its
    workers run: the process and the workers' pids."""
    (tmp_path / "w.yml").write_text(text)
    process = subprocess.Popen(
        [sys.executable, "-m", "forge_ci", "workflow", "validate", *["w.yml"] * copies],
        cwd=tmp_path,
        env=dict(os.environ, FORGE_CI_VALIDATE_WORKERS="2"),
        **popen,
    )
    deadline = time.monotonic() + 60
    while not (workers := _children(process.pid)):
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.01)
    return process, workers


@pytest.mark.parametrize("to_group", [True, False])
def test_ctrl_c_stops_the_workers_and_reports_aborted(tmp_path: Path, to_group: bool) -> None:
    """Ctrl-C (SIGINT to the whole group), or SIGINT to the command alone: its workers stop."""
    process, _ = _validating_with_workers(
        tmp_path,
        MINIMAL,
        30000,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    if to_group:
        os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C sends
    else:
        os.kill(process.pid, signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert (process.returncode, out, err) == (2, b"", b"\nforge-ci: aborted\n")
    with pytest.raises(ProcessLookupError):
        os.killpg(process.pid, 0)  # no worker is left behind


def test_one_file_does_without_the_workers_module(tmp_path: Path) -> None:
    """Its imports (threading, signal) are a few milliseconds of a one-file validation."""
    (tmp_path / "ci.yml").write_text(MINIMAL)
    probe = (
        "import sys\nfrom forge_ci.cli import main\nmain(['workflow', 'validate', 'ci.yml'])\n"
        "print('forge_ci.cli.validating_workers' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert result.stdout.splitlines()[-1] == "False", result


def test_a_number_that_is_no_number_means_the_processors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("threading.active_count", lambda: 1)
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1})
    for text in ("²", "two", "-3", "0", ""):
        monkeypatch.setenv("FORGE_CI_VALIDATE_WORKERS", text)
        assert worker_count(1000) == 2, text


def test_no_descriptor_left_for_a_worker_means_the_serial_check(tmp_path: Path) -> None:
    """A real EMFILE: the command's own descriptors fit, a worker's pipe does not."""
    import resource

    paths = _tree(tmp_path, 60)
    serial = _run(paths, 1)

    def few_descriptors() -> None:  # room for the first worker's pipe, not the second's
        resource.setrlimit(resource.RLIMIT_NOFILE, (5, 5))

    env = dict(os.environ, FORGE_CI_VALIDATE_WORKERS="3")
    starved = subprocess.run(
        [sys.executable, "-m", "forge_ci", "workflow", "validate", *paths],
        env=env,
        capture_output=True,
        timeout=120,
        preexec_fn=few_descriptors,
    )
    assert (starved.returncode, starved.stdout, starved.stderr) == (
        serial.returncode,
        serial.stdout,
        serial.stderr,
    )
    assert b"Traceback" not in starved.stderr


def test_a_closed_stdout_is_reported_as_one_process_reports_it(tmp_path: Path) -> None:
    paths = _tree(tmp_path, 40)
    results = []
    for workers in ("1", "2"):
        script = 'exec "$@" >&-'
        argv = [sys.executable, "-m", "forge_ci", "workflow", "validate", *paths]
        env = dict(os.environ, FORGE_CI_VALIDATE_WORKERS=workers)
        done = subprocess.run(["sh", "-c", script, "sh", *argv], env=env, capture_output=True)
        results.append((done.returncode, done.stderr))
    assert results[0] == results[1]
    assert b"Traceback" not in results[1][1]


def test_the_workers_end_when_the_command_is_killed(tmp_path: Path) -> None:
    """kill -9 (or timeout's SIGTERM) of the command alone: no worker goes on for nobody."""
    jobs = "".join(
        f"  j{n}:\n    runs-on: x\n    steps:\n      - run: make {n}\n" for n in range(40)
    )
    # Many seconds of checking a worker: it must not outlive the command by as much.
    process, workers = _validating_with_workers(
        tmp_path,
        f"on: push\njobs:\n{jobs}",
        30000,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    process.kill()
    process.wait()
    deadline = time.monotonic() + 5
    while alive := [pid for pid in workers if _running(pid)]:
        assert time.monotonic() < deadline, f"workers {alive} outlived the command"
        time.sleep(0.05)


def _running(pid: int) -> bool:
    """Alive and not a zombie waiting for its parent."""
    try:
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def test_a_worker_keeps_ctrl_c_ignored_when_the_command_ignores_it(tmp_path: Path) -> None:
    """A background job of a script ignores SIGINT; Ctrl-C to the group must not stop its
    workers (and send every file to the serial check)."""
    process, workers = _validating_with_workers(
        tmp_path,
        MINIMAL,
        6000,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    os.killpg(process.pid, signal.SIGINT)
    time.sleep(0.2)
    assert all(_running(pid) for pid in workers)  # still checking
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0 and err == b"" and out.count(b"\n") >= 6000
