"""Reading request bodies with a size cap and a read deadline, chunked bodies included.

The body is read straight from the WSGI input (never through Flask's form parsing), at most
``limit`` bytes, and the whole read must finish within ``deadline`` seconds: a client that
trickles its body cannot hold a worker thread. The deadline is enforced on the connection's
socket (werkzeug and gunicorn both expose it in the environ), so even a single blocked read
ends in time. Refusals close the connection, since the rest of the body was never read.
"""

from __future__ import annotations

import socket
import time
from typing import Any

from forge_ci.protocol import BODY_READ_DEADLINE_SECONDS, MAX_BODY_BYTES, ProtocolError

_READ_SIZE = 16 * 1024


def connection_socket(environ: dict[str, Any]) -> socket.socket | None:
    for key in ("werkzeug.socket", "gunicorn.socket"):
        candidate = environ.get(key)
        if isinstance(candidate, socket.socket):
            return candidate
    return None


def too_large(limit: int) -> ProtocolError:
    return ProtocolError("body_too_large", f"the request body is larger than {limit} bytes", 413)


def read_body(
    environ: dict[str, Any],
    limit: int = MAX_BODY_BYTES,
    deadline: float = BODY_READ_DEADLINE_SECONDS,
) -> bytes:
    """The request body, or ProtocolError: 413 body_too_large, 408 body_timeout, 400."""
    raw_length = environ.get("CONTENT_LENGTH") or ""
    length: int | None = None
    if raw_length:
        if not raw_length.isascii() or not raw_length.isdigit():
            raise ProtocolError("invalid_request", "Content-Length is not a number")
        length = int(raw_length)
        if length > limit:
            raise too_large(limit)
    chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
    if length is None and not (chunked or environ.get("wsgi.input_terminated")):
        return b""
    wanted = length if length is not None else limit + 1
    stream = environ["wsgi.input"]
    sock = connection_socket(environ)
    previous = sock.gettimeout() if sock is not None else None
    end = time.monotonic() + deadline
    data = bytearray()
    try:
        while len(data) < wanted:
            remaining = end - time.monotonic()
            if remaining <= 0:
                raise _timeout(deadline)
            if sock is not None:
                sock.settimeout(remaining)
            chunk = stream.read(min(_READ_SIZE, wanted - len(data)))
            if not chunk:
                break
            data += chunk
            if len(data) > limit:
                raise too_large(limit)
    except TimeoutError:
        raise _timeout(deadline) from None
    finally:
        if sock is not None:
            try:
                sock.settimeout(previous)
            except OSError:
                pass
    if length is not None and len(data) < length:
        raise ProtocolError("invalid_request", "the request body ended before Content-Length")
    return bytes(data)


def _timeout(deadline: float) -> ProtocolError:
    return ProtocolError(
        "body_timeout", f"the request body was not received within {deadline:g} seconds", 408
    )
