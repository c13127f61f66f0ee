"""The runner's report: one JSON line on standard output at the end, and its exit status.

::

    {"version": 1, "attempt_id": "12", "execution_id": "<32 hex>",
     "result": "success", "reason": "",
     "reported": true, "confirmed": true, "conclusion": "success",
     "steps": [{"id": "build", "outcome": "success", "conclusion": "success",
                "exit_code": 0}],
     "log_sequence": "14", "dropped_log_characters": 0}

``result`` is what the runner concluded locally (``success``, ``failure``, ``cancelled``,
``timed_out``, ``lost``, ``ended``, ``refused`` or ``error``); it is not authoritative.
``reported`` says the server acknowledged the runner's completion; ``confirmed`` says the
server's view of the attempt is known to be *completed*, and ``conclusion`` is then the
server's conclusion. Exit status::

    0  confirmed success: the server recorded the runner's reported success
    1  confirmed non-success: the server recorded another conclusion
    2  configuration error, or no confirmed result (the provider must not assume anything)

Job outputs are never in the report (they may hold secret values; the server masks them). The
report and the runner's messages on standard error are defused: a line starting with ``::``
gets a prefix, so nothing that reads the runner's output can take a step's text for a
workflow command.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Any, TextIO

from forge_ci.protocol import AttemptStatus, decimal


def defuse(text: str) -> str:
    """``text`` with every line that starts with ``::`` (after spaces) prefixed by ``| ``."""
    lines = text.split("\n")
    return "\n".join("| " + line if line.lstrip().startswith("::") else line for line in lines)


@dataclass(frozen=True)
class StepRecord:
    id: str
    outcome: str
    conclusion: str
    exit_code: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "outcome": self.outcome,
            "conclusion": self.conclusion,
            "exit_code": self.exit_code,
        }


@dataclass
class Report:
    attempt_id: int
    execution_id: str
    result: str
    reason: str = ""
    reported: bool = False
    server: AttemptStatus | None = None
    steps: list[StepRecord] = field(default_factory=list)
    log_sequence: int = 0
    dropped_log_characters: int = 0

    @property
    def confirmed(self) -> bool:
        return self.server is not None and self.server.state == "completed"

    @property
    def conclusion(self) -> str:
        return self.server.conclusion if self.server is not None and self.confirmed else ""

    def exit_status(self) -> int:
        if not self.confirmed:
            return 2
        if self.reported and self.conclusion == "success":
            return 0
        return 1

    def as_dict(self) -> dict[str, Any]:
        return {
            "version": 1,
            "attempt_id": decimal(self.attempt_id) if self.attempt_id else "",
            "execution_id": self.execution_id,
            "result": self.result,
            "reason": defuse(self.reason),
            "reported": self.reported,
            "confirmed": self.confirmed,
            "conclusion": self.conclusion,
            "steps": [step.as_dict() for step in self.steps],
            "log_sequence": decimal(self.log_sequence),
            "dropped_log_characters": self.dropped_log_characters,
        }

    def write(self, out: TextIO | None = None) -> None:
        stream = out or sys.stdout
        stream.write(json.dumps(self.as_dict(), sort_keys=True) + "\n")
        stream.flush()


def say(message: str) -> None:
    """A diagnostic line on standard error (for the provider's container log), defused."""
    sys.stderr.write(defuse(f"forge-ci runner: {message}") + "\n")
    sys.stderr.flush()
