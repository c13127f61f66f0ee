"""What a changed poll of a run page sends: only the jobs whose shown content changed.

Each answer of ``.../updates`` names its ``base``: a digest of every job it describes, as the
reader now has them. A poll that sends that ``base`` back as ``since`` gets only the jobs whose
presented content differs from what that base held; the page's script
(``web/static/pipelines.js``) applies them over what it shows. The server remembers the last
:data:`KEPT` bases of this process (a base is content-addressed, so any process that computed
the same answer knows it); for a base it does not know (too old, from another process, made
up) the answer is the whole run, ``"full": true``. What a delta leaves out is therefore always
what the reader already shows, whichever process or request produced it.

:class:`Answers` keeps the run as presented for a change token for a few seconds, so that the
many viewers of a run that just changed do not each load and present it again.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

#: Bases remembered per process (each holds one short digest per job of its run).
KEPT = 128
#: Presented runs kept per process, and for how long (:class:`Answers`).
ANSWERS = 16
ANSWER_SECONDS = 2.0


@dataclass(frozen=True)
class Delta:
    """The jobs to send, whether they are all of them, and the base the answer makes."""

    jobs: list[dict[str, Any]]
    full: bool
    base: str


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def _settled(part: dict[str, Any]) -> str:
    """``part`` (a job without its steps, or a step) as text, without what changes by itself
    while it runs: the duration so far, which the page counts on from ``started_at`` and the
    server's clock. (``repr``: the views build these dicts in one fixed key order, and it costs
    half of ``json.dumps`` for a 256-job run.)"""
    if part["completed_at"]:
        return repr(part)
    return repr([value for key, value in part.items() if key != "duration"])


def _job_digest(job: dict[str, Any]) -> str:
    own = {key: value for key, value in job.items() if key != "steps"}
    return _digest(_settled(own) + "".join(_settled(step) for step in job["steps"]))


class Bases:
    """The bases this process handed out lately (one per application, on its state)."""

    def __init__(self, kept: int = KEPT) -> None:
        self._kept = kept
        self._lock = threading.Lock()
        self._digests: OrderedDict[tuple[int, str], dict[str, str]] = OrderedDict()

    def changed_jobs(
        self,
        run_id: int,
        jobs: list[dict[str, Any]],
        since: str,
        digests: dict[str, str] | None = None,
    ) -> Delta:
        """The presented ``jobs`` of run ``run_id`` that differ from base ``since`` (all of
        them when ``since`` is empty or unknown), and the base of the whole answer
        (``digests``: :func:`job_digests` of ``jobs``, if known)."""
        if digests is None:
            digests = job_digests(jobs)
        base = _digest(repr(sorted(digests.items())))
        with self._lock:
            known = self._digests.get((run_id, since)) if since else None
            self._digests[(run_id, base)] = digests
            self._digests.move_to_end((run_id, base))
            while len(self._digests) > self._kept:
                self._digests.popitem(last=False)
        if known is None:
            return Delta(jobs, True, base)
        changed = [job for job in jobs if known.get(job["id"]) != digests[job["id"]]]
        return Delta(changed, False, base)


def job_digests(jobs: list[dict[str, Any]]) -> dict[str, str]:
    """Each presented job's digest, by id (what a base holds)."""
    return {job["id"]: _job_digest(job) for job in jobs}


@dataclass(frozen=True)
class Answer:
    """A run as a changed poll presents it, whoever asks with the same change token."""

    run: dict[str, Any]
    jobs: list[dict[str, Any]]
    controls: dict[str, bool]
    digests: dict[str, str]


class Answers:
    """The runs this process presented in the last :data:`ANSWER_SECONDS`, by run and change
    token (one per application, on its state).

    When a watched run changes, each of its viewers' next poll is a changed one; without this,
    each would load and present the whole run again (tens of milliseconds for hundreds of
    jobs). The token names everything the answer is computed from, the reader's buttons
    included, so one token is one answer, exactly as for a 304; what moves with the clock alone
    (a running duration) is at most :data:`ANSWER_SECONDS` old, which the page counts on from
    ``started_at`` and the answer's fresh ``server_time`` anyway. The caller authorizes every
    request before it asks (the token is only ever computed for a reader).
    """

    def __init__(self, kept: int = ANSWERS, seconds: float = ANSWER_SECONDS) -> None:
        self._kept = kept
        self._seconds = seconds
        self._lock = threading.Lock()
        self._answers: OrderedDict[tuple[int, str], tuple[float, Answer]] = OrderedDict()

    def get(self, run_id: int, tag: str) -> Answer | None:
        with self._lock:
            found = self._answers.get((run_id, tag))
        if found is None or time.monotonic() - found[0] > self._seconds:
            return None
        return found[1]

    def put(self, run_id: int, tag: str, answer: Answer) -> None:
        with self._lock:
            self._answers[(run_id, tag)] = (time.monotonic(), answer)
            self._answers.move_to_end((run_id, tag))
            while len(self._answers) > self._kept:
                self._answers.popitem(last=False)
