"""Secrets of attempts: checked at claim, delivered just in time to one running step, remembered.

Plans and assignments name secrets only (env values ``{"secret": NAME}``). At claim the
source's policy is checked for every name the job references: a job that may not receive one
fails instead of running without it. After the runner has started a step it asks for that
step's values (``POST attempts/<id>/secrets``); every delivery rechecks, in the attempt's
locked transaction::

    live lease, running, bound to this execution   (else 409 attempt_ended / execution_mismatch)
      ─► no cancellation requested                 (409 cancel_requested)
      ─► requester may still run workflows         (else the attempt is cancelled; 403)
      ─► provider active and granted the repository (403 provider_not_permitted)
      ─► the step is running                        (409 step_not_running; unknown: 400)
      ─► every secret of the step allowed now       (403 secret_unavailable)
      ─► at most 256 KiB of values per attempt      (413 secret_limit)

Delivery is idempotent per attempt, step and env name: a value issued once is returned again
(a running step keeps the value it first got), while later steps get current values. Issued
values are kept sealed under a key derived from the attempt credential (never stored), for
masking the attempt's logs, and deleted when the attempt ends.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from forge_ci import states
from forge_ci.coordinator.attempts import running_job
from forge_ci.coordinator.errors import StepConflict, UnknownStep
from forge_ci.errors import ForgeCIError, PermissionDenied
from forge_ci.masking import open_text, seal_text
from forge_ci.models import Attempt, AttemptSecret, AttemptStep, Job, Provider, ProviderGrant, Run
from forge_ci.protocol import MAX_ATTEMPT_SECRET_BYTES, SecretsRequest
from forge_ci.secrets.policy import open_secret, secret_refusal
from forge_ci.secrets.sealing import Keyring

#: step id -> env name -> value
StepSecrets = dict[str, dict[str, str]]


class SecretUnavailable(ForgeCIError):
    """A job references a secret that cannot be delivered to it."""

    code = "secret_unavailable"
    http_status = 403


class SecretLimitReached(ForgeCIError):
    code = "secret_limit"
    http_status = 413


class ProviderNotPermitted(PermissionDenied):
    code = "provider_not_permitted"


class StepNotRunning(StepConflict):
    code = "step_not_running"


def references(plan_job: dict[str, Any]) -> dict[str, dict[str, str]]:
    """step id -> env name -> secret name, for every secret reference of a planned job."""
    found: dict[str, dict[str, str]] = {}
    for step in plan_job.get("steps", []):
        for env_name, value in (step.get("env") or {}).items():
            if isinstance(value, dict) and set(value) == {"secret"}:
                found.setdefault(str(step["id"]), {})[env_name] = str(value["secret"])
    return found


class SecretSource(Protocol):
    """Where values come from and whether a run may have them now (the store; tests may fake)."""

    def refusal(self, session: Session, run: Run, name: str) -> str | None: ...

    def value(self, session: Session, run: Run, name: str) -> str | None: ...


class StoreSecrets:
    """The repository secret store, sealed with the key file at ``key_path``."""

    def __init__(self, key_path: Path) -> None:
        self.key_path = key_path

    def refusal(self, session: Session, run: Run, name: str) -> str | None:
        return secret_refusal(
            session, run.repository_id, run.event_name, run.ref, run.workflow_path, name
        )

    def value(self, session: Session, run: Run, name: str) -> str | None:
        return open_secret(session, Keyring.load(self.key_path), run.repository_id, name)


class NoSecrets:
    """A source that has no secrets (claims called without the store: benches, tests)."""

    def refusal(self, session: Session, run: Run, name: str) -> str | None:
        return f"secret {name} cannot be given: this claim has no secret store"

    def value(self, session: Session, run: Run, name: str) -> str | None:
        return None


NO_SECRETS = NoSecrets()


def claim_refusal(session: Session, source: SecretSource, run: Run, job: Job) -> str | None:
    """Why ``job`` cannot be claimed for want of a secret, or None."""
    for step_id, env in sorted(references(job.definition()).items()):
        for env_name, secret in sorted(env.items()):
            refusal = source.refusal(session, run, secret)
            if refusal is not None:
                return f"step {step_id} (env {env_name}): {refusal}"
    return None


def _context(attempt_id: int, step_id: str, name: str) -> str:
    return f"secret/{attempt_id}/{step_id}/{name}"


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


def issued_count(session: Session, attempt: Attempt) -> int:
    """How many values are masked for the attempt so far (names the masker's generation)."""
    return int(
        session.scalar(
            select(func.count())
            .select_from(AttemptSecret)
            .where(AttemptSecret.attempt_id == attempt.id)
        )
        or 0
    )


def _provider_refusal(session: Session, attempt: Attempt) -> str | None:
    provider = session.get(Provider, attempt.provider_id)
    if provider is None or provider.state != "active":
        return "the provider of this attempt is no longer active"
    if provider.scope != "all":
        grant = session.scalar(
            select(ProviderGrant.provider_id).where(
                ProviderGrant.provider_id == provider.id,
                ProviderGrant.repository_id == attempt.repository_id,
            )
        )
        if grant is None:
            return "the provider of this attempt no longer has access to the repository"
    return None


def deliver(
    session: Session,
    source: SecretSource,
    attempt: Attempt,
    token: str,
    request: SecretsRequest,
    now: datetime,
) -> dict[str, str] | str:
    """The secret env values of one running step (see the module docstring for the checks).

    A string instead means the requester lost permission and the attempt was just cancelled
    (the caller commits that and refuses the request).
    """
    job = running_job(session, attempt, request.execution_id, now, "asking for secrets")
    if isinstance(job, str):
        return job
    run = job.run
    provider_refusal = _provider_refusal(session, attempt)
    if provider_refusal is not None:
        raise ProviderNotPermitted(provider_refusal)
    step = session.scalar(
        select(AttemptStep).where(
            AttemptStep.attempt_id == attempt.id, AttemptStep.step_id == request.step_id
        )
    )
    if step is None:
        raise UnknownStep(f"step {request.step_id!r} is not a step of this job")
    if step.state != states.RUNNING:
        raise StepNotRunning(
            f"step {request.step_id} is {step.state}; secrets are given to running steps only"
        )
    wanted = references(job.definition()).get(request.step_id, {})
    already = issued(session, attempt, token)
    mine = already.get(request.step_id, {})
    total = sum(len(v.encode("utf-8")) for env in already.values() for v in env.values())
    delivered: dict[str, str] = {}
    for env_name, secret in sorted(wanted.items()):
        refusal = source.refusal(session, run, secret)
        if refusal is not None:
            raise SecretUnavailable(f"step {request.step_id} (env {env_name}): {refusal}")
        if env_name in mine:
            delivered[env_name] = mine[env_name]
            continue
        value = source.value(session, run, secret)
        if value is None:
            raise SecretUnavailable(
                f"step {request.step_id} (env {env_name}): secret {secret} does not exist"
            )
        total += len(value.encode("utf-8"))
        if total > MAX_ATTEMPT_SECRET_BYTES:
            raise SecretLimitReached(
                f"step {request.step_id}: the attempt would receive more than "
                f"{MAX_ATTEMPT_SECRET_BYTES} bytes of secret values"
            )
        session.add(
            AttemptSecret(
                attempt_id=attempt.id,
                step_id=request.step_id,
                name=env_name,
                sealed=seal_text(token, _context(attempt.id, request.step_id, env_name), value),
            )
        )
        delivered[env_name] = value
    session.flush()
    return delivered
