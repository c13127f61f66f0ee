"""Masking secret values out of log text, across chunk boundaries, before anything is stored.

What is masked (the *patterns* of an attempt), built by :func:`patterns_for`:

- every value (the attempt credential, every issued secret value), whatever its length;
- each line of a value (CR LF, LF and CR end lines) of 8 UTF-8 bytes or more;
- nested JSON string values of 8 bytes or more when a value, or one of its lines, is a JSON
  object or array (a credentials file);
- the JSON-escaped form of each of the above (ASCII-only and UTF-8), since builds often print
  JSON that embeds a secret.

Matching. Every occurrence of every pattern is found by one overlapping Aho-Corasick scan
(``ahocorasick-rs``, the Rust ``aho-corasick`` crate) of the text's UTF-8 bytes: a DFA, one table
step per byte however many patterns there are, or a contiguous NFA when the DFA's table would pass
:data:`DFA_BUDGET_BYTES`. Most chunks hold no secret, so up to 256 patterns are first looked for
by leftmost searches of at most 64 patterns each, which get the crate's SIMD prefilter (the
overlapping scan never does); only a chunk they find something in is scanned. Overlapping and
adjacent matches merge into one mask.

Offsets are byte offsets; lone surrogates are scanned in their 3-byte form (``surrogatepass``).
No pattern starts with a UTF-8 continuation byte, so every match and every withheld suffix starts
and ends on a character boundary, and the slices between them decode to the original characters.
:class:`Carry` counts characters, as it always has (sealed carries stay readable).

Streaming. Output arrives in chunks per (step, stream). A secret may straddle two chunks, so the
masker never emits a suffix that could still grow into a match; it keeps it as *pending* text::

    chunk k:    ...build output tok|en-start      <- "token-start..." is a prefix of a secret
    emitted:    ...build output         pending:  "tok en-start"  (withheld)
    chunk k+1:  pending + "en-rest\\n"  is scanned as one text; the match is masked

The pending text is the longest suffix that is a proper prefix of some pattern, so it is shorter
than the longest pattern (no quadratic chains of overlaps). A match that started in emitted
text and runs into the pending text is remembered as ``covered`` (that many leading pending
characters are already inside a mask).

The end of a stream (:meth:`Masker.finish`; :meth:`Masker.mask_text` for a whole text such as a
job output). The pending text is then an *unresolved tail*: it never grew into a match. The
rule:

- a tail of :data:`MIN_TAIL_BYTES` (8) UTF-8 bytes or more is masked whole: a long unfinished
  prefix of a secret is still secret (a job cut off while printing one); so is a shorter tail
  that is at least half of a value it begins (``hunt`` of ``hunter2``): a short secret's
  prefix gives most of it away;
- a shorter tail is released like any other text (every occurrence of a pattern inside it is
  still masked, and what is covered stays covered). A prefix of 1-7 bytes of a value is not a
  secret (of the 32-byte attempt credential it is 4-28 bits of 256), while masking it corrupts
  ordinary output: a job output ``1`` or a last line ``tidy-v1`` ends with the first
  character of the credential one time in 16. 8 bytes is the threshold of
  :data:`MIN_LINE_BYTES` and GitLab's minimum masked-variable length. In the middle of a stream
  a withheld prefix that does not continue into a match is released whatever its length.

The server ends streams without the credential too (a lost lease, a timeout), when the sealed
pending text cannot be read; so each persisted carry keeps beside it what the stream would end
with (:meth:`Masker.finish`: the mask, or a short tail that the rule does not count as secret).

Why the output never contains a pattern: the mask character is chosen so that no pattern
contains it; so a pattern could only appear inside text between two masks, which is a piece of
the original output in which every occurrence was masked.
"""

from __future__ import annotations

import json
import os
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from hashlib import sha256
from threading import Lock
from typing import Any

from ahocorasick_rs import BytesAhoCorasick, Implementation, MatchKind
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

#: Lines of a multi-line value shorter than this (in UTF-8 bytes) are not masked on their own:
#: short lines (``{``, ``}``, ``-----END``) would mask ordinary output.
MIN_LINE_BYTES = 8
#: An unresolved tail at the end of a stream is masked when it has at least this many UTF-8 bytes,
#: and released when shorter (see the module docstring).
MIN_TAIL_BYTES = 8
MASK_REPEAT = 3
#: Mask characters in order of preference; the first one no pattern contains is used.
_MASK_CANDIDATES = "*#~\u2022\u2588\u25a0"
#: Length of the pattern heads that locate candidate withheld suffixes (see ``_hold_start``).
_HEAD = 8
#: Largest DFA table a masker may build; beyond it the (slower, smaller) contiguous NFA is used.
DFA_BUDGET_BYTES = 2 * 1024 * 1024
#: Patterns per detector: the crate's SIMD prefilter (Teddy) takes at most 64.
_DETECTOR_SIZE = 64
#: Above this many detectors their scans together cost more than the one overlapping scan.
_DETECTORS_MAX = 4


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
        if value.isascii() and value.isalnum():
            # A credential's usual form: one line, nothing JSON escapes, not a JSON document,
            # so it is its own only pattern (what _derived finds, without the work).
            patterns.add(value)
            continue
        patterns.update(_derived(value))
    return frozenset(p for p in patterns if p)


def _derived(value: str) -> set[str]:
    """The patterns of one value: itself, its long lines, the strings of a JSON document in
    it, and the JSON-escaped forms of each."""
    parts = {value}
    parts.update(line for line in _lines(value) if _long_enough(line))
    for part in list(parts):
        parts.update(_nested(part))
    patterns: set[str] = set()
    for part in parts:
        patterns.add(part)
        patterns.update(_escaped(part))
    return patterns


@dataclass(frozen=True)
class Carry:
    """What a stream's masker keeps between chunks (persisted, see :func:`seal_carry`)."""

    #: Withheld text: the longest suffix so far that could still become a match.
    pending: str = ""
    #: How many leading characters of ``pending`` are inside a match already masked.
    covered: int = 0


EMPTY = Carry()


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _text(data: bytes) -> str:
    return data.decode("utf-8", "surrogatepass")


def _implementation(patterns: list[bytes]) -> Implementation:
    """The DFA when its table fits :data:`DFA_BUDGET_BYTES`, else the contiguous NFA.

    The DFA makes one table lookup per text byte whatever the number of patterns; its table has
    a row per trie state (at most one per pattern byte) of 4 bytes per byte class (rounded up to
    a power of two). The builder holds about twice that, hence the factor 8.
    """
    states = sum(len(p) for p in patterns) + 1
    stride = 1 << len(set().union(*patterns)).bit_length()  # >= distinct bytes + 1
    if states * stride * 8 <= DFA_BUDGET_BYTES:
        return Implementation.DFA
    return Implementation.ContiguousNFA


class Masker:
    """Masks one attempt's patterns. Immutable and thread-safe once built."""

    def __init__(self, patterns: Iterable[str]) -> None:
        self.patterns = frozenset(p for p in patterns if p)
        self.mask = _mask_char(self.patterns) * MASK_REPEAT
        self._mask_bytes = _utf8(self.mask)
        #: Patterns as UTF-8, sorted: the proper-prefix test bisects this list.
        self._sorted = sorted({_utf8(p) for p in self.patterns})
        #: In bytes, like every offset below.
        self.longest = max((len(p) for p in self._sorted), default=0)
        self._automaton: BytesAhoCorasick | None = None
        self._detectors: list[BytesAhoCorasick] = []
        self._heads: BytesAhoCorasick | None = None
        if self._sorted:
            self._automaton = BytesAhoCorasick(
                self._sorted,
                matchkind=MatchKind.Standard,
                implementation=_implementation(self._sorted),
            )
            groups = [
                self._sorted[i : i + _DETECTOR_SIZE]
                for i in range(0, len(self._sorted), _DETECTOR_SIZE)
            ]
            if len(groups) <= _DETECTORS_MAX:
                self._detectors = [
                    BytesAhoCorasick(
                        group,
                        matchkind=MatchKind.LeftmostLongest,
                        # (The prefilter does the work; the compact NFA only confirms.)
                        implementation=Implementation.ContiguousNFA,
                    )
                    for group in groups
                ]
            heads = {p[:_HEAD] for p in self._sorted if len(p) > _HEAD}
            if heads:
                self._heads = BytesAhoCorasick(
                    sorted(heads),
                    matchkind=MatchKind.Standard,
                    implementation=Implementation.ContiguousNFA,
                )

    # -- whole texts ---------------------------------------------------------------------------

    def mask_text(self, text: str) -> str:
        """Mask a complete text (job outputs, error messages): no carry-over."""
        emitted, carry = self.feed(EMPTY, text)
        return emitted + self.finish(carry)

    # -- streams -------------------------------------------------------------------------------

    def feed(self, carry: Carry, chunk: str) -> tuple[str, Carry]:
        """Mask ``chunk`` after ``carry``; return the text safe to store and the new carry."""
        return self._scan(carry, chunk, final=False)

    def finish(self, carry: Carry) -> str:
        """The end of a stream: what the pending text of ``carry`` becomes.

        An unresolved tail that counts as secret (:meth:`tail_is_secret`) is one mask; any
        other is released, masked like any text (a short pattern may lie inside it), less its
        covered start. Pending text entirely inside a match whose mask was already emitted is
        dropped.
        """
        if not carry.pending or carry.covered >= len(carry.pending):
            return ""
        if self.tail_is_secret(carry.pending):
            return self.mask
        return self._scan(carry, "", final=True)[0]

    def tail_is_secret(self, tail: str) -> bool:
        """True for a tail of MIN_TAIL_BYTES or more, or one that is half of a value it begins."""
        data = _utf8(tail)
        if len(data) >= MIN_TAIL_BYTES:
            return True
        return any(
            pattern.startswith(data) and 2 * len(data) >= len(pattern) for pattern in self._sorted
        )

    def _scan(self, carry: Carry, chunk: str, *, final: bool) -> tuple[str, Carry]:
        """Mask ``carry.pending + chunk``, withholding a possible prefix unless ``final``."""
        if self._automaton is None:
            return carry.pending + chunk, EMPTY
        text = carry.pending + chunk
        data = _utf8(text)  # (byte offsets from here on; see the module docstring)
        covered_in = len(_utf8(carry.pending[: carry.covered])) if carry.covered else 0
        intervals: list[tuple[int, int]] = []
        if self._may_match(data):
            found = self._automaton.find_matches_as_indexes(data, overlapping=True)
            intervals = [(start, end) for _, start, end in found]
        if covered_in:
            intervals.append((0, covered_in))
        cut = len(data) if final else self._hold_start(data)
        withheld = data[cut:]
        pending = _text(withheld)
        if not intervals:
            return text[: len(text) - len(pending)], Carry(pending, 0)
        pieces: list[bytes] = []
        position = 0
        covered = 0
        for start, end in _merge(intervals):
            if start >= cut and not (start == 0 and covered_in):
                # Lies in the withheld text, which is scanned again with the next chunk. Not the
                # covered start, though: its mask is already out, so even when all of the text is
                # withheld again (cut 0) it stays covered rather than being released later.
                break
            pieces.append(data[position:start])
            if not (start == 0 and covered_in):
                # (A match continuing one whose mask was already emitted adds no second mask.)
                pieces.append(self._mask_bytes)
            position = min(end, cut)
            covered = max(covered, end - cut)
        pieces.append(data[position:cut])
        covered_chars = len(_text(withheld[:covered])) if covered else 0
        return _text(b"".join(pieces)), Carry(pending, covered_chars)

    def _may_match(self, data: bytes) -> bool:
        """False only when no pattern occurs in ``data``: the detectors found nothing.

        A leftmost search reports a match whenever the text holds an occurrence (the leftmost
        one), so an empty answer is exact. The detectors are fast because leftmost searches of up
        to 64 patterns get the crate's SIMD prefilter, which the overlapping search never does;
        they only say whether the overlapping scan, which finds every occurrence, must run.
        """
        if not self._detectors:
            return True
        return any(detector.find_matches_as_indexes(data) for detector in self._detectors)

    def _hold_start(self, data: bytes) -> int:
        """Start of the longest suffix of ``data`` that is a proper prefix of some pattern.

        Only the last ``longest - 1`` bytes can start one. A candidate with 8 bytes or more
        after it begins with the 8-byte head of a longer pattern, so the heads automaton finds
        those in one call however long the patterns are; the last 7 positions are tried as they
        are. Each candidate, leftmost first, is then tested exactly.
        """
        size = len(data)
        low = max(0, size - (self.longest - 1))
        candidates: list[int] = []
        if self._heads is not None and size - low >= _HEAD:
            found = self._heads.find_matches_as_indexes(memoryview(data)[low:], overlapping=True)
            candidates = sorted(low + start for _, start, _ in found)
        candidates.extend(range(max(low, size - _HEAD + 1), size))
        for index in candidates:
            suffix = data[index:]
            # The patterns that start with ``suffix`` and are longer follow it in sorted order.
            after = bisect_right(self._sorted, suffix)
            if after < len(self._sorted) and self._sorted[after].startswith(suffix):
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


def mask_of(values: Iterable[str]) -> str:
    """The mask a :class:`Masker` of ``values`` writes, without building its automata (an
    attempt's mask is fixed at claim; its masker is built when its first log arrives)."""
    return _mask_char(patterns_for(sorted(set(values)))) * MASK_REPEAT


class MaskerCache:
    """Built maskers, so a busy attempt does not rebuild its automata per chunk.

    Found by their values (hashed) or, through :meth:`get_for`, by a key under which the values
    never change, which spares the caller reading them at all.
    """

    def __init__(self, size: int = 128) -> None:
        self.size = size
        self._items: OrderedDict[str, Masker] = OrderedDict()
        self._lock = Lock()

    def get(self, values: Iterable[str]) -> Masker:
        # Keyed by the values themselves (hashed), so a hit costs no pattern derivation.
        distinct = sorted(set(values))
        key = sha256("\x00".join(distinct).encode("utf-8", "surrogatepass")).hexdigest()
        masker = self._lookup(key)
        if masker is None:
            masker = self._store(key, Masker(patterns_for(distinct)))
        return masker

    def get_for(self, key: str, values: Callable[[], Iterable[str]]) -> Masker:
        """The masker cached under ``key``; on a miss, :meth:`get` of ``values()``, cached so.

        ``key`` must name the values for good (an attempt's issued values are fixed at claim);
        it should not look like a hex digest, which is how :meth:`get` keys its entries.
        """
        masker = self._lookup(key)
        if masker is None:
            masker = self._store(key, self.get(values()))
        return masker

    def _lookup(self, key: str) -> Masker | None:
        with self._lock:
            masker = self._items.get(key)
            if masker is not None:
                self._items.move_to_end(key)
            return masker

    def _store(self, key: str, masker: Masker) -> Masker:
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
# credential (a lost lease, a timeout) does not need to: it stores what Masker.finish gave when
# the carry was sealed (kept beside it: the mask, or a tail too short to count as secret).


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
