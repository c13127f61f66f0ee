"""The secret channel of assignments: which values an attempt receives, and remembering them.

Plans name secrets only (env values ``{"secret": NAME}``). At claim a :class:`SecretSource`
resolves the names a job references into values for each step; the assignment carries them in
its ``secrets`` object (step id -> env name -> value) and nowhere else. This server version has
no secret store, so the default source, :class:`NoSecretStore`, delivers nothing: a job that
references a secret fails at claim with a clear reason instead of running with an empty value.

Issued values are kept for the attempt's lifetime so that its logs can be masked, sealed under
a key derived from the attempt credential (which the server does not store): only requests
that present the credential can read them. They are deleted when the attempt ends.
"""

from __future__ import annotations

from typing import Any, Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session

from forge_ci.errors import ForgeCIError
from forge_ci.masking import open_text, seal_text
from forge_ci.models import Attempt, AttemptSecret, Job, Run

#: step id -> env name -> value
StepSecrets = dict[str, dict[str, str]]


class SecretUnavailable(ForgeCIError):
    """A job references a secret that cannot be delivered to it."""

    code = "secret_unavailable"
    http_status = 403


def references(plan_job: dict[str, Any]) -> dict[str, dict[str, str]]:
    """step id -> env name -> secret name, for every secret reference of a planned job."""
    found: dict[str, dict[str, str]] = {}
    for step in plan_job.get("steps", []):
        for env_name, value in (step.get("env") or {}).items():
            if isinstance(value, dict) and set(value) == {"secret"}:
                found.setdefault(str(step["id"]), {})[env_name] = str(value["secret"])
    return found


class SecretSource(Protocol):
    """Resolves a job's secret references into values, rechecking its policy; may refuse."""

    def values_for(
        self, session: Session, run: Run, job: Job, wanted: dict[str, dict[str, str]]
    ) -> StepSecrets: ...


class NoSecretStore:
    """The source of a server without a secret store: nothing is delivered."""

    def values_for(
        self, session: Session, run: Run, job: Job, wanted: dict[str, dict[str, str]]
    ) -> StepSecrets:
        for step_id, env in sorted(wanted.items()):
            for env_name, secret in sorted(env.items()):
                raise SecretUnavailable(
                    f"step {step_id} needs secret {secret} (env {env_name}), but this server "
                    "has no secret store"
                )
        return {}


def _context(attempt_id: int, step_id: str, name: str) -> str:
    return f"secret/{attempt_id}/{step_id}/{name}"


def remember(session: Session, attempt: Attempt, token: str, values: StepSecrets) -> None:
    """Keep the values issued to ``attempt``, sealed under its credential."""
    for step_id, env in values.items():
        for name, value in env.items():
            session.add(
                AttemptSecret(
                    attempt_id=attempt.id,
                    step_id=step_id,
                    name=name,
                    sealed=seal_text(token, _context(attempt.id, step_id, name), value),
                )
            )


def remember_masks(session: Session, attempt: Attempt, token: str, values: list[str]) -> int:
    """Keep ``::add-mask::`` values beside the issued ones (step ``""``, names ``mask-<n>``);
    how many were new."""
    known = set(issued_values(session, attempt, token)) if values else set()
    added = 0
    for value in values:
        if value in known:
            continue
        known.add(value)
        name = f"mask-{attempt.mask_count + added}"
        session.add(
            AttemptSecret(
                attempt_id=attempt.id,
                step_id=MASKS_STEP,
                name=name,
                sealed=seal_text(token, _context(attempt.id, MASKS_STEP, name), value),
            )
        )
        added += 1
    session.flush()
    return added


def issued(session: Session, attempt: Attempt, token: str) -> StepSecrets:
    """The values issued to ``attempt`` (readable only with its credential)."""
    stored = _stored(session, attempt, token)
    stored.pop(MASKS_STEP, None)
    return stored


#: The ``step_id`` of the rows that keep ``::add-mask::`` values.
MASKS_STEP = ""


def _stored(session: Session, attempt: Attempt, token: str) -> StepSecrets:
    """Issued values by step, and the ``::add-mask::`` values under :data:`MASKS_STEP`."""
    result: StepSecrets = {}
    # Plain rows, not ORM objects: this runs for every log chunk of an attempt with secrets.
    rows = session.execute(
        select(AttemptSecret.step_id, AttemptSecret.name, AttemptSecret.sealed)
        .where(AttemptSecret.attempt_id == attempt.id)
        .order_by(AttemptSecret.step_id, AttemptSecret.name)
    )
    for step_id, name, sealed in rows:
        value = open_text(token, _context(attempt.id, step_id, name), sealed)
        result.setdefault(step_id, {})[name] = value
    return result


def issued_values(session: Session, attempt: Attempt, token: str) -> list[str]:
    """Every value masked for ``attempt``: issued secrets and ``::add-mask::`` values."""
    stored = _stored(session, attempt, token)
    return [value for env in stored.values() for value in env.values()]
