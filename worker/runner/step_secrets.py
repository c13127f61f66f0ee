"""Asking the server for one started step's secret values (``POST attempts/<id>/secrets``).

The assignment names a step's secrets (env values ``{"secret": NAME}``) but holds no value.
After the step was reported running, the runner asks for its values; the server rechecks the
lease, permissions, the provider's grant, cancellation, the step's state and the secret
policy each time. The values go into the step's process environment only: never into argv,
a script or a file.
"""

from __future__ import annotations

from collections.abc import Callable

from forge_ci import protocol
from forge_ci.protocol import (
    API_PREFIX,
    AttemptStatus,
    ProtocolError,
    SecretsRequest,
    parse_secrets_response,
    request_body,
)
from worker.runner.client import ApiClient, NoAnswer


class SecretsRefused(Exception):
    """The values did not arrive: the step cannot run (the message says why)."""


def fetch_step_secrets(
    client: ApiClient,
    attempt_id: int,
    execution_id: str,
    step_id: str,
    *,
    until: float,
    give_up: Callable[[], bool] | None = None,
) -> tuple[dict[str, str], AttemptStatus]:
    """The env name -> value map of ``step_id``; NoAnswer or Refused from the client."""
    path = f"{API_PREFIX}/attempts/{attempt_id}/secrets"
    body = request_body(SecretsRequest(execution_id, step_id))
    answer = client.post(path, protocol.dumps(body), until=until, give_up=give_up)
    try:
        answered_step, env, status = parse_secrets_response(protocol.loads(answer))
    except ProtocolError as exc:
        raise NoAnswer(f"unreadable answer from secrets: {exc.message}") from None
    if answered_step != step_id:
        raise NoAnswer(f"secrets answered for step {answered_step}, not {step_id}")
    return env, status
