"""Masking secret values out of log text, across chunk boundaries, before anything is stored.

What is masked (the *patterns* of an attempt), built by :func:`patterns_for`:

- every value (the attempt credential, every issued secret value), whatever its length;
- each line of a value (CR LF, LF and CR end lines) of 8 UTF-8 bytes or more;
- nested JSON string values of 8 bytes or more when a value, or one of its lines, is a JSON
  object or array (a credentials file);
- the JSON-escaped form of each of the above (ASCII-only and UTF-8), since builds often print
  JSON that embeds a secret.

Matching is one Aho-Corasick scan (pyahocorasick) over the text, so 64 secrets cost about what
one does. Overlapping and adjacent matches merge into one mask.

Streaming. Output arrives in chunks per (step, stream). A secret may straddle two chunks, so the
masker never emits a suffix that could still grow into a match; it keeps it as *pending* text::

    chunk k:    ...build output tok|en-start      <- "token-start..." is a prefix of a secret
    emitted:    ...build output         pending:  "tok en-start"  (withheld)
    chunk k+1:  pending + "en-rest\\n"  is scanned as one text; the match is masked

The pending text is the longest suffix that is a proper prefix of some pattern, so it is shorter
than the longest pattern (no quadratic chains of overlaps). A match that started in emitted
text and runs into the pending text is remembered as ``covered`` (that many leading pending
characters are already inside a mask). When the stream ends, a non-empty pending text is masked
whole: an unfinished prefix of a secret is still secret.

Why the output never contains a pattern: the mask character is chosen so that no pattern
contains it; so a pattern could only appear inside text between two masks, which is a piece of
the original output in which every occurrence was masked.
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from hashlib import sha256
from threading import Lock
from typing import Any

import ahocorasick
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

#: Lines of a multi-line value shorter than this (in UTF-8 bytes) are not masked on their own:
#: short lines (``{``, ``}``, ``-----END``) would mask ordinary output.
MIN_LINE_BYTES = 8
MASK_REPEAT = 3
#: Mask characters in order of preference; the first one no pattern contains is used.
_MASK_CANDIDATES = "*#~\u2022\u2588\u25a0"
_PREFIX_FILTER = 8


def _lines(value: str) -> list[str]:
    return value.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _json_strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _json_strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _json_strings(item)


def _escaped(value: str) -> set[str]:
    forms = {json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]}
    forms.discard(value)
    return forms


def _long_enough(text: str) -> bool:
    return len(text.encode("utf-8", "surrogatepass")) >= MIN_LINE_BYTES


def _nested(text: str) -> set[str]:
    """String values (8 bytes or more) inside ``text`` when it is a JSON object or array."""
    stripped = text.strip()
    if stripped[:1] not in ("{", "["):
        return set()
    try:
        document = json.loads(stripped)
    except (ValueError, RecursionError):
        return set()
    return {s for s in _json_strings(document) if _long_enough(s)}


def patterns_for(values: Iterable[str]) -> frozenset[str]:
    """Every text that must never appear in a stored log, derived from ``values``."""
    patterns: set[str] = set()
    for value in values:
        if not value:
            continue
        parts = {value}
        parts.update(line for line in _lines(value) if _long_enough(line))
        for part in list(parts):
            parts.update(_nested(part))
        for part in parts:
            patterns.add(part)
            patterns.update(_escaped(part))
    return frozenset(p for p in patterns if p)


@dataclass(frozen=True)
class Carry:
    """What a stream's masker keeps between chunks (persisted, see :func:`seal_carry`)."""

    #: Withheld text: the longest suffix so far that could still become a match.
    pending: str = ""
    #: How many leading characters of ``pending`` are inside a match already masked.
    covered: int = 0


EMPTY = Carry()


class Masker:
    """Masks one attempt's patterns. Immutable and thread-safe once built."""

    def __init__(self, patterns: Iterable[str]) -> None:
        self.patterns = frozenset(p for p in patterns if p)
        self.longest = max((len(p) for p in self.patterns), default=0)
        self.mask = _mask_char(self.patterns) * MASK_REPEAT
        self._automaton: Any = None
        self._prefixes: frozenset[str] = frozenset()
        if self.patterns:
            automaton = ahocorasick.Automaton()
            for pattern in self.patterns:
                automaton.add_word(pattern, len(pattern))
            automaton.make_automaton()
            self._automaton = automaton
            self._prefixes = frozenset(
                p[:k] for p in self.patterns for k in range(1, min(len(p), _PREFIX_FILTER) + 1)
            )

    # -- whole texts ---------------------------------------------------------------------------

    def mask_text(self, text: str) -> str:
        """Mask a complete text (job outputs, error messages): no carry-over."""
        emitted, carry = self.feed(EMPTY, text)
        return emitted + self.finish(carry)

    # -- streams -------------------------------------------------------------------------------

    def feed(self, carry: Carry, chunk: str) -> tuple[str, Carry]:
        """Mask ``chunk`` after ``carry``; return the text safe to store and the new carry."""
        if self._automaton is None:
            return carry.pending + chunk, EMPTY
        text = carry.pending + chunk
        intervals = [(end + 1 - length, end + 1) for end, length in self._automaton.iter(text)]
        if carry.covered:
            intervals.append((0, carry.covered))
        cut = self._hold_start(text)
        pieces: list[str] = []
        position = 0
        covered = 0
        for start, end in _merge(intervals):
            if start >= cut and not (start == 0 and carry.covered):
                # Lies in the withheld text, which is scanned again with the next chunk. Not the
                # covered start, though: its mask is already out, so even when all of the text is
                # withheld again (cut 0) it stays covered rather than being released later.
                break
            pieces.append(text[position:start])
            if not (start == 0 and carry.covered):
                # (A match continuing one whose mask was already emitted adds no second mask.)
                pieces.append(self.mask)
            position = min(end, cut)
            covered = max(covered, end - cut)
        pieces.append(text[position:cut])
        return "".join(pieces), Carry(text[cut:], covered)

    def finish(self, carry: Carry) -> str:
        """The end of a stream: an unresolved pending prefix is masked whole.

        Pending text that lies entirely inside a match whose mask was already emitted is
        simply dropped.
        """
        if not carry.pending or carry.covered >= len(carry.pending):
            return ""
        return self.mask

    def _hold_start(self, text: str) -> int:
        """Start of the longest suffix of ``text`` that is a proper prefix of some pattern."""
        size = len(text)
        for index in range(max(0, size - (self.longest - 1)), size):
            rest = size - index
            if text[index : index + min(rest, _PREFIX_FILTER)] not in self._prefixes:
                continue
            if rest <= _PREFIX_FILTER or self._automaton.match(text[index:]):
                return index
        return size


def _merge(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def _mask_char(patterns: frozenset[str]) -> str:
    used: set[str] = set()
    for pattern in patterns:
        used.update(pattern)
    for char in _MASK_CANDIDATES:
        if char not in used:
            return char
    code = 0xE000  # Unicode private use area: some character is always free.
    while chr(code) in used:
        code += 1
    return chr(code)


class MaskerCache:
    """Built maskers by pattern set, so a busy attempt does not rebuild its automaton per chunk."""

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._items: OrderedDict[str, Masker] = OrderedDict()
        self._lock = Lock()

    def get(self, values: Iterable[str]) -> Masker:
        # Keyed by the values themselves (hashed), so a hit costs no pattern derivation.
        distinct = sorted(set(values))
        key = sha256("\x00".join(distinct).encode("utf-8", "surrogatepass")).hexdigest()
        with self._lock:
            masker = self._items.get(key)
            if masker is not None:
                self._items.move_to_end(key)
                return masker
        masker = Masker(patterns_for(distinct))
        with self._lock:
            self._items[key] = masker
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return masker


# --- Persisting the carry ------------------------------------------------------------------------
#
# Pending text may be the start of a secret, so it is stored encrypted under a key derived from
# the attempt credential, which the server never stores: only a request that presents the
# credential (the next chunk, the completion) can read it back. Termination without the
# credential (a lost lease, a timeout) does not need to: a pending text is masked whole.


def _key(credential: str) -> bytes:
    return sha256(b"forge-ci attempt seal v1\x00" + credential.encode()).digest()


class CarryUnreadable(Exception):
    """A sealed value does not open with this credential and context."""


def seal_text(credential: str, context: str, text: str) -> bytes:
    """Encrypt ``text`` under the credential; ``context`` is bound as associated data."""
    nonce = os.urandom(12)
    payload = text.encode("utf-8", "surrogatepass")
    return nonce + AESGCM(_key(credential)).encrypt(nonce, payload, context.encode())


def open_text(credential: str, context: str, sealed: bytes) -> str:
    try:
        payload = AESGCM(_key(credential)).decrypt(sealed[:12], sealed[12:], context.encode())
    except (InvalidTag, ValueError):
        raise CarryUnreadable(context) from None
    return payload.decode("utf-8", "surrogatepass")


def seal_carry(credential: str, context: str, carry: Carry) -> bytes:
    """Encrypt ``carry``; ``context`` (attempt, step, stream) is bound as associated data."""
    return seal_text(credential, context, json.dumps([carry.pending, carry.covered]))


def open_carry(credential: str, context: str, sealed: bytes) -> Carry:
    pending, covered = json.loads(open_text(credential, context, sealed))
    return Carry(str(pending), int(covered))
