"""Whether the client of a request is still there: for claims that wait (long polls).

A provider killed while its claim waits closes its connection (the kernel does, even for
``kill -9``), but the server only learns of it when it reads or writes. A waiting claim asks
before each try, so work is never assigned to a connection that is gone (its job would wait
out the start window first). The check peeks at the socket without consuming anything: end of
stream or a reset means gone; pending bytes (a pipelined request) or nothing mean still there.
"""

from __future__ import annotations

import select
import socket
from collections.abc import Callable
from typing import Any

from web.runner_api.bodies import connection_socket


def _always() -> bool:
    return True


def client_connected(environ: dict[str, Any]) -> Callable[[], bool]:
    """A check for the request's connection; always True where the server hides its socket
    or it cannot be peeked at (TLS)."""
    sock = connection_socket(environ)
    if sock is None or not hasattr(socket, "MSG_PEEK"):
        return _always

    def connected() -> bool:
        try:
            readable, _, _ = select.select([sock], [], [], 0)
            if not readable:
                return True
            return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
        except (BlockingIOError, InterruptedError):
            return True
        except ValueError:  # a TLS socket refuses flags: cannot tell, so assume it is there
            return True
        except OSError:  # reset, or already closed
            return False

    return connected
