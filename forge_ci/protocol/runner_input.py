"""The provider -> runner channel: one JSON envelope on the runner's standard input.

Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from forge_ci.protocol.assignment import Assignment
from forge_ci.protocol.fields import invalid, kind, loads, parse_object, parse_token, string, utf8

# --- The runner's standard input -----------------------------------------------------------------
#
# The provider starts ``python3 -S -m worker.runner`` in the job container and writes one JSON
# document to its standard input, then closes it. The credential travels only this way: never in
# argv, the environment or a file.

#: Version of the runner's standard-input envelope.
RUNNER_INPUT_VERSION: Final = 1
# Where things are in the job container (the provider mounts them; deploy/runner.Dockerfile
# creates the mount points)::
#
#   /workspace/              RUNNER_WORKSPACE: the attempt's workspace volume
#   /run/forge-ci/           RUNNER_SOCKET_DIR: the per-attempt directory, mounted read-only
#     api.sock               RUNNER_API_SOCKET: the runner API, forwarded for this attempt only
#     egress.sock            RUNNER_EGRESS_SOCKET: the provider's egress proxy (when it allows
#                            egress; the runner forwards 127.0.0.1:<port> in the job to it)

#: Where the provider mounts the attempt's workspace volume.
RUNNER_WORKSPACE: Final = "/workspace"
#: Where the provider mounts the per-attempt directory that holds the runner API socket.
RUNNER_SOCKET_DIR: Final = "/run/forge-ci"
#: The socket's file name in that directory (the provider binds it on the host side).
RUNNER_API_SOCKET_NAME: Final = "api.sock"
#: The runner API socket as the runner sees it.
RUNNER_API_SOCKET: Final = f"{RUNNER_SOCKET_DIR}/{RUNNER_API_SOCKET_NAME}"
#: The egress proxy's socket in that directory, and as the runner sees it.
RUNNER_EGRESS_SOCKET_NAME: Final = "egress.sock"
RUNNER_EGRESS_SOCKET: Final = f"{RUNNER_SOCKET_DIR}/{RUNNER_EGRESS_SOCKET_NAME}"
#: The envelope is at most this long (the plan is at most 1 MiB; secrets and contexts add some).
MAX_RUNNER_INPUT_BYTES: Final = 8 * 1024 * 1024
#: Bounds of ``step_minute_seconds``.
MIN_STEP_MINUTE_SECONDS: Final = 0.1
STEP_MINUTE_SECONDS: Final = 60.0


def _absolute_path(value: object, name: str) -> str:
    text = utf8(string(value, name, max_bytes=1024), name)
    if not text.startswith("/") or "/../" in f"{text}/" or "/./" in f"{text}/":
        raise invalid(f"{name} must be an absolute path without . or .. components")
    return text


def _minute(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise invalid(f"{name} must be a JSON number of seconds, not {kind(value)}")
    if not MIN_STEP_MINUTE_SECONDS <= value <= STEP_MINUTE_SECONDS:
        raise invalid(
            f"{name} must be between {MIN_STEP_MINUTE_SECONDS:g} and {STEP_MINUTE_SECONDS:g}"
        )
    return float(value)


@dataclass(frozen=True)
class RunnerInput:
    """What the provider writes to the runner's standard input: one JSON object, then EOF.

    ``{"version": 1, "credential": "<64 hex>", "api_socket": "/run/forge-ci/api.sock",
    "workspace": "/workspace", "assignment": {...}}``, plus optionally
    ``"step_minute_seconds"`` and ``"egress_socket"``.
    """

    #: The attempt credential (the claim's ``attempt_token``); never the provider's.
    credential: str
    #: The Unix socket that forwards this attempt's runner API endpoints.
    api_socket: str
    #: The empty directory the job works in (``$GITHUB_WORKSPACE``).
    workspace: str
    assignment: Assignment
    #: How long a minute of a *step* ``timeout-minutes`` lasts. Tests of the runner shorten it;
    #: it can only make step limits stricter (the job deadline is the server's).
    step_minute_seconds: float = STEP_MINUTE_SECONDS
    #: The provider's egress proxy socket; "" when the provider allows no egress.
    egress_socket: str = ""

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "version": RUNNER_INPUT_VERSION,
            "credential": self.credential,
            "api_socket": self.api_socket,
            "workspace": self.workspace,
            "assignment": self.assignment.to_json(),
        }
        if self.step_minute_seconds != STEP_MINUTE_SECONDS:
            body["step_minute_seconds"] = self.step_minute_seconds
        if self.egress_socket:
            body["egress_socket"] = self.egress_socket
        return body

    @classmethod
    def from_json(cls, obj: object) -> RunnerInput:
        parsed = parse_object(
            obj,
            {
                "credential": (True, parse_token),
                "api_socket": (True, _absolute_path),
                "workspace": (True, _absolute_path),
                "assignment": (True, lambda v, n: Assignment.from_json(v)),
                "step_minute_seconds": (False, _minute),
                "egress_socket": (False, _absolute_path),
            },
            "runner input",
        )
        return cls(**parsed)


def parse_runner_input(body: bytes) -> RunnerInput:
    """The runner's standard input, strictly parsed (ProtocolError names what is wrong)."""
    if len(body) > MAX_RUNNER_INPUT_BYTES:
        raise invalid(f"the runner input is larger than {MAX_RUNNER_INPUT_BYTES} bytes")
    if not body.strip():
        raise invalid("the runner input is empty; write one JSON object to standard input")
    return RunnerInput.from_json(loads(body))
