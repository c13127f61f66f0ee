"""The SSH parent's end of ``forge_ci.hookwire``: one loopback TCP listener per push.

The listener binds 127.0.0.1 on a port the kernel picks and lives exactly as long as the push's
``git receive-pack``. One thread serves it with a selector: connections are read side by side
(so a local stranger who connects and sends nothing cannot hold up the push's real hooks), and
each complete request that carries this push's session id is handled in turn (git runs a push's
hooks one after another). One thread and no thread per hook: every wake-up costs a push time.
"""

from __future__ import annotations

import hmac
import logging
import os
import secrets
import selectors
import socket
import threading
import time
from collections.abc import Callable
from types import TracebackType

from forge_ci import hookwire

log = logging.getLogger(__name__)

#: A hook writes its whole request at once; this only ends a connection that never does.
_REQUEST_TIMEOUT = 30.0
#: Connections read at once; beyond this, new ones wait in the listen backlog.
_MAX_PENDING = 32

Handler = Callable[[hookwire.Request], hookwire.Answer]


class HookListener:
    """Serves one push's hooks while the block runs; the port is closed when it ends."""

    def __init__(self, session_id: str, handler: Handler) -> None:
        self.session_id = session_id
        self.answer_key = secrets.token_hex(16)
        self.handler = handler
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._wake_r, self._wake_w = os.pipe()
        self._thread = threading.Thread(target=self._serve, name="hook-listener", daemon=True)

    @property
    def port(self) -> int:
        return int(self._listener.getsockname()[1])

    def environment(self) -> dict[str, str]:
        """What receive-pack (and so each hook) needs to find and trust this listener."""
        return {
            hookwire.ENV_SESSION: self.session_id,
            hookwire.ENV_PORT: str(self.port),
            hookwire.ENV_ANSWER_KEY: self.answer_key,
        }

    def __enter__(self) -> HookListener:
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self._listener.setblocking(False)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        os.write(self._wake_w, b"x")
        self._thread.join()
        self._listener.close()
        os.close(self._wake_r)
        os.close(self._wake_w)

    def _serve(self) -> None:
        pending: dict[socket.socket, tuple[bytearray, float]] = {}
        with selectors.DefaultSelector() as selector:
            selector.register(self._listener, selectors.EVENT_READ)
            selector.register(self._wake_r, selectors.EVENT_READ)
            try:
                while True:
                    for key, _ in selector.select(timeout=1.0):
                        if key.fileobj == self._wake_r:
                            return
                        if key.fileobj is self._listener:
                            self._accept(selector, pending)
                        else:
                            assert isinstance(key.fileobj, socket.socket)
                            self._read(selector, pending, key.fileobj)
                    now = time.monotonic()
                    for connection, (_, deadline) in list(pending.items()):
                        if now > deadline:
                            self._drop(selector, pending, connection)
            finally:
                for connection in list(pending):
                    self._drop(selector, pending, connection)

    def _accept(
        self,
        selector: selectors.BaseSelector,
        pending: dict[socket.socket, tuple[bytearray, float]],
    ) -> None:
        try:
            connection, _ = self._listener.accept()
        except BlockingIOError:
            return
        if len(pending) >= _MAX_PENDING:
            connection.close()
            return
        connection.setblocking(False)
        pending[connection] = (bytearray(), time.monotonic() + _REQUEST_TIMEOUT)
        selector.register(connection, selectors.EVENT_READ)

    def _read(
        self,
        selector: selectors.BaseSelector,
        pending: dict[socket.socket, tuple[bytearray, float]],
        connection: socket.socket,
    ) -> None:
        buffer, _ = pending[connection]
        try:
            chunk = connection.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:  # gone before saying anything complete: nobody to answer
            self._drop(selector, pending, connection)
            return
        buffer += chunk
        if len(buffer) > hookwire.MAX_REQUEST_BYTES:
            answer = hookwire.Answer(False, "forge-ci: the hook request is too large")
        elif hookwire.request_complete(bytes(buffer)):
            answer = self._answer(bytes(buffer))
        else:
            return
        selector.unregister(connection)
        del pending[connection]
        try:
            connection.setblocking(True)
            connection.settimeout(_REQUEST_TIMEOUT)
            connection.sendall(hookwire.encode_answer(answer, self.answer_key))
        except OSError as exc:
            log.warning("could not answer a hook: %s", exc)
        finally:
            connection.close()

    @staticmethod
    def _drop(
        selector: selectors.BaseSelector,
        pending: dict[socket.socket, tuple[bytearray, float]],
        connection: socket.socket,
    ) -> None:
        selector.unregister(connection)
        del pending[connection]
        connection.close()

    def _answer(self, data: bytes) -> hookwire.Answer:
        try:
            request = hookwire.decode_request(data)
        except hookwire.WireError as exc:
            return hookwire.Answer(False, f"forge-ci: malformed hook request: {exc}")
        if not hmac.compare_digest(request.session.encode(), self.session_id.encode()):
            return hookwire.Answer(False, "forge-ci: the hook belongs to another push")
        # The handler maps every expected failure to a refusal itself; anything else is a bug,
        # but it must still refuse (never leave a hook waiting, never let git go on unrecorded).
        try:
            return self.handler(request)
        except Exception:
            log.exception("hook request %s %s failed", request.hook, request.phase)
            return hookwire.Answer(
                False, "forge-ci: internal error while handling the push; nothing was recorded"
            )
