"""The hook programs as git runs them: installed launchers, fast imports, and each answer."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from forge_ci import hookwire
from forge_ci.errors import ConfigurationError
from forge_ci.settings import load_settings
from hooks.install import code_root, hook_script, install_hooks
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

    def __init__(self, directory: Path, answer: hookwire.Answer) -> None:
        self.requests: list[hookwire.Request] = []
        self.answer = answer
        self.listener = HookListener(directory, "session-1", self._handle)

    def _handle(self, request: hookwire.Request) -> hookwire.Answer:
        self.requests.append(request)
        return self.answer

    @property
    def env(self) -> dict[str, str]:
        return {
            hookwire.ENV_SESSION: "session-1",
            hookwire.ENV_SOCKET: str(self.listener.path),
        }


@pytest.fixture
def recorder(tmp_path: Path) -> Iterator[Recorder]:
    directory = tmp_path / "s"
    directory.mkdir(mode=0o700)
    value = Recorder(directory, hookwire.Answer(True))
    with value.listener:
        yield value


# --- installation -------------------------------------------------------------------------------


def test_install_writes_both_launchers(hooks_dir: Path) -> None:
    assert sorted(p.name for p in hooks_dir.iterdir()) == ["pre-receive", "reference-transaction"]
    for path in hooks_dir.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o755
        text = path.read_text()
        assert text.startswith(f"#!{sys.executable} -SI\n")
        assert f"sys.path.insert(0, {str(code_root())!r})" in text
    # Reinstalling rewrites in place and leaves no temporary files behind.
    install_hooks(load_settings(env={"FORGE_CI_DATA_DIR": str(hooks_dir.parent)}))
    assert sorted(p.name for p in hooks_dir.iterdir()) == ["pre-receive", "reference-transaction"]


def test_a_python_path_that_cannot_be_a_shebang_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="no spaces"):
        hook_script("/opt/my python/bin/python", Path("/x"))
    with pytest.raises(ConfigurationError, match="#! line"):
        hook_script("/" + "p" * 300, Path("/x"))


def test_hooks_import_nothing_heavy(hooks_dir: Path, recorder: Recorder) -> None:
    """SQLAlchemy alone would cost ~100 ms per hook; os, socket, typing, dataclasses several."""
    for name, args in (("pre-receive", []), ("reference-transaction", ["prepared"])):
        result = subprocess.run(
            [sys.executable, "-SI", "-X", "importtime", str(hooks_dir / name), *args],
            input=f"{ZERO} {A} refs/heads/main\n",
            capture_output=True,
            text=True,
            env={"PATH": os.environ["PATH"], **recorder.env},
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        imported = {
            line.rsplit("|", 1)[1].strip()
            for line in result.stderr.splitlines()
            if line.startswith("import time:") and "|" in line
        }
        assert {"hooks.run", "forge_ci.hookwire", "_socket"} <= imported
        heavy = {"sqlalchemy", "socket", "os", "typing", "dataclasses", "paramiko", "pygit2"}
        assert not (imported & heavy), imported & heavy


# --- answers ------------------------------------------------------------------------------------


def test_pre_receive_asks_the_push_and_obeys(hooks_dir: Path, recorder: Recorder) -> None:
    lines = f"{ZERO} {A} refs/heads/main\n{A} {B} refs/tags/v1\n"
    result = run_hook(hooks_dir, "pre-receive", stdin=lines, env=recorder.env)
    assert result.returncode == 0, result.stderr
    [request] = recorder.requests
    assert (request.hook, request.phase, request.session) == ("pre-receive", "-", "session-1")
    assert request.updates == (
        hookwire.Update(ZERO, A, "refs/heads/main"),
        hookwire.Update(A, B, "refs/tags/v1"),
    )
    recorder.answer = hookwire.Answer(False, "forge-ci: push refused:\n  because")
    result = run_hook(hooks_dir, "pre-receive", stdin=lines, env=recorder.env)
    assert result.returncode == 1
    assert result.stderr == "forge-ci: push refused:\n  because\n"


def test_reference_transaction_reports_real_updates_of_each_phase(
    hooks_dir: Path, recorder: Recorder
) -> None:
    lines = (
        f"{ZERO} {A} refs/heads/main\n"
        f"{ZERO} {A} HEAD\n"  # git's reflog-only mirror of the branch HEAD points to
        f"{ZERO} {ZERO} refs/heads/gone\n"  # git's no-op packed-refs deletion
        f"{ZERO} {A} refs/forge-ci/push-events/1\n"
    )
    for phase in ("prepared", "committed", "aborted"):
        result = run_hook(hooks_dir, "reference-transaction", phase, stdin=lines, env=recorder.env)
        assert result.returncode == 0, result.stderr
    assert [(r.phase, r.updates) for r in recorder.requests] == [
        (phase, (hookwire.Update(ZERO, A, "refs/heads/main"),))
        for phase in ("prepared", "committed", "aborted")
    ]
    recorder.answer = hookwire.Answer(False, "forge-ci: cannot record")
    result = run_hook(hooks_dir, "reference-transaction", "prepared", stdin=lines, env=recorder.env)
    assert (result.returncode, result.stderr) == (1, "forge-ci: cannot record\n")


def test_what_is_not_a_recorded_update_never_reaches_the_parent(
    hooks_dir: Path, recorder: Recorder
) -> None:
    nothing = f"{ZERO} {A} HEAD\n{ZERO} {ZERO} refs/heads/x\n{ZERO} {A} refs/forge-ci/p/1\n"
    for args, stdin in (
        (["preparing"], f"{ZERO} {A} refs/heads/main\n"),  # git 2.46+: before any lock
        (["prepared"], nothing),
        (["prepared"], ""),
    ):
        result = run_hook(hooks_dir, "reference-transaction", *args, stdin=stdin, env=recorder.env)
        assert result.returncode == 0, result.stderr
    assert recorder.requests == []


def test_outside_a_push_session(hooks_dir: Path) -> None:
    line = f"{ZERO} {A} refs/heads/main\n"
    # An operator's gc or update-ref: nothing to record, nothing refused.
    for phase in ("prepared", "committed", "aborted"):
        assert run_hook(hooks_dir, "reference-transaction", phase, stdin=line).returncode == 0
    # A push that did not come through forge-ci's SSH server.
    result = run_hook(hooks_dir, "pre-receive", stdin=line)
    assert result.returncode == 1
    assert "pushes are accepted only through forge-ci's SSH server" in result.stderr


def test_a_missing_or_silent_parent_refuses(hooks_dir: Path, tmp_path: Path) -> None:
    line = f"{ZERO} {A} refs/heads/main\n"
    env = {hookwire.ENV_SESSION: "s", hookwire.ENV_SOCKET: str(tmp_path / "gone.sock")}
    result = run_hook(hooks_dir, "reference-transaction", "prepared", stdin=line, env=env)
    assert result.returncode == 1 and "cannot reach the forge-ci server" in result.stderr

    # A parent that dies after reading the request (kill -9 mid-push) gives no answer.
    path = tmp_path / "silent.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)

    def hang_up() -> None:
        connection, _ = listener.accept()
        while connection.recv(65536):
            pass
        connection.close()

    thread = threading.Thread(target=hang_up)
    thread.start()
    env[hookwire.ENV_SOCKET] = str(path)
    result = run_hook(hooks_dir, "reference-transaction", "prepared", stdin=line, env=env)
    thread.join(10)
    listener.close()
    assert result.returncode == 1 and "ended this push without an answer" in result.stderr


def test_a_hook_of_another_push_is_refused(hooks_dir: Path, recorder: Recorder) -> None:
    env = {**recorder.env, hookwire.ENV_SESSION: "someone-else"}
    result = run_hook(hooks_dir, "pre-receive", stdin=f"{ZERO} {A} refs/heads/main\n", env=env)
    assert result.returncode == 1 and "belongs to another push" in result.stderr
    assert recorder.requests == []


def test_unknown_names_and_malformed_input_are_refused(hooks_dir: Path, recorder: Recorder) -> None:
    other = hooks_dir / "post-receive"
    other.symlink_to(hooks_dir / "pre-receive")
    result = run_hook(hooks_dir, "post-receive", env=recorder.env)
    assert result.returncode == 1 and "'post-receive' is not a forge-ci hook" in result.stderr
    result = run_hook(hooks_dir, "pre-receive", stdin="garbage\n", env=recorder.env)
    assert result.returncode == 1 and "update line 1 is not" in result.stderr
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
