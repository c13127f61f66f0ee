"""Per-attempt socket directories: a job's only door to the runner API.

The provider serves the runner API for one attempt on a Unix socket in a directory of its own,
and ``DockerDriver.start_job`` mounts that directory read-only at /run/forge-ci in the attempt's
container (which has no network by default):

    <parent>/               0700, the provider's; host users other than it see nothing below
      <attempt_id>/         mounted at /run/forge-ci; holds nothing but sockets
        api.sock            bound by the provider; the job connects as UID/GID 10001
        egress.sock         the egress proxy (when the provider's policy allows egress)

The job runs as UID/GID 10001, so it needs search permission on the directory and write
permission on the socket. Who grants them depends on who the provider runs as:

    provider is 10001 (production)   directory 0700, socket 0600: same user
    provider is root (development)   group 10001, directory 0750, socket 0660
    any other user                   directory 0711, socket 0666, private only through <parent>
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from forge_ci.errors import Conflict, InvalidInput
from forge_ci.protocol import RUNNER_EGRESS_SOCKET_NAME
from worker.provider.jobspec import API_SOCKET_NAME, JOB_GID, JOB_UID, check_id


def make_socket_dir(parent: Path, attempt_id: str) -> Path:
    """Create the fresh socket directory of one attempt under ``parent`` and return it."""
    check_id(attempt_id, "attempt id")  # it becomes a path component
    parent = Path(os.path.abspath(parent))
    parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = os.lstat(parent)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        raise InvalidInput(f"socket parent {parent} must be a directory owned by the provider")
    if info.st_mode & 0o077:
        raise InvalidInput(
            f"socket parent {parent} must be private to the provider (mode 0700), not"
            f" {stat.S_IMODE(info.st_mode):04o}"
        )
    path = parent / attempt_id
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        raise Conflict(f"socket directory {path} already exists; remove it first") from None
    _grant(path, same_user=0o700, group=0o750, others=0o711)
    return path


def api_socket_path(socket_dir: Path) -> Path:
    """Where the provider binds the runner API socket inside ``socket_dir``."""
    return socket_dir / API_SOCKET_NAME


def egress_socket_path(socket_dir: Path) -> Path:
    """Where the provider binds the egress proxy's socket inside ``socket_dir``."""
    return socket_dir / RUNNER_EGRESS_SOCKET_NAME


def allow_job_connect(socket_path: Path) -> None:
    """Let the job's user connect to a socket the provider has just bound."""
    if not stat.S_ISSOCK(os.lstat(socket_path).st_mode):
        raise InvalidInput(f"{socket_path} is not a Unix socket")
    _grant(socket_path, same_user=0o600, group=0o660, others=0o666)


def remove_socket_dir(path: Path) -> None:
    """Remove a socket directory and the sockets in it. Already gone is fine."""
    try:
        entries = list(os.scandir(path))
    except FileNotFoundError:
        return
    for entry in entries:
        if not stat.S_ISSOCK(entry.stat(follow_symlinks=False).st_mode):
            raise InvalidInput(f"socket directory {path} holds {entry.name!r}, which is no socket")
        os.unlink(entry.path)
    os.rmdir(path)


def _grant(path: Path, *, same_user: int, group: int, others: int) -> None:
    if os.geteuid() == JOB_UID:
        os.chmod(path, same_user)
        return
    try:
        os.chown(path, -1, JOB_GID)
    except PermissionError:
        os.chmod(path, others)
    else:
        os.chmod(path, group)
