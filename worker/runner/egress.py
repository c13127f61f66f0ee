"""The job's way out: a listener on 127.0.0.1 in the job that forwards to the provider's proxy.

The job container has only ``lo``. When the provider allows egress it binds ``egress.sock`` in
the attempt's socket directory; the runner listens on ``127.0.0.1:<port>`` (a free port) and
passes every connection on, byte for byte, to that socket. The provider's proxy decides what
may be reached; the runner decides nothing and sees no request::

    step (curl, pip, git, npm) ──HTTP_PROXY──► 127.0.0.1:<port> ──► /run/forge-ci/egress.sock

Steps get ``HTTP_PROXY``/``HTTPS_PROXY`` (and the lowercase forms, which curl and git read)
and ``NO_PROXY=localhost,127.0.0.1``, so services a step starts on loopback stay direct.
Standard library only (the runner runs under ``python -S``).
"""

from __future__ import annotations

import socket
import threading

#: Connections forwarded at once; more wait in the listen backlog.
MAX_OPEN = 64
_CHUNK = 256 * 1024


def proxy_environment(port: int) -> dict[str, str]:
    """What a step needs to send its HTTP(S) through the forwarder on ``port``."""
    url = f"http://127.0.0.1:{port}"
    env = {"HTTP_PROXY": url, "HTTPS_PROXY": url, "NO_PROXY": "localhost,127.0.0.1"}
    env.update({name.lower(): value for name, value in env.items()})
    return env


class EgressForwarder:
    """Listens on 127.0.0.1 and hands each connection to the provider's egress socket."""

    def __init__(self, socket_path: str) -> None:
        self.socket_path = socket_path
        self._listener: socket.socket | None = None
        self._slots = threading.BoundedSemaphore(MAX_OPEN)
        self._closed = threading.Event()
        self.port = 0

    def start(self) -> int:
        """Bind a free port on 127.0.0.1, start accepting, and return the port."""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            listener.bind(("127.0.0.1", 0))
            listener.listen(MAX_OPEN)
        except BaseException:
            listener.close()
            raise
        self._listener = listener
        self.port = listener.getsockname()[1]
        threading.Thread(target=self._accept, name="egress-forwarder", daemon=True).start()
        return self.port

    def close(self) -> None:
        self._closed.set()
        if self._listener is not None:
            try:
                self._listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._listener.close()

    def _accept(self) -> None:
        assert self._listener is not None
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self._slots.acquire()
            threading.Thread(
                target=self._forward, args=(client,), name="egress-connection", daemon=True
            ).start()

    def _forward(self, client: socket.socket) -> None:
        try:
            with client:
                client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                with upstream:
                    try:
                        upstream.connect(self.socket_path)
                    except OSError:
                        client.sendall(
                            b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n"
                            b"Connection: close\r\n\r\n"
                        )
                        return
                    back = threading.Thread(target=_copy, args=(upstream, client), daemon=True)
                    back.start()
                    _copy(client, upstream)
                    back.join()
        except OSError:
            pass
        finally:
            self._slots.release()


def _copy(source: socket.socket, sink: socket.socket) -> None:
    """One direction until its end (passed on as a half-close) or an error (closes both)."""
    try:
        while chunk := source.recv(_CHUNK):
            sink.sendall(chunk)
        sink.shutdown(socket.SHUT_WR)
    except OSError:
        for sock in (source, sink):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
