"""Typed errors raised by core use cases.

Front doors translate them: HTTP status, SSH exit status and stderr, hook rejection, CLI exit 2.
Messages are written for the person who caused them: they name what was wrong and where, and
never contain internal details (paths of the server, SQL, tracebacks).
"""

from __future__ import annotations


class ForgeCIError(Exception):
    """Base of every error a use case raises on purpose."""

    #: Stable machine-readable code, used by JSON APIs.
    code = "error"
    #: HTTP status a web front door should answer with.
    http_status = 400

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class InvalidInput(ForgeCIError):
    """The caller sent something malformed: a bad name, key, file or value."""

    code = "invalid"
    http_status = 400


class NotFound(ForgeCIError):
    """The thing does not exist, or the caller may not know that it exists."""

    code = "not_found"
    http_status = 404


class PermissionDenied(ForgeCIError):
    """The caller may see the thing but not do this to it."""

    code = "forbidden"
    http_status = 403


class Unauthenticated(ForgeCIError):
    """No valid credential was presented."""

    code = "unauthenticated"
    http_status = 401


class Conflict(ForgeCIError):
    """The request contradicts the current state (duplicate, replay mismatch, wrong state)."""

    code = "conflict"
    http_status = 409


class RepositoryBusy(ForgeCIError):
    """Another process holds the repository's write lock for longer than we may wait."""

    code = "repository_busy"
    http_status = 503


class SchemaNotCurrent(ForgeCIError):
    """The database schema is missing, older or newer than this code expects."""

    code = "schema_not_current"
    http_status = 503


class Unavailable(ForgeCIError):
    """A dependency (database, Redis, Docker) cannot be reached right now."""

    code = "unavailable"
    http_status = 503


class NeedsInspection(ForgeCIError):
    """Recorded state and the repository disagree; an operator must look before writes resume."""

    code = "needs_inspection"
    http_status = 409


class ConfigurationError(ForgeCIError):
    """Settings are missing or malformed."""

    code = "configuration"
    http_status = 500
