"""The log uploader: one thread that numbers, batches and delivers all of the job's output.

Readers hand it decoded text per (step, stream) with :meth:`Uploader.write`; it keeps the order
in which text was written, joins neighbouring pieces of the same step and stream into chunks
(waiting up to 0.2 s for more, at most ~48 KiB of JSON-escaped text, so the request body stays
under the API's 64 KiB), gives each chunk the next sequence number (1, 2, ... for the whole
attempt) and sends it, retrying the *same bytes* until the server acknowledges it. Sequences are
never skipped: if a chunk cannot be delivered, nothing after it is sent.

Memory is bounded: when more than a million characters wait, :meth:`write` blocks, the reader
stops reading, and the step blocks on its full pipe until the server catches up. When the server
refuses more output (its log limit, 413) the uploader stops, drops what follows (counting it)
and stops the job; the server cancels it too.
"""

from __future__ import annotations

import json
import threading
from collections import deque

from forge_ci.protocol import LogRequest, request_body
from worker.runner.client import ApiClient, NoAnswer, Refused
from worker.runner.clock import now
from worker.runner.watchdog import Watchdog

BATCH_SECONDS = 0.2
MAX_PENDING_CHARACTERS = 1024 * 1024
#: JSON-escaped text per chunk; with the rest of the body this stays below 64 KiB.
CHUNK_ESCAPED_BYTES = 48 * 1024
#: Characters looked at per chunk before measuring (4 bytes each at most in UTF-8).
CHUNK_CHARACTERS = 32 * 1024


def escaped_size(text: str) -> int:
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8"))


#: The longest ``::add-mask::`` value sent as one: a longer one is sent as overlapping pieces
#: of this length, each masked wherever it appears (so all of the value is).
MAX_MASK_CHARACTERS = 2048
#: JSON-escaped ``::add-mask::`` values per chunk (the chunk's text gets that much less room).
MASKS_ESCAPED_BYTES = 16 * 1024


def mask_pieces(value: str) -> list[str]:
    """``value``, or overlapping pieces of MAX_MASK_CHARACTERS that cover it."""
    if len(value) <= MAX_MASK_CHARACTERS:
        return [value]
    starts = list(range(0, len(value) - MAX_MASK_CHARACTERS, MAX_MASK_CHARACTERS))
    starts.append(len(value) - MAX_MASK_CHARACTERS)
    return [value[start : start + MAX_MASK_CHARACTERS] for start in starts]


def split_chunk(text: str, budget: int = CHUNK_ESCAPED_BYTES) -> tuple[str, str]:
    """The longest prefix of ``text`` (up to CHUNK_CHARACTERS) that fits one chunk, and the rest."""
    head = text[:CHUNK_CHARACTERS]
    while escaped_size(head) > budget:
        head = head[: len(head) // 2]
    return head, text[len(head) :]


class Uploader:
    """Delivers the job's log in order; see the module docstring."""

    def __init__(
        self, client: ApiClient, attempt_id: int, execution_id: str, watchdog: Watchdog
    ) -> None:
        self.client = client
        self.attempt_id = attempt_id
        self.execution_id = execution_id
        self.watchdog = watchdog
        self._cond = threading.Condition()
        self._pieces: deque[tuple[str, str, str]] = deque()
        self._pending = 0
        self._busy = False
        self._closing = False
        self._flushing = 0
        self._abandoned = False
        #: The last sequence the server acknowledged (the completion cites it).
        self.acknowledged = 0
        #: Why uploading stopped early, if it did.
        self.failure: str | None = None
        #: Characters of output written after uploading stopped.
        self.dropped = 0
        #: ``::add-mask::`` values not sent yet: they go with the next chunk (before its text).
        self._masks: list[str] = []
        self._thread = threading.Thread(target=self._run, name="uploader", daemon=True)

    def start(self) -> None:
        self._thread.start()

    # -- producers ------------------------------------------------------------------------------

    def write(self, step_id: str, stream: str, text: str) -> None:
        """Queue ``text`` of ``step_id``'s ``stream``; blocks while too much is waiting."""
        if not text:
            return
        with self._cond:
            while (
                self._pending >= MAX_PENDING_CHARACTERS
                and self.failure is None
                and not self._abandoned
                and not self.watchdog.lost()
            ):
                self._cond.wait(0.1)
            if self.failure is not None or self._abandoned or self.watchdog.lost():
                self.dropped += len(text)
                return
            self._pieces.append((step_id, stream, text))
            self._pending += len(text)
            self._cond.notify_all()

    def add_mask(self, value: str) -> None:
        """Send ``value`` to the server with the next chunk: it masks it from then on."""
        with self._cond:
            for piece in mask_pieces(value):
                if piece not in self._masks:
                    self._masks.append(piece)
            if not self._pieces:
                self._pieces.append(("", "stdout", ""))
            self._cond.notify_all()

    def flush(self, until: float) -> bool:
        """Wait until everything written so far was acknowledged (True) or ``until`` passed."""
        with self._cond:
            self._flushing += 1
            self._cond.notify_all()
            try:
                while (self._pieces or self._busy) and self.failure is None:
                    remaining = until - now()
                    if remaining <= 0 or self.watchdog.lost():
                        return False
                    self._cond.wait(min(remaining, 0.1))
                return not self._pieces and not self._busy and self.failure is None
            finally:
                self._flushing -= 1

    def close(self, until: float) -> bool:
        """Deliver what is left until ``until``, then stop the thread. True if all arrived."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        delivered = self.flush(until)
        with self._cond:
            self._abandoned = True
            self._cond.notify_all()
        self._thread.join(timeout=max(0.0, until - now()) + 1.0)
        return delivered

    # -- the thread -----------------------------------------------------------------------------

    def _take(self) -> tuple[str, str, str, tuple[str, ...]] | None:
        """The next chunk, waiting for text (and briefly for more of it); None when done."""
        with self._cond:
            while not self._pieces or self._abandoned:
                if self._abandoned or self._closing:
                    return None
                self._cond.wait(0.5)
            if not self._closing and not self._flushing:
                waited_until = now() + BATCH_SECONDS
                while self._pending < CHUNK_CHARACTERS and not self._closing and not self._flushing:
                    remaining = waited_until - now()
                    if remaining <= 0:
                        break
                    self._cond.wait(remaining)
            masks, room = self._take_masks()
            if self._masks:
                # More values than one chunk carries: send them first, without text.
                self._busy = True
                return "", "stdout", "", masks
            step_id, stream, text = self._pieces.popleft()
            parts = [text]
            size = len(text)
            while (
                self._pieces
                and self._pieces[0][:2] == (step_id, stream)
                and size < CHUNK_CHARACTERS
            ):
                parts.append(self._pieces.popleft()[2])
                size += len(parts[-1])
            joined = "".join(parts)
            head, rest = split_chunk(joined, CHUNK_ESCAPED_BYTES - room)
            if rest:
                self._pieces.appendleft((step_id, stream, rest))
            self._pending -= len(head)
            self._busy = True
            self._cond.notify_all()
            return step_id, stream, head, masks

    def _take_masks(self) -> tuple[tuple[str, ...], int]:
        """Pending mask values that fit one chunk, and the room they take."""
        taken: list[str] = []
        room = 0
        while self._masks:
            size = escaped_size(self._masks[0])
            if taken and room + size > MASKS_ESCAPED_BYTES:
                break
            taken.append(self._masks.pop(0))
            room += size
        return tuple(taken), room

    def _run(self) -> None:
        while True:
            chunk = self._take()
            if chunk is None:
                return
            try:
                self._send(*chunk)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
            if self.failure is not None or self._abandoned:
                with self._cond:
                    self.dropped += sum(len(piece[2]) for piece in self._pieces)
                    self._pieces.clear()
                    self._pending = 0
                    self._cond.notify_all()
                if self.failure is not None:
                    return

    def _send(self, step_id: str, stream: str, text: str, masks: tuple[str, ...]) -> None:
        sequence = self.acknowledged + 1
        body = request_body(
            LogRequest(self.execution_id, sequence, step_id, stream, text, list(masks))
        )
        sent_at = now()
        try:
            status = self.client.call(
                self.attempt_id,
                "logs",
                body,
                until=self.watchdog.safe_until(),
                give_up=lambda: self.watchdog.lost() or self._abandoned,
            )
        except NoAnswer as exc:
            self.failure = f"log sequence {sequence} was not delivered: {exc}"
            return
        except Refused as refused:
            self.failure = f"the server refused log sequence {sequence}: {refused.message}"
            if refused.attempt is not None:
                self.watchdog.observe(refused.attempt, sent_at)
            if refused.code == "log_limit_reached":
                self.watchdog.request_stop("cancelled", refused.message)
            elif refused.attempt is None or refused.attempt.state != "completed":
                self.watchdog.request_stop("refused", self.failure)
            return
        self.acknowledged = sequence
        self.watchdog.observe(status, sent_at)
