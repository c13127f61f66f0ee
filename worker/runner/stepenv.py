"""What a step runs with: its rendered env, its secret values and its working directory.

Standard library only (the runner runs under ``python -S``). Problems raise :class:`StepSetupError`
with a message for the step's log; the job turns it into a failed step that never started.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from forge_ci.protocol import AssignmentStep
from worker.runner.client import ApiClient, NoAnswer, Refused
from worker.runner.clock import now
from worker.runner.contexts import GENERATED_PREFIX, SECRET_HOLDER_PREFIX
from worker.runner.evaluation import EvaluationError, render
from worker.runner.step_secrets import fetch_step_secrets
from worker.runner.watchdog import Watchdog


class StepSetupError(Exception):
    """The step cannot start: its env, secrets or working directory are unusable."""


def has_secrets(step: AssignmentStep) -> bool:
    return any(isinstance(v, dict) and "secret" in v for v in step.env.values())


def ask_for_secrets(
    client: ApiClient,
    attempt_id: int,
    execution_id: str,
    step: AssignmentStep,
    watchdog: Watchdog,
    give_up: Callable[[], bool],
) -> dict[str, str]:
    """The running step's secret values, asked for now (none asked when it has none)."""
    if not has_secrets(step):
        return {}
    sent_at = now()
    try:
        values, status = fetch_step_secrets(
            client, attempt_id, execution_id, step.id, until=watchdog.safe_until(), give_up=give_up
        )
    except NoAnswer as exc:
        raise StepSetupError(f"the step's secrets did not arrive: {exc}") from None
    except Refused as refused:
        if refused.attempt is not None:
            watchdog.observe(refused.attempt, sent_at)
        raise StepSetupError(f"the step's secrets were refused: {refused.message}") from None
    watchdog.observe(status, sent_at)
    return values


def with_secrets(
    step: AssignmentStep, delivered: dict[str, str], contexts: dict[str, Any]
) -> dict[str, Any]:
    """``contexts`` and the ``secrets`` context of the step: the values delivered for its holders
    (``_FORGE_CI_EXPR_SECRET_NAME``) by name, and ``GITHUB_TOKEN``, the job token."""
    github = contexts.get("github")
    token = github.get("token") if isinstance(github, dict) else None
    values = {"GITHUB_TOKEN": token} if isinstance(token, str) else {}
    for name, value in step.env.items():
        if name.startswith(SECRET_HOLDER_PREFIX) and isinstance(value, dict):
            if name not in delivered:
                raise StepSetupError(f"secret {value.get('secret')} was not delivered to this step")
            values[str(value.get("secret"))] = delivered[name]
    return {**contexts, "secrets": values}


def render_env(
    step: AssignmentStep,
    contexts: dict[str, Any],
    delivered: dict[str, str],
    with_env: Callable[[dict[str, str]], dict[str, Any]],
) -> tuple[dict[str, str], dict[str, str]]:
    """The step's rendered env and its secret values (by env name).

    The env values see ``contexts`` and the step's ``secrets``; the variables generated for a
    workflow step's script (``_FORGE_CI_EXPR_*``, forge_ci.workflow.injection) see all of the
    step's env (``with_env(env)`` gives the contexts with it). The values of the secret holders
    are among the secret values; the process never gets them (worker.runner.environment).
    """
    env: dict[str, str] = {}
    values: dict[str, str] = {}
    ordered = sorted(step.env.items(), key=lambda item: item[0].startswith(GENERATED_PREFIX))
    full = False
    contexts = with_secrets(step, delivered, contexts)
    for name, value in ordered:
        if name.startswith(GENERATED_PREFIX) and not full:
            contexts, full = with_secrets(step, delivered, with_env(env)), True
        if isinstance(value, dict) and "secret" in value:
            if name not in delivered:
                raise StepSetupError(
                    f"env {name}: secret {value['secret']} was not delivered to this step"
                )
            values[name] = delivered[name]
            continue
        try:
            env[name] = render(value, contexts, f"step {step.id}: env {name}")
        except EvaluationError as exc:
            raise StepSetupError(str(exc)) from None
    return env, values


def contains(root: str, path: str) -> bool:
    """Whether ``path`` is ``root`` or inside it."""
    return path == root or path.startswith(root + os.sep)


def working_directory(root: str, relative: str) -> str:
    """``relative`` resolved (links included) inside the workspace ``root``."""
    if not relative:
        return root
    if "\x00" in relative:
        raise StepSetupError(f"working-directory {relative!r} contains a NUL character")
    if relative.startswith("/") and not contains(root, os.path.normpath(relative)):
        raise StepSetupError(f"working-directory {relative!r} must be inside the workspace")
    resolved = os.path.realpath(os.path.join(root, relative))
    if not contains(root, resolved):
        raise StepSetupError(f"working-directory {relative!r} leads outside the workspace")
    if not os.path.isdir(resolved):
        raise StepSetupError(f"working-directory {relative!r} does not exist in the workspace")
    return resolved
