"""The client's end of one SSH-side command: stdout and stderr lines, stdin, and the deadline.

Every write and read is bounded: a command that is not a follow must finish within the
connection's deadline (a client that stops reading, or never ends its standard input, is cut
off), and a follow stops as soon as the client has gone away (:class:`ClientGone`), so no
server work outlives its client.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import paramiko

from forge_ci.errors import InvalidInput
from forge_ci.output import json_text, table_lines

#: How often a follow checks whether its client is still there while it waits.
_CHECK_EVERY = 0.2


class ClientGone(Exception):
    """The client closed the connection or stopped reading: end the command quietly."""


class TimedOut(Exception):
    """The command ran past the connection's deadline."""


class Terminal:
    """Writes lines to the channel, reads its stdin, and enforces the deadline."""

    def __init__(self, channel: paramiko.Channel, timeout: float) -> None:
        self.channel = channel
        self.timeout = timeout
        #: None while following: a follow is bounded by its run and its client instead.
        self.deadline: float | None = time.monotonic() + timeout

    def follow(self) -> None:
        """From now on the command streams until its run ends or the client goes away."""
        self.deadline = None

    def last_words(self) -> None:
        """A few seconds more, past the deadline, to say why the command ended."""
        self.deadline = time.monotonic() + 5.0

    def _budget(self) -> float | None:
        if self.deadline is None:
            return None
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimedOut
        return left

    def _send(self, data: bytes, stderr: bool) -> None:
        if self.channel.closed or not self.channel.get_transport().is_active():
            raise ClientGone
        # A client that stops reading fills the window; while following, one that has not read
        # for a minute is treated as gone.
        budget = self._budget()
        self.channel.settimeout(60.0 if budget is None else budget)
        try:
            if stderr:
                self.channel.sendall_stderr(data)
            else:
                self.channel.sendall(data)
        except TimeoutError:
            if self.deadline is not None:
                raise TimedOut from None
            raise ClientGone from None
        except (OSError, EOFError, paramiko.SSHException):
            raise ClientGone from None

    def out(self, line: str) -> None:
        self._send((line + "\n").encode(), stderr=False)

    def lines(self, lines: Sequence[str]) -> None:
        self._send("".join(line + "\n" for line in lines).encode(), stderr=False)

    def err(self, line: str) -> None:
        self._send((line + "\n").encode(), stderr=True)

    def json(self, value: Any) -> None:
        self._send(json_text(value).encode(), stderr=False)

    def table(self, rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> None:
        self.lines(table_lines(rows, columns))

    def read_stdin(self, limit: int, what: str) -> bytes:
        """Standard input up to its end; InvalidInput (naming ``what``) beyond ``limit`` bytes."""
        chunks: list[bytes] = []
        size = 0
        while True:
            budget = self._budget()
            self.channel.settimeout(budget)
            try:
                chunk = self.channel.recv(min(65536, limit + 1 - size))
            except TimeoutError:
                raise TimedOut from None
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise InvalidInput(f"{what} on standard input is larger than {limit} bytes")

    def wait(self, seconds: float) -> None:
        """Sleep ``seconds`` while following; ClientGone as soon as the client has hung up."""
        end = time.monotonic() + seconds
        while True:
            if self.channel.closed or not self.channel.get_transport().is_active():
                raise ClientGone
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, _CHECK_EVERY))
