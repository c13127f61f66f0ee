"""What a changed poll of a run page sends: only the jobs whose shown content changed.

Each answer of ``.../updates`` names its ``base``: a digest of every job it describes, as the
reader now has them. A poll that sends that ``base`` back as ``since`` gets only the jobs whose
presented content differs from what that base held; the page's script
(``web/static/pipelines.js``) applies them over what it shows. The server remembers the last
:data:`KEPT` bases of this process (a base is content-addressed, so any process that computed
the same answer knows it); for a base it does not know (too old, from another process, made
up) the answer is the whole run, ``"full": true``. What a delta leaves out is therefore always
what the reader already shows, whichever process or request produced it.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

#: Bases remembered per process (each holds one short digest per job of its run).
KEPT = 128


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

    def changed_jobs(self, run_id: int, jobs: list[dict[str, Any]], since: str) -> Delta:
        """The presented ``jobs`` of run ``run_id`` that differ from base ``since`` (all of
        them when ``since`` is empty or unknown), and the base of the whole answer."""
        digests = {job["id"]: _job_digest(job) for job in jobs}
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
