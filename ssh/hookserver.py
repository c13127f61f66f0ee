"""The SSH parent's end of ``forge_ci.hookwire``: one Unix socket per push.

The socket lives in a directory only the server's user can enter (mode 0700), so only processes
of that user (git and its hooks) can connect; each request must also carry this push's session
id. Requests are answered one at a time, in order, on one thread: git runs a push's hooks one
after another, never in parallel.
"""

from __future__ import annotations

import logging
import os
import select
import socket
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from forge_ci import hookwire

log = logging.getLogger(__name__)

#: sun_path holds 108 bytes including the final NUL.
_MAX_SOCKET_PATH = 107
#: A hook writes its whole request at once; this only ends a connection that never does.
_REQUEST_TIMEOUT = 30.0

Handler = Callable[[hookwire.Request], hookwire.Answer]


def socket_directory(run_dir: Path) -> Path:
    """A private directory for push sockets: ``<run dir>/push-sockets`` when its paths fit, else
    one under the system temporary directory (a deep data directory would overflow sun_path)."""
    preferred = run_dir / "push-sockets"
    if len(str(preferred)) + len("/") + 32 + len(".sock") <= _MAX_SOCKET_PATH:
        preferred.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(preferred, 0o700)
        return preferred
    return Path(tempfile.mkdtemp(prefix="forge-ci-push-"))


class HookListener:
    """Serves one push's hooks while the block runs; the socket is gone when it ends."""

    def __init__(self, directory: Path, session_id: str, handler: Handler) -> None:
        self.path = directory / f"{session_id}.sock"
        self.session_id = session_id
        self.handler = handler
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._wake_r, self._wake_w = os.pipe()
        self._thread = threading.Thread(target=self._serve, name="hook-listener", daemon=True)

    def __enter__(self) -> HookListener:
        self.path.unlink(missing_ok=True)
        self._listener.bind(str(self.path))
        self._listener.listen(8)
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
        self.path.unlink(missing_ok=True)

    def _serve(self) -> None:
        while True:
            ready, _, _ = select.select([self._listener, self._wake_r], [], [])
            if self._wake_r in ready:
                return
            connection, _ = self._listener.accept()
            with connection:
                try:
                    self._answer(connection)
                except OSError as exc:
                    log.warning("hook connection failed: %s", exc)

    def _answer(self, connection: socket.socket) -> None:
        connection.settimeout(_REQUEST_TIMEOUT)
        chunks, size = [], 0
        while True:
            chunk = connection.recv(65536)
            if not chunk:
                break
            size += len(chunk)
            if size > hookwire.MAX_REQUEST_BYTES:
                answer = hookwire.Answer(False, "forge-ci: the hook request is too large")
                connection.sendall(hookwire.encode_answer(answer))
                return
            chunks.append(chunk)
        try:
            request = hookwire.decode_request(b"".join(chunks))
        except hookwire.WireError as exc:
            answer = hookwire.Answer(False, f"forge-ci: malformed hook request: {exc}")
        else:
            if request.session != self.session_id:
                answer = hookwire.Answer(False, "forge-ci: the hook belongs to another push")
            else:
                answer = self._handle(request)
        connection.sendall(hookwire.encode_answer(answer))

    def _handle(self, request: hookwire.Request) -> hookwire.Answer:
        # The handler maps every expected failure to a refusal itself; anything else is a bug,
        # but it must still refuse (never leave a hook waiting, never let git go on unrecorded).
        try:
            return self.handler(request)
        except Exception:
            log.exception("hook request %s %s failed", request.hook, request.phase)
            return hookwire.Answer(
                False, "forge-ci: internal error while handling the push; nothing was recorded"
            )
