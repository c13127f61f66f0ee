"""One SSH connection, from handshake to exit status.

    handshake -> public-key auth (within ssh_auth_timeout) -> one session channel
      -> one request: exec "git-upload-pack|git-receive-pack 'owner/name.git'", exec of an
         SSH-side command ("run list alice/demo": ssh.console), or a shell request, answered
         with a greeting and the commands' help
      -> git: authorize with the core (read for upload-pack, write for receive-pack),
         run git, pump the channel; a command: ssh.console.session
      -> send the exit status, close

A refusal is one ``forge-ci: ...`` line on stderr and exit status 2 (as the CLI does); git then
prints its own "Could not read from remote repository".
"""

from __future__ import annotations

import logging
import socket
import subprocess
import time
from collections.abc import Callable

import paramiko

from forge_ci.authz import Actor
from forge_ci.db import unavailable_on_failure
from forge_ci.errors import ForgeCIError, NotFound
from forge_ci.gitstore import repository_path
from forge_ci.refs import INTERNAL_REF_PREFIX
from forge_ci.repos import find_repository
from ssh.auth import GitServerInterface, Pusher
from ssh.commands import MAX_COMMAND_BYTES, is_git_command, parse_command
from ssh.console.parser import split_words
from ssh.console.session import run_console_command, shell_greeting
from ssh.context import ServerContext
from ssh.pump import pump
from ssh.push import run_receive_pack

log = logging.getLogger(__name__)

EXIT_REFUSED = 2
EXIT_INTERNAL_ERROR = 1
#: How long a client may take to send its exec request once its channel is open.
REQUEST_TIMEOUT = 30.0
#: How long to wait for the client to disconnect after the exit status.
CLIENT_CLOSE_WAIT = 5.0


def serve_connection(
    ctx: ServerContext,
    sock: socket.socket,
    host_key: paramiko.PKey,
    transports: set[paramiko.Transport],
    authenticated: Callable[[], None] = lambda: None,
) -> None:
    """Run one connection to its end (called on its own thread; never raises).

    ``authenticated()`` is called once the client has proved a key and opened its channel.
    """
    transport = paramiko.Transport(sock)
    transports.add(transport)
    try:
        _serve(ctx, transport, host_key, authenticated)
    except Exception:
        log.exception("SSH connection failed")
    finally:
        transport.close()
        transports.discard(transport)


def _serve(
    ctx: ServerContext,
    transport: paramiko.Transport,
    host_key: paramiko.PKey,
    authenticated: Callable[[], None],
) -> None:
    settings = ctx.settings
    transport.add_server_key(host_key)
    transport.banner_timeout = settings.ssh_auth_timeout
    transport.handshake_timeout = settings.ssh_auth_timeout
    interface = GitServerInterface(ctx.database)
    started = time.monotonic()
    try:
        transport.start_server(server=interface)
    except (paramiko.SSHException, EOFError, OSError) as exc:
        log.info("SSH handshake failed: %s", exc)
        return
    # Handshake, authentication and opening the channel share one deadline: a client that
    # neither proves a key nor asks for anything is dropped.
    remaining = started + settings.ssh_auth_timeout - time.monotonic()
    channel = transport.accept(timeout=max(remaining, 0.1))
    if channel is None or interface.pusher is None:
        if not transport.is_authenticated():
            log.info("SSH client did not authenticate within %.0f s", settings.ssh_auth_timeout)
        return
    authenticated()
    deadline = time.monotonic() + REQUEST_TIMEOUT
    while not interface.requested.wait(0.1):
        if channel.closed or not transport.is_active() or time.monotonic() > deadline:
            channel.close()
            return
    reply = Reply(channel)
    run_request(ctx, interface, channel, interface.pusher, reply)
    reply.finish(EXIT_INTERNAL_ERROR)  # a no-op unless a path above forgot to finish
    # Let the client hang up first: closing under a client that is still sending (its channel
    # close, or pack data a refused push had in flight) makes it report a connection reset.
    transport.join(CLIENT_CLOSE_WAIT)


class Reply:
    """Ends the client's side of a request exactly once: EOF, exit status, close."""

    def __init__(self, channel: paramiko.Channel) -> None:
        self.channel = channel
        self.finished = False

    def finish(self, status: int) -> None:
        if self.finished:
            return
        self.finished = True
        # The order OpenSSH's own server uses.
        try:
            self.channel.shutdown_write()
            self.channel.send_exit_status(status)
        except (OSError, EOFError, paramiko.SSHException):
            pass
        finally:
            self.channel.close()

    def refuse(self, message: str, status: int = EXIT_REFUSED) -> None:
        _stderr(self.channel, message + "\n")
        self.finish(status)


def run_request(
    ctx: ServerContext,
    interface: GitServerInterface,
    channel: paramiko.Channel,
    pusher: Pusher,
    reply: Reply,
) -> None:
    """Carry out the client's one request; refusals become one stderr line and exit status 2."""
    if interface.wants_shell:
        reply.refuse("\n".join(shell_greeting(pusher)), status=1)
        return
    assert interface.command is not None
    try:
        words = split_words(interface.command, MAX_COMMAND_BYTES)
        if not is_git_command(words):
            reply.finish(run_console_command(ctx, channel, pusher, words))
            return
        command = parse_command(interface.command)
        actor = Actor(user_id=pusher.user_id, name=pusher.name)
        with unavailable_on_failure(), ctx.database.session(read_only=True) as session:
            repository = find_repository(session, actor, command.full_name, command.needed_role)
            repository_id, full_name = repository.id, repository.full_name
        log.info("%s: %s %s", pusher.name, command.service, full_name)
        if command.service == "git-receive-pack":
            run_receive_pack(
                ctx,
                channel,
                pusher,
                repository_id,
                full_name,
                interface.git_protocol,
                reply.finish,
            )
        else:
            reply.finish(_run_upload_pack(ctx, channel, full_name, interface.git_protocol))
    except ForgeCIError as exc:
        if reply.finished:  # refused after the client had its answer: only the log can know
            log.warning("after %s's request: %s", pusher.name, exc.message)
        else:
            reply.refuse(f"forge-ci: {exc.message}")
    except Exception:
        log.exception("request of %s failed", pusher.name)
        if not reply.finished:
            reply.refuse(
                "forge-ci: internal error; the request was not carried out", EXIT_INTERNAL_ERROR
            )


def _run_upload_pack(
    ctx: ServerContext, channel: paramiko.Channel, full_name: str, git_protocol: str | None
) -> int:
    """Serve a fetch in protocol v0/v1 only, whatever the client asked for.

    Protocol v2's upload-pack accepts a ``want`` of any object the repository holds, advertised
    or not, so commits that were force-pushed away but stay pinned under the hidden
    ``refs/forge-ci/*`` (runs need their sources) were fetchable by SHA (issue #14, finding
    6). v0 and v1 accept only wants of advertised tips when the ``uploadpack.allow*SHA1InWant``
    settings are off, and those are forced off here, over any repository config. The client's
    ``GIT_PROTOCOL`` is not passed on: git clients fall back to v0 by themselves.
    """
    owner, name = full_name.split("/", 1)
    path = repository_path(ctx.settings.repositories_dir, owner, name)
    if not path.is_dir():  # git's own message would show the server's paths
        raise NotFound(f"repository {full_name} not found")
    if git_protocol and git_protocol != "version=1":
        log.info(
            "serving a fetch of %s in protocol v0 (the client asked %s)", full_name, git_protocol
        )
    env = ctx.git_environment()
    if git_protocol == "version=1":
        env["GIT_PROTOCOL"] = git_protocol
    hidden = INTERNAL_REF_PREFIX.rstrip("/")
    command = ["git", "-c", f"transfer.hideRefs={hidden}"]
    for setting in ("allowTipSHA1InWant", "allowReachableSHA1InWant", "allowAnySHA1InWant"):
        command += ["-c", f"uploadpack.{setting}=false"]
    process = subprocess.Popen(
        [*command, "upload-pack", "--strict", str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    return pump(channel, process)


def _stderr(channel: paramiko.Channel, text: str) -> None:
    try:
        channel.sendall_stderr(text.encode())
    except (OSError, EOFError, paramiko.SSHException):
        pass
