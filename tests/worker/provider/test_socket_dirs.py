"""Per-attempt socket directories: private on the host, reachable by the job's user only."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest

from forge_ci.errors import Conflict, InvalidInput
from worker.provider.jobspec import JOB_GID, JOB_UID
from worker.provider.socket_dirs import (
    allow_job_connect,
    api_socket_path,
    make_socket_dir,
    remove_socket_dir,
)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_socket_dir_is_private_and_open_to_the_job_user_only(tmp_path: Path) -> None:
    parent = tmp_path / "run"
    path = make_socket_dir(parent, "17")
    assert path == parent / "17"
    assert mode(parent) == 0o700
    info = os.lstat(path)
    assert info.st_uid == os.geteuid()
    if os.geteuid() == JOB_UID:
        assert mode(path) == 0o700
    elif os.geteuid() == 0:
        assert (info.st_gid, mode(path)) == (JOB_GID, 0o750)
    else:
        assert mode(path) == 0o711

    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(api_socket_path(path)))
        allow_job_connect(api_socket_path(path))
        sock_info = os.lstat(api_socket_path(path))
        if os.geteuid() == 0:
            assert (sock_info.st_gid, mode(api_socket_path(path))) == (JOB_GID, 0o660)
        remove_socket_dir(path)
    assert not path.exists()
    remove_socket_dir(path)  # already gone is fine


def test_socket_dir_refusals(tmp_path: Path) -> None:
    parent = tmp_path / "run"
    make_socket_dir(parent, "1")
    with pytest.raises(Conflict, match="already exists"):
        make_socket_dir(parent, "1")
    with pytest.raises(InvalidInput, match="attempt id"):
        make_socket_dir(parent, "../1")
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    os.chmod(shared, 0o755)
    with pytest.raises(InvalidInput, match="private to the provider"):
        make_socket_dir(shared, "1")
    (parent / "1" / "note.txt").write_text("x")
    with pytest.raises(InvalidInput, match="no socket"):
        remove_socket_dir(parent / "1")
    with pytest.raises(InvalidInput, match="not a Unix socket"):
        allow_job_connect(parent / "1" / "note.txt")
