"""The hook program as git runs it: installed as pre-receive, answered by a real listener."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from forge_ci import hookwire
from forge_ci.errors import ConfigurationError
from forge_ci.hookchecks import hook_problems
from forge_ci.refs import Update
from forge_ci.settings import load_settings
from hooks.install import check_bash_tcp, find_bash, hook_program, install_hooks
from ssh.hookserver import HookListener

ZERO = "0" * 40
A, B = "a" * 40, "b" * 40


@pytest.fixture
def hooks_dir(tmp_path: Path) -> Path:
    settings = load_settings(env={"FORGE_CI_DATA_DIR": str(tmp_path / "data")})
    install_hooks(settings)
    return settings.hooks_dir


def run_hook(
    hooks_dir: Path, name: str, *args: str, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(hooks_dir / name), *args],
        input=stdin,
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"], **(env or {})},
        timeout=60,
    )


class Recorder:
    """A hook listener that answers with ``answer`` and remembers what it was asked."""

    def __init__(self, answer: hookwire.Answer) -> None:
        self.requests: list[hookwire.Request] = []
        self.answer = answer
        self.listener = HookListener("session-1", self._handle)

    def _handle(self, request: hookwire.Request) -> hookwire.Answer:
        self.requests.append(request)
        return self.answer

    @property
    def env(self) -> dict[str, str]:
        return self.listener.environment()


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    value = Recorder(hookwire.Answer(True))
    with value.listener:
        yield value


# --- installation -------------------------------------------------------------------------------


def test_install_writes_the_bash_program_as_pre_receive_and_retires_the_old_hook(
    hooks_dir: Path,
) -> None:
    assert sorted(p.name for p in hooks_dir.iterdir()) == ["pre-receive"]
    path = hooks_dir / "pre-receive"
    assert stat.S_IMODE(path.stat().st_mode) == 0o755
    text = path.read_text()
    assert text.startswith(f"#!{find_bash()}\n")
    assert "@" not in text  # every placeholder filled in
    for value in (hookwire.ENV_SESSION, hookwire.ENV_PORT, hookwire.ENV_ANSWER_KEY, hookwire.MAGIC):
        assert value in text
    code = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    assert not [line for line in code if "python" in line]  # nothing that takes 15-20 ms to start
    # An earlier version's reference-transaction hook makes the hooks "not ready" (git would
    # start it twice per ref, and nobody answers it) until a reinstall removes it.
    (hooks_dir / "reference-transaction").write_text(text)
    (hooks_dir / "reference-transaction").chmod(0o755)
    assert hook_problems(hooks_dir) == [
        "reference-transaction is left from an earlier forge-ci version"
    ]
    # Reinstalling rewrites in place and leaves no temporary files behind.
    install_hooks(load_settings(env={"FORGE_CI_DATA_DIR": str(hooks_dir.parent)}))
    assert sorted(p.name for p in hooks_dir.iterdir()) == ["pre-receive"]
    assert hook_problems(hooks_dir) == []


def test_a_bash_that_cannot_open_tcp_connections_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="cannot open /dev/tcp connections"):
        check_bash_tcp("/bin/false")
    assert hook_program("/bin/bash").startswith("#!/bin/bash\n")


# --- answers ------------------------------------------------------------------------------------


def test_pre_receive_asks_the_push_and_obeys(hooks_dir: Path, recorder: Recorder) -> None:
    lines = f"{ZERO} {A} refs/heads/main\n{A} {B} refs/tags/v1\n"
    result = run_hook(hooks_dir, "pre-receive", stdin=lines, env=recorder.env)
    assert result.returncode == 0, result.stderr
    [request] = recorder.requests
    assert (request.hook, request.phase, request.session) == ("pre-receive", "-", "session-1")
    assert request.updates == (
        Update(ZERO, A, "refs/heads/main"),
        Update(A, B, "refs/tags/v1"),
    )
    # A last line without its newline is still read.
    run_hook(hooks_dir, "pre-receive", stdin=f"{ZERO} {A} refs/heads/x", env=recorder.env)
    assert recorder.requests[-1].updates == (Update(ZERO, A, "refs/heads/x"),)

    recorder.answer = hookwire.Answer(False, "forge-ci: push refused:\n  because")
    result = run_hook(hooks_dir, "pre-receive", stdin=lines, env=recorder.env)
    assert result.returncode == 1
    assert result.stderr == "forge-ci: push refused:\n  because\n"


def test_pre_receive_hands_over_every_line_of_a_large_push_in_one_request(
    hooks_dir: Path, recorder: Recorder
) -> None:
    # Every update of the push, internal refs included: the parent's policy must see (and
    # refuse) those; what it records is its own business (forge_ci.refs.events_in).
    updates = [Update(ZERO, A, f"refs/heads/b{n:05d}") for n in range(5000)]
    updates.append(Update(ZERO, A, "refs/forge-ci/push-events/1"))
    stdin = "".join(f"{u.old} {u.new} {u.ref}\n" for u in updates)
    result = run_hook(hooks_dir, "pre-receive", stdin=stdin, env=recorder.env)
    assert result.returncode == 0, result.stderr
    [request] = recorder.requests
    assert request.updates == tuple(updates)
    # No updates at all (git does not run the hook then): nothing to ask.
    assert run_hook(hooks_dir, "pre-receive", stdin="", env=recorder.env).returncode == 0
    assert len(recorder.requests) == 1


def test_outside_a_push_session(hooks_dir: Path) -> None:
    line = f"{ZERO} {A} refs/heads/main\n"
    # A push that did not come through forge-ci's SSH server.
    result = run_hook(hooks_dir, "pre-receive", stdin=line)
    assert result.returncode == 1
    assert "pushes are accepted only through forge-ci's SSH server" in result.stderr


def listen(handle: Callable[[socket.socket], None]) -> tuple[socket.socket, threading.Thread]:
    """A listener on a port of its own, answering one connection with ``handle``."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    def serve() -> None:
        connection, _ = listener.accept()
        with connection:
            handle(connection)

    thread = threading.Thread(target=serve)
    thread.start()
    return listener, thread


def read_request(connection: socket.socket) -> None:
    data = b""
    while not hookwire.request_complete(data):
        chunk = connection.recv(65536)
        if not chunk:
            return
        data += chunk


def test_a_missing_silent_or_impostor_parent_refuses(hooks_dir: Path) -> None:
    line = f"{ZERO} {A} refs/heads/main\n"
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        free_port = probe.getsockname()[1]
    env = {
        hookwire.ENV_SESSION: "s",
        hookwire.ENV_PORT: str(free_port),
        hookwire.ENV_ANSWER_KEY: "the-real-key",
    }
    result = run_hook(hooks_dir, "pre-receive", stdin=line, env=env)
    assert result.returncode == 1 and "cannot reach the forge-ci server" in result.stderr
    result = run_hook(hooks_dir, "pre-receive", stdin=line, env={hookwire.ENV_SESSION: "s"})
    assert result.returncode == 1 and "no channel to the forge-ci server" in result.stderr

    # The server dies after reading the request (kill -9 mid-push): no answer, no update.
    listener, thread = listen(read_request)
    env[hookwire.ENV_PORT] = str(listener.getsockname()[1])
    result = run_hook(hooks_dir, "pre-receive", stdin=line, env=env)
    thread.join(10)
    listener.close()
    assert result.returncode == 1 and "ended this push without an answer" in result.stderr

    # Someone else took the dead server's port: without the answer key, "ok" is not an ok.
    def impostor(connection: socket.socket) -> None:
        read_request(connection)
        connection.sendall(b"ok\n")

    listener, thread = listen(impostor)
    env[hookwire.ENV_PORT] = str(listener.getsockname()[1])
    result = run_hook(hooks_dir, "pre-receive", stdin=line, env=env)
    thread.join(10)
    listener.close()
    assert result.returncode == 1 and "did not come from its forge-ci server" in result.stderr


def test_strangers_can_neither_stall_nor_join_a_push(hooks_dir: Path, recorder: Recorder) -> None:
    line = f"{ZERO} {A} refs/heads/main\n"
    with socket.create_connection(("127.0.0.1", recorder.listener.port)) as stranger:
        stranger.sendall(b"forge-ci-hook 1\n")  # and never the rest
        started = time.monotonic()
        result = run_hook(hooks_dir, "pre-receive", stdin=line, env=recorder.env)
        assert result.returncode == 0, result.stderr
        assert time.monotonic() - started < 10
    # Without this push's session id nothing reaches the handler.
    stranger_env = {**recorder.env, hookwire.ENV_SESSION: "guessed"}
    result = run_hook(hooks_dir, "pre-receive", stdin=line, env=stranger_env)
    assert result.returncode == 1 and "belongs to another push" in result.stderr
    assert len(recorder.requests) == 1


def test_unknown_names_and_malformed_input_are_refused(hooks_dir: Path, recorder: Recorder) -> None:
    for name in ("post-receive", "reference-transaction"):
        (hooks_dir / name).symlink_to(hooks_dir / "pre-receive")
        result = run_hook(hooks_dir, name, "prepared", env=recorder.env)
        assert result.returncode == 1 and f"'{name}' is not a forge-ci hook" in result.stderr
    result = run_hook(hooks_dir, "pre-receive", stdin="garbage\n", env=recorder.env)
    assert result.returncode == 1 and "update line 1 is not" in result.stderr  # the parent's word
    assert recorder.requests == []


def test_an_operators_git_maintenance_passes_through_the_hooks(
    hooks_dir: Path, tmp_path: Path
) -> None:
    bare = tmp_path / "repo.git"
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "a",
        "GIT_AUTHOR_EMAIL": "a@x",
        "GIT_COMMITTER_NAME": "a",
        "GIT_COMMITTER_EMAIL": "a@x",
    }

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=bare, env=env, capture_output=True, text=True, check=True
        ).stdout.strip()

    subprocess.run(["git", "init", "-q", "--bare", str(bare)], env=env, check=True)
    git("config", "core.hooksPath", str(hooks_dir))
    tree = git("write-tree")
    commit = git("commit-tree", tree, "-m", "x")
    git("update-ref", "refs/heads/main", commit)
    git("pack-refs", "--all")
    git("update-ref", "-d", "refs/heads/main")
    git("gc", "-q")
