"""``forge-ci ssh``: the listening socket, the connection cap and the server's lifetime.

Each accepted connection runs on its own thread (``ssh.connection``). At most
``ssh_max_connections`` run at once, and connections that have not authenticated yet are
limited apart, in all and per address (``ssh.admission``: OpenSSH's ``MaxStartups``); one
refused is closed immediately, before any SSH traffic, so a flood costs no key exchanges.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from pathlib import Path

import paramiko

from forge_ci.db import Database
from forge_ci.errors import ConfigurationError
from forge_ci.hookchecks import hook_problems
from forge_ci.queueing import JobQueue
from forge_ci.settings import Settings
from ssh.admission import Admission, Limits, Ticket
from ssh.connection import serve_connection
from ssh.console.slots import CommandSlots
from ssh.context import ServerContext

log = logging.getLogger(__name__)


def load_host_key(path: Path) -> paramiko.PKey:
    try:
        return paramiko.Ed25519Key.from_private_key_file(str(path))
    except FileNotFoundError:
        raise ConfigurationError(
            f"SSH host key {path} does not exist; run `forge-ci init`"
        ) from None
    except (paramiko.SSHException, OSError, ValueError) as exc:
        raise ConfigurationError(f"SSH host key {path} cannot be read: {exc}") from None


class SshServer:
    """A bound SSH server; :meth:`serve_forever` until :meth:`close`."""

    def __init__(
        self,
        settings: Settings,
        database: Database | None = None,
        *,
        unhooked: frozenset[str] = frozenset(),
    ) -> None:
        """``unhooked``: see :attr:`ssh.context.ServerContext.unhooked` (benchmark only)."""
        self.settings = settings
        self.host_key = load_host_key(settings.host_key_path)
        self._owns_database = database is None
        self.database = database or Database(settings)
        self.database.require_current_schema()
        problems = hook_problems(settings.hooks_dir)
        if problems:
            log.warning(
                "git hooks are not ready (%s): pushes will be refused until an operator runs "
                "`forge-ci hooks install`",
                "; ".join(problems),
            )
        queue = JobQueue(settings)
        self.context = ServerContext(
            settings=settings,
            database=self.database,
            queue=queue,
            unhooked=unhooked,
            command_slots=CommandSlots(settings.ssh_commands_per_user),
        )
        # Import RQ and make the Redis client now (no connection yet), so that the first push
        # does not pay for the imports.
        queue.prepare()
        host, port = settings.ssh_listen
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._listener = socket.socket(family, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((host, port))
        self._listener.listen(128)
        self.admission = Admission(Limits.for_total(settings.ssh_max_connections))
        self._threads: set[threading.Thread] = set()
        self._transports: set[paramiko.Transport] = set()
        self._closing = threading.Event()

    @property
    def address(self) -> tuple[str, int]:
        """The bound host and port (the real port when the settings asked for port 0)."""
        host, port = self._listener.getsockname()[:2]
        return str(host), int(port)

    def serve_forever(self) -> None:
        """Accept connections until :meth:`close` is called."""
        while not self._closing.is_set():
            try:
                sock, peer = self._listener.accept()
            except OSError:
                if self._closing.is_set():
                    return
                raise
            ticket = self.admission.admit(str(peer[0]), sock)
            if ticket is None:  # the admission logged why
                sock.close()
                continue
            thread = threading.Thread(
                target=self._run,
                args=(sock, ticket),
                name=f"ssh-{peer[0]}:{peer[1]}",
                daemon=True,
            )
            self._threads.add(thread)
            thread.start()

    def _run(self, sock: socket.socket, ticket: Ticket) -> None:
        try:
            sock.settimeout(None)
            serve_connection(
                self.context, sock, self.host_key, self._transports, ticket.authenticated
            )
        finally:
            ticket.release()
            self._threads.discard(threading.current_thread())

    def stop_accepting(self) -> None:
        """Make :meth:`serve_forever` return (safe to call from a signal handler)."""
        self._closing.set()
        try:
            # Wakes the thread blocked in accept() (closing alone does not, on Linux).
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def close(self, grace: float = 10.0) -> None:
        """Stop accepting, give open connections ``grace`` seconds to finish, then end them."""
        self.stop_accepting()
        self._listener.close()
        deadline = time.monotonic() + grace
        for thread in list(self._threads):
            thread.join(max(deadline - time.monotonic(), 0))
        for transport in list(self._transports):
            transport.close()
        for thread in list(self._threads):
            thread.join(5)
        self.context.queue.close()
        if self._owns_database:
            self.database.dispose()


def serve(settings: Settings, *, unhooked: frozenset[str] = frozenset()) -> None:
    """Run the server until SIGTERM or SIGINT (``forge-ci ssh``); finish open pushes first.

    ``forge-ci ssh`` passes no ``unhooked``: every push of a deployed server needs its hooks.
    """
    import signal

    logging.getLogger("paramiko").setLevel(logging.WARNING)
    server = SshServer(settings, unhooked=unhooked)
    host, port = server.address
    # The first line on stdout, so that scripts (and tests) can find a port chosen by the OS.
    print(f"forge-ci ssh listening on {host}:{port}", flush=True)

    def stop(signum: int, frame: object) -> None:
        server.stop_accepting()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    server.serve_forever()
    server.close()
