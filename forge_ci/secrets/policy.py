"""Who may use a secret, and what a run's ``vars`` context holds.

A secret may be used only by a run of an allowed event (``workflow_dispatch``, ``push``,
``schedule``: never ``pull_request`` or anything else) on its one branch and from its one
workflow file. The rule is applied three times: when a run is created (a missing or disallowed
secret fails the request: 400 for a dispatch, a diagnostic on that workflow for a push event),
when a job is claimed (the job fails instead of running without it), and at every delivery
(403), so deleting a secret or narrowing its scope stops every later delivery.

Variables are not secret: every run sees the repository-wide ones and the ones scoped to its
branch and workflow.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from typing import Any

from sqlalchemy import bindparam, or_, select
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from forge_ci.errors import ForgeCIError
from forge_ci.models import RepositorySecret, RepositoryVariable
from forge_ci.secrets.sealing import Keyring, secret_context

#: Events whose runs may receive secrets.
SECRET_EVENTS = ("workflow_dispatch", "push", "schedule")


class SecretRefused(ForgeCIError):
    """A run (or one of its steps) references a secret it may not receive."""

    code = "secret_refused"
    http_status = 400


def plan_secrets(plan: dict[str, Any]) -> list[str]:
    """Every secret name a run's plan references (step ``env`` and ``with`` values), once each."""
    names: set[str] = set()
    for job in plan.get("jobs", []):
        for step in job.get("steps", []):
            for field in ("env", "with"):
                for value in (step.get(field) or {}).values():
                    if isinstance(value, dict) and set(value) == {"secret"}:
                        names.add(str(value["secret"]))
    return sorted(names)


def secret_refusal(
    session: Session,
    repository_id: int,
    event_name: str,
    ref: str,
    workflow_path: str,
    name: str,
) -> str | None:
    """Why a run with these facts may not receive secret ``name`` now, or None."""
    if event_name not in SECRET_EVENTS:
        return (
            f"secret {name} is not given to {event_name} runs (only to workflow_dispatch, "
            "push and schedule runs)"
        )
    row = session.scalar(
        select(RepositorySecret).where(
            RepositorySecret.repository_id == repository_id,
            RepositorySecret.name == name,
            RepositorySecret.deleted_at.is_(None),
        )
    )
    if row is None:
        return f"secret {name} does not exist in this repository"
    if ref != f"refs/heads/{row.branch}":
        return f"secret {name} may only be used on branch {row.branch}, not {_ref_name(ref)}"
    if workflow_path != row.workflow_path:
        return f"secret {name} may only be used by {row.workflow_path}, not {workflow_path}"
    return None


def _ref_name(ref: str) -> str:
    return ref.removeprefix("refs/heads/") or "(no branch)"


def require_secrets(
    session: Session,
    repository_id: int,
    event_name: str,
    ref: str,
    workflow_path: str,
    names: Iterable[str],
) -> None:
    """Raise SecretRefused naming the first secret of ``names`` such a run may not receive."""
    for name in sorted(set(names)):
        refusal = secret_refusal(session, repository_id, event_name, ref, workflow_path, name)
        if refusal is not None:
            raise SecretRefused(refusal)


def open_secret(session: Session, keyring: Keyring, repository_id: int, name: str) -> str | None:
    """The current value of a live secret, or None."""
    sealed = session.scalar(
        select(RepositorySecret.sealed).where(
            RepositorySecret.repository_id == repository_id,
            RepositorySecret.name == name,
            RepositorySecret.deleted_at.is_(None),
        )
    )
    if sealed is None:
        return None
    return keyring.open(secret_context(repository_id, name), sealed)


@cache
def variables_statement(on_branch: bool) -> Any:
    """Built once per process (a claim reads the variables for every assignment)."""
    scoped: ColumnElement[bool] = RepositoryVariable.branch.is_(None)
    if on_branch:
        scoped = or_(
            scoped,
            (RepositoryVariable.branch == bindparam("branch"))
            & (RepositoryVariable.workflow_path == bindparam("workflow_path")),
        )
    return (
        select(RepositoryVariable.name, RepositoryVariable.value)
        .where(
            RepositoryVariable.repository_id == bindparam("repository_id"),
            RepositoryVariable.deleted_at.is_(None),
            scoped,
        )
        .order_by(RepositoryVariable.name)
    )


def variables_for(
    session: Session, repository_id: int, ref: str, workflow_path: str
) -> dict[str, str]:
    """The ``vars`` context of a run: repository-wide variables and those scoped to it."""
    statement, parameters = variables_query(repository_id, ref, workflow_path)
    rows = session.connection().execute(statement, parameters)
    return {name: value for name, value in rows if value is not None}


def variables_query(repository_id: int, ref: str, workflow_path: str) -> tuple[Any, dict[str, Any]]:
    """The statement (``name``, ``value`` rows; a None value is not a variable) and parameters
    :func:`variables_for` reads."""
    branch = ref.removeprefix("refs/heads/") if ref.startswith("refs/heads/") else None
    parameters = {"repository_id": repository_id, "branch": branch, "workflow_path": workflow_path}
    return variables_statement(branch is not None), parameters
