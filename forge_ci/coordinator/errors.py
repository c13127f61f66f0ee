"""Typed errors of the runner protocol, each with the stable ``code`` the runner API sends.

They subclass the core's errors, so any front door that maps ``ForgeCIError`` by status keeps
working; the runner API additionally sends ``code``.
"""

from __future__ import annotations

from forge_ci.errors import (
    Conflict,
    ForgeCIError,
    InvalidInput,
    PermissionDenied,
    Unauthenticated,
)


class BadCredential(Unauthenticated):
    """No credential, a malformed one, an unknown one, or one for another attempt."""

    code = "unauthenticated"


class AttemptEnded(Conflict):
    """The attempt already completed (lost, timed out, cancelled...); stop working on it."""

    code = "attempt_ended"


class ClaimConflict(Conflict):
    """A claim retry that does not match the original (other credential, ended attempt)."""

    code = "claim_conflict"


class ExecutionMismatch(Conflict):
    """Another runner instance is bound to this attempt, or none was bound yet."""

    code = "execution_mismatch"


class StepConflict(Conflict):
    """A step report out of order or contradicting an earlier report."""

    code = "step_conflict"


class UnknownStep(InvalidInput):
    """A step id that is not in the attempt's plan."""

    code = "unknown_step"


class LogConflict(Conflict):
    """A log chunk that differs from the one already stored under its sequence."""

    code = "log_conflict"


class LogOutOfOrder(Conflict):
    """A log chunk whose sequence is not the next one."""

    code = "log_out_of_order"


class LogSequenceMismatch(Conflict):
    """A completion that does not cite the last acknowledged log sequence."""

    code = "log_sequence_mismatch"


class LogLimitReached(ForgeCIError):
    """The attempt's log reached the configured cap; the job is being stopped."""

    code = "log_limit_reached"
    http_status = 413


class CompletionConflict(Conflict):
    """A completion for an attempt that completed differently."""

    code = "completion_conflict"


class CancelRequested(Conflict):
    """The attempt is being cancelled: the runner should stop, not fetch more work."""

    code = "cancel_requested"


class SourceNotPermitted(PermissionDenied):
    """The job may not read the repository's source (``permissions: {contents: none}``)."""

    code = "source_not_permitted"


class SourceRefused(ForgeCIError):
    """The run's source cannot be served: a link, submodule or reserved path, or over a limit."""

    code = "source_refused"
    http_status = 422
