"""What one SSH connection may do: paramiko's ``ServerInterface``, answered conservatively.

- Authentication: public keys only, for the login name ``git``; the key (looked up in the
  database) identifies the user. No passwords, no keyboard-interactive, no ``none``.
- One ``session`` channel per connection and one request on it: ``exec`` of a git command or
  of an SSH-side command (``ssh.console``), or a shell request, which is answered with a
  greeting and the command help, and exit status 1 (no shell ever runs).
- Refused: pty, X11, agent forwarding, subsystems (sftp), port forwarding in either direction,
  every global request, every environment variable except ``GIT_PROTOCOL=version=N`` (which
  lets git use protocol v2).

paramiko calls these methods on its transport thread; they only record what was asked and
never block on anything slower than one indexed query.
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass

import paramiko
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from forge_ci.accounts import user_for_key_blob
from forge_ci.db import Database
from forge_ci.sshkeys import sha256_fingerprint

log = logging.getLogger(__name__)

LOGIN_NAME = "git"
# paramiko has no type information; its answer codes, typed once.
AUTH_FAILED: int = paramiko.AUTH_FAILED
AUTH_SUCCESSFUL: int = paramiko.AUTH_SUCCESSFUL
OPEN_SUCCEEDED: int = paramiko.OPEN_SUCCEEDED
OPEN_PROHIBITED: int = paramiko.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED
_GIT_PROTOCOL = re.compile(rb"version=[0-2]")


@dataclass(frozen=True)
class Pusher:
    """The authenticated user of a connection."""

    user_id: int
    name: str
    #: The SHA256 fingerprint of the key that logged in (``whoami``; ``key remove`` refuses it).
    fingerprint: str = ""


class GitServerInterface(paramiko.ServerInterface):  # type: ignore[misc]  # untyped base
    """The policy of one connection, and what its client asked for."""

    def __init__(self, database: Database) -> None:
        self.database = database
        self.pusher: Pusher | None = None
        self.database_unavailable = False
        self.command: bytes | None = None
        self.wants_shell = False
        self.git_protocol: str | None = None
        #: Set once the client asked for a command or a shell.
        self.requested = threading.Event()
        self._channel_opened = False

    # --- authentication --------------------------------------------------------------------

    def get_banner(self) -> tuple[str | None, str | None]:
        # Shown before authentication, and the only way to tell a client *why* its key cannot
        # be checked: once the database is unreachable every key would fail as "Permission
        # denied (publickey)", which sends people hunting for a key problem.
        try:
            with self.database.session(read_only=True) as session:
                # A statement, not only a checkout: the pool hands out a connection used a
                # moment ago without asking the server (forge_ci.db, PING_AFTER_IDLE_S).
                session.execute(text("SELECT 1"))
        except SQLAlchemyError as exc:
            log.warning("database unavailable during SSH authentication: %s", exc)
            self.database_unavailable = True
            return (
                "forge-ci: the database is unavailable, so no key can be checked; "
                "nothing was changed, try again later\r\n",
                "en-US",
            )
        return (None, None)

    def get_allowed_auths(self, username: str) -> str:
        return "publickey"

    def check_auth_none(self, username: str) -> int:
        return AUTH_FAILED

    def check_auth_password(self, username: str, password: str) -> int:
        return AUTH_FAILED

    def check_auth_interactive(self, username: str, submethods: str) -> int:
        return AUTH_FAILED

    def check_auth_publickey(self, username: str, key: paramiko.PKey) -> int:
        # paramiko asks about a key before the client signs (the "is this key acceptable?"
        # probe) and again right before it accepts the signed request; both calls happen on
        # the transport thread in order, so the last accepted key is the one that logs in.
        if username != LOGIN_NAME:
            return AUTH_FAILED
        try:
            with self.database.session(read_only=True) as session:
                user = user_for_key_blob(session, key.asbytes())
                found = (
                    Pusher(user.id, user.name, sha256_fingerprint(key.asbytes()))
                    if user is not None
                    else None
                )
        except SQLAlchemyError as exc:
            log.warning("database unavailable during SSH authentication: %s", exc)
            self.database_unavailable = True
            return AUTH_FAILED
        if found is None:
            return AUTH_FAILED
        self.pusher = found
        return AUTH_SUCCESSFUL

    # --- channels and requests -------------------------------------------------------------

    def check_channel_request(self, kind: str, chanid: int) -> int:
        if kind != "session" or self._channel_opened:
            return OPEN_PROHIBITED
        self._channel_opened = True
        return OPEN_SUCCEEDED

    def check_channel_exec_request(self, channel: paramiko.Channel, command: bytes) -> bool:
        if self.requested.is_set():
            return False
        self.command = bytes(command)
        self.requested.set()
        return True

    def check_channel_shell_request(self, channel: paramiko.Channel) -> bool:
        # Accepted only to say who the key belongs to (as `ssh -T git@host` users expect);
        # the connection then ends with exit status 1 without running anything.
        if self.requested.is_set():
            return False
        self.wants_shell = True
        self.requested.set()
        return True

    def check_channel_env_request(
        self, channel: paramiko.Channel, name: bytes, value: bytes
    ) -> bool:
        # paramiko hands over both as raw bytes from the wire.
        if bytes(name) == b"GIT_PROTOCOL" and _GIT_PROTOCOL.fullmatch(bytes(value)):
            self.git_protocol = bytes(value).decode()
            return True
        return False

    def check_channel_pty_request(
        self,
        channel: paramiko.Channel,
        term: bytes,
        width: int,
        height: int,
        pixelwidth: int,
        pixelheight: int,
        modes: bytes,
    ) -> bool:
        return False

    def check_channel_subsystem_request(self, channel: paramiko.Channel, name: str) -> bool:
        return False

    def check_channel_x11_request(
        self,
        channel: paramiko.Channel,
        single_connection: bool,
        auth_protocol: str,
        auth_cookie: bytes,
        screen_number: int,
    ) -> bool:
        return False

    def check_channel_forward_agent_request(self, channel: paramiko.Channel) -> bool:
        return False

    def check_channel_direct_tcpip_request(
        self, chanid: int, origin: tuple[str, int], destination: tuple[str, int]
    ) -> int:
        return OPEN_PROHIBITED

    def check_port_forward_request(self, address: str, port: int) -> int | bool:
        return False

    def check_global_request(self, kind: str, msg: paramiko.Message) -> bool:
        return False
