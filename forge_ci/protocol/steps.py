"""Steps of the plan as the runner receives them: a job's steps and a composite action's steps.

Standard library only. A value in the plan is text or a runtime template
``{"template": [text | {"expr": source}]}``; an env value may also be a secret reference
``{"secret": NAME}``: the assignment carries names only; the runner asks for a started step's
values (``POST attempts/<id>/secrets``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from forge_ci.protocol.fields import CHECKOUT as CHECKOUT
from forge_ci.protocol.fields import (
    ENV_NAME_RE,
    PROCESS_ENV_NAME_RE,
    integer,
    invalid,
    kind,
    parse_object,
    parse_step_id,
    string,
)
from forge_ci.protocol.fields import INPUT_NAME_RE as INPUT_NAME_RE

MAX_INPUTS: Final = 256


def parse_value(value: object, name: str) -> str | dict[str, Any]:
    """Text, or a runtime template ``{"template": [str | {"expr": str}, ...]}``."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and set(value) == {"template"}:
        parts = value["template"]
        if not isinstance(parts, list) or not parts:
            raise invalid(f"{name}.template must be a non-empty array")
        for index, part in enumerate(parts):
            if isinstance(part, str):
                continue
            if not (
                isinstance(part, dict) and set(part) == {"expr"} and isinstance(part["expr"], str)
            ):
                raise invalid(f'{name}.template[{index}] must be text or {{"expr": text}}')
        return {"template": list(parts)}
    raise invalid(f"{name} must be text or a template object")


def parse_env_value(value: object, name: str) -> str | dict[str, Any]:
    if isinstance(value, dict) and set(value) == {"secret"}:
        secret = value["secret"]
        if not isinstance(secret, str) or not ENV_NAME_RE.fullmatch(secret):
            raise invalid(f"{name}.secret must be a secret name")
        return {"secret": secret}
    return parse_value(value, name)


def _env(value: object, name: str) -> dict[str, str | dict[str, Any]]:
    if not isinstance(value, dict):
        raise invalid(f"{name} must be an object")
    result: dict[str, str | dict[str, Any]] = {}
    for key, item in value.items():
        if not PROCESS_ENV_NAME_RE.fullmatch(key):
            raise invalid(f"{name}: {key[:100]!r} is not a valid environment variable name")
        result[key] = parse_env_value(item, f"{name}.{key}")
    return result


def parse_inputs(value: object, name: str) -> dict[str, str | dict[str, Any]]:
    """A step's ``with``: input name (as written) -> value; names unique ignoring case."""
    if not isinstance(value, dict):
        raise invalid(f"{name} must be an object, not {kind(value)}")
    if len(value) > MAX_INPUTS:
        raise invalid(f"{name} has more than {MAX_INPUTS} inputs")
    seen: set[str] = set()
    result: dict[str, str | dict[str, Any]] = {}
    for key, item in value.items():
        if not INPUT_NAME_RE.fullmatch(key):
            raise invalid(f"{name}: {key[:100]!r} is not a valid input name")
        if key.lower() in seen:
            raise invalid(f"{name}: input {key!r} is given twice (names ignore case)")
        seen.add(key.lower())
        result[key] = parse_value(item, f"{name}.{key}")
    return result


def _continue_on_error(value: object, name: str) -> bool | dict[str, str]:
    if isinstance(value, bool):
        return value
    if isinstance(value, dict) and set(value) == {"expr"} and isinstance(value["expr"], str):
        return {"expr": value["expr"]}
    raise invalid(f'{name} must be true, false or {{"expr": text}}')


@dataclass(frozen=True)
class AssignmentStep:
    """One step of the job (or of a composite action), from the run's immutable plan."""

    id: str
    name: str | dict[str, Any]
    #: :data:`CHECKOUT` for the built-in checkout, ``""`` for a ``run`` step, else the action
    #: reference exactly as written (``actions/setup-python@v5``, ``./.github/actions/x``).
    uses: str
    #: The script (``""`` for a ``uses`` step); may be a runtime template.
    run: str | dict[str, Any]
    #: ``""``: the default shell (a composite action's ``run`` steps always name one).
    shell: str
    #: ``""``: the workspace; may be a runtime template (the runner keeps it in the workspace).
    working_directory: str | dict[str, Any]
    env: dict[str, str | dict[str, Any]]
    #: The step's condition expression (``success()`` by default).
    condition: str
    continue_on_error: bool | dict[str, str]
    #: ``0``: no separate step limit (the job deadline still applies).
    timeout_minutes: int
    #: ``""`` for run and checkout steps; else a key of ``Assignment.actions``.
    action: str = ""
    #: ``with``: input name (as written) -> value (text or runtime template).
    inputs: dict[str, str | dict[str, Any]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "uses": self.uses,
            "action": self.action,
            "with": self.inputs,
            "run": self.run,
            "shell": self.shell,
            "working_directory": self.working_directory,
            "env": self.env,
            "if": self.condition,
            "continue_on_error": self.continue_on_error,
            "timeout_minutes": self.timeout_minutes,
        }

    @classmethod
    def from_json(cls, obj: object, name: str) -> AssignmentStep:
        parsed = parse_object(
            obj,
            {
                "id": (True, parse_step_id),
                "name": (True, parse_value),
                "uses": (True, string),
                "action": (True, string),
                "with": (True, parse_inputs),
                "run": (True, parse_value),
                "shell": (True, string),
                "working_directory": (True, parse_value),
                "env": (True, _env),
                "if": (True, string),
                "continue_on_error": (True, _continue_on_error),
                "timeout_minutes": (True, lambda v, n: integer(v, n, 0, 10_080)),
            },
            name,
            versioned=False,
        )
        parsed["condition"] = parsed.pop("if")
        parsed["inputs"] = parsed.pop("with")
        step = cls(**parsed)
        step.check(name)
        return step

    @property
    def is_action(self) -> bool:
        return self.uses not in ("", CHECKOUT)

    def check(self, name: str) -> None:
        """The kind of step must agree with its fields."""
        if self.is_action:
            if not self.action:
                raise invalid(f"{name}: uses {self.uses[:200]!r} needs an action key")
            if self.run != "":
                raise invalid(f"{name}: a uses step has no run script")
        else:
            if self.action:
                raise invalid(f"{name}: action is set, but the step does not use an action")
            if self.uses == "" and self.inputs:
                raise invalid(f"{name}: a run step takes no with inputs")


def parse_steps(value: object, name: str, *, empty: bool = False) -> tuple[AssignmentStep, ...]:
    """An array of steps with unique ids (``empty``: an empty array is allowed)."""
    if not isinstance(value, list) or (not value and not empty):
        raise invalid(f"{name} must be a {'' if empty else 'non-empty '}array")
    steps = tuple(AssignmentStep.from_json(item, f"{name}[{i}]") for i, item in enumerate(value))
    ids = [step.id for step in steps]
    if len(set(ids)) != len(ids):
        raise invalid(f"{name}: step ids are not unique")
    return steps
