"""What the status functions ``success()``, ``failure()``, ``cancelled()``, ``always()`` see.

GitHub evaluates a job's ``if`` against the results of the jobs it depends on and a step's ``if``
against the status of its job so far; both reduce to the same two facts, which is all a
:class:`JobStatus` holds:

    always()     always
    cancelled()  the run was cancelled
    success()    not cancelled, and every prior result is "success"
    failure()    not cancelled, and some prior result is "failure"

The runner's own truth table (``shared/corpus/actions-runner/status-functions.json``, job status
null / Success / Failure / Cancelled for a step) is replayed by the tests through
:meth:`JobStatus.for_step`. A skipped dependency makes ``success()`` false, which is why GitHub
skips the jobs that need a skipped job unless their ``if`` says otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from forge_ci.records import record

#: Results a job or the job-so-far can have, as the status functions read them.
RESULTS: Final = frozenset({"success", "failure", "cancelled", "skipped"})


@record(frozen=True, slots=True)
class JobStatus:
    """The facts behind the status functions, for one ``if`` evaluation.

    ``results`` are the results that precede the condition: for a job, those of the jobs it
    needs (all ancestors, because GitHub's ``failure()`` looks through the whole chain); for a
    step, the job's status so far (one result, or none before anything ran).
    """

    results: tuple[str, ...] = ()
    cancelled: bool = False

    def __post_init__(self) -> None:
        unknown = sorted(set(self.results) - RESULTS)
        if unknown:
            raise ValueError(f"unknown job results {unknown}; expected some of {sorted(RESULTS)}")

    @classmethod
    def for_job(cls, needs_results: Iterable[str], *, cancelled: bool = False) -> JobStatus:
        """The status seen by a job-level ``if``: its dependencies' results, run cancellation."""
        return cls(tuple(needs_results), cancelled)

    @classmethod
    def for_step(cls, job_status: str | None) -> JobStatus:
        """The status seen by a step-level ``if``: the job's status so far (None before any)."""
        if job_status is None:
            return cls()
        if job_status == "cancelled":
            return cls((), True)
        return cls((job_status,))

    def success(self) -> bool:
        """``success()``: nothing failed, was skipped or was cancelled."""
        return not self.cancelled and all(result == "success" for result in self.results)

    def failure(self) -> bool:
        """``failure()``: something failed and the run is not cancelled."""
        return not self.cancelled and "failure" in self.results
