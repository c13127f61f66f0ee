"""Serving one of an attempt's Unix sockets: a thread per connection, a bounded number at once.

The relay (``api.sock``) and the egress proxy (``egress.sock``) both bind a socket in the
attempt's directory, let the job's user connect, and serve until the attempt ends. This is
their common part; each says what a connection gets (``_handle``) and what a connection past
the limit is told (``_busy``).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path
from typing import Self

from worker.provider.socket_dirs import allow_job_connect

#: The longest path ``bind()`` takes for a Unix socket (``sun_path`` is 108 bytes with its NUL).
MAX_SOCKET_PATH = 107


def bind_unix(listener: socket.socket, path: Path) -> None:
    """Bind ``listener`` at ``path``, however long the path (a deep data directory).

    A longer path than ``sun_path`` holds is bound through a short alias of its directory,
    ``/proc/self/fd/N/NAME``: the socket file is created in the real directory all the same.
    """
    if len(os.fsencode(path)) <= MAX_SOCKET_PATH:
        listener.bind(str(path))
        return
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        listener.bind(f"/proc/self/fd/{directory}/{path.name}")
    finally:
        os.close(directory)


class AttemptSocketServer:
    """Serves ``socket_path`` for attempt ``attempt_id`` until :meth:`close`."""

    #: Thread names: ``<kind>-<attempt>``.
    kind = "socket"

    def __init__(self, socket_path: Path, attempt_id: int, max_open: int) -> None:
        self.socket_path = socket_path
        self.attempt_id = attempt_id
        self.max_open = max_open
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._slots = threading.BoundedSemaphore(max_open)
        self._closed = threading.Event()
        self._handlers: set[threading.Thread] = set()
        self._lock = threading.Lock()

    def start(self) -> Self:
        """Bind the socket, let the job's user connect, and start accepting."""
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            bind_unix(listener, self.socket_path)
            allow_job_connect(self.socket_path)
            listener.listen(self.max_open)
        except BaseException:
            listener.close()
            raise
        self._listener = listener
        self._thread = threading.Thread(
            target=self._accept, name=f"{self.kind}-{self.attempt_id}", daemon=True
        )
        self._thread.start()
        return self

    def close(self, timeout: float = 5.0) -> None:
        """Stop accepting and wait (bounded) for the connections in flight."""
        self._closed.set()
        if self._listener is not None:
            try:
                self._listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._listener.close()
        if self._thread is not None:
            self._thread.join(timeout)
        deadline = time.monotonic() + timeout
        with self._lock:
            handlers = list(self._handlers)
        for handler in handlers:
            handler.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _accept(self) -> None:
        assert self._listener is not None
        while not self._closed.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            if not self._slots.acquire(blocking=False):
                self._busy(conn)
                conn.close()
                continue
            handler = threading.Thread(
                target=self._serve,
                args=(conn,),
                name=f"{self.kind}-{self.attempt_id}",
                daemon=True,
            )
            with self._lock:
                self._handlers.add(handler)
            handler.start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            self._handle(conn)
        finally:
            conn.close()
            self._slots.release()
            with self._lock:
                self._handlers.discard(threading.current_thread())

    def _handle(self, conn: socket.socket) -> None:
        """Serve one connection (it is closed afterwards)."""
        raise NotImplementedError

    def _busy(self, conn: socket.socket) -> None:
        """Tell a connection past ``max_open`` so (it is closed afterwards)."""
        raise NotImplementedError
