"""Actions in the assignment: every action a job may run, with its metadata (``action.yml``).

Standard library only. ``Assignment.actions`` maps a key ``"<commit>:<path>"`` to an
:class:`Action`; a ``uses`` step names its action by that key (``AssignmentStep.action``), and so
do the steps of a composite action, so the map holds nested actions too (all resolved at run
creation; the runner never resolves anything). The runner downloads an action's tree from its
``archive_path`` (attempt credential, like the source archive) and runs it::

    {"reference": "actions/setup-python@v5", "repository": "actions/setup-python",
     "commit": "<40 hex>", "path": "", "archive_path": "/-/runner-api/v1/attempts/9/actions/1.tar",
     "metadata": {"name": "...", "inputs": {NAME: {"required", "default", "deprecation_message"}},
                  "outputs": {NAME: {"value"}},
                  "runs": {"using", "main", "pre", "post", "pre_if", "post_if", "steps"}}}

A default, an output value and every field of a composite step is text or a runtime template.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from forge_ci.protocol.api import API_PREFIX
from forge_ci.protocol.fields import (
    OUTPUT_NAME_RE,
    boolean,
    choice,
    invalid,
    kind,
    parse_object,
    string,
)
from forge_ci.protocol.steps import (
    INPUT_NAME_RE,
    MAX_INPUTS,
    AssignmentStep,
    parse_steps,
    parse_value,
)

#: ``runs.using`` of node actions; every spelling runs on the image's ``node``.
NODE_RUNTIMES: Final = ("node12", "node16", "node20", "node24")
COMPOSITE: Final = "composite"
ACTION_KINDS: Final = (*NODE_RUNTIMES, COMPOSITE)
MAX_ACTIONS: Final = 256
MAX_ACTION_OUTPUTS: Final = 256
_COMMIT = re.compile(r"[0-9a-f]{40}")
_REPOSITORY = re.compile(r"[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}")


def action_key(commit: str, path: str) -> str:
    """The key of an action in ``Assignment.actions``."""
    return f"{commit}:{path}"


def _optional_value(value: object, name: str) -> str | dict[str, Any] | None:
    return None if value is None else parse_value(value, name)


def _text(value: object, name: str) -> str:
    return string(value, name, max_bytes=4096)


def _path(value: object, name: str) -> str:
    """``""`` or a relative path of plain components (no ``.``/``..``, no empty ones)."""
    text = _text(value, name)
    if text == "":
        return text
    parts = text.split("/")
    if "\\" in text or "\x00" in text or any(part in ("", ".", "..") for part in parts):
        raise invalid(f"{name} must be a relative path inside the repository, got {text[:200]!r}")
    return text


def archive_path(value: object, name: str) -> str:
    """A path under the runner API (no query, fragment or ``..``)."""
    text = string(value, name)
    if not text.startswith(API_PREFIX + "/") or "?" in text or "#" in text or ".." in text:
        raise invalid(f"{name} must be a path under {API_PREFIX}")
    return text


@dataclass(frozen=True)
class ActionInput:
    required: bool
    #: Text, a runtime template (``${{ github.token }}``) or None (no default).
    default: str | dict[str, Any] | None
    deprecation_message: str

    def to_json(self) -> dict[str, Any]:
        return {
            "required": self.required,
            "default": self.default,
            "deprecation_message": self.deprecation_message,
        }

    @classmethod
    def from_json(cls, obj: object, name: str) -> ActionInput:
        parsed = parse_object(
            obj,
            {
                "required": (True, boolean),
                "default": (True, _optional_value),
                "deprecation_message": (True, _text),
            },
            name,
            versioned=False,
        )
        return cls(**parsed)


@dataclass(frozen=True)
class ActionRuns:
    using: str
    #: Node actions: the scripts, relative to the action's directory (``pre``/``post`` ``""``:
    #: none); ``pre_if``/``post_if`` ``""``: ``always()``, GitHub's default.
    main: str
    pre: str
    post: str
    pre_if: str
    post_if: str
    #: Composite actions: their steps (ids unique within the action).
    steps: tuple[AssignmentStep, ...]

    @property
    def composite(self) -> bool:
        return self.using == COMPOSITE

    def to_json(self) -> dict[str, Any]:
        return {
            "using": self.using,
            "main": self.main,
            "pre": self.pre,
            "post": self.post,
            "pre_if": self.pre_if,
            "post_if": self.post_if,
            "steps": [step.to_json() for step in self.steps],
        }

    @classmethod
    def from_json(cls, obj: object, name: str) -> ActionRuns:
        parsed = parse_object(
            obj,
            {
                "using": (True, lambda v, n: choice(v, n, ACTION_KINDS)),
                "main": (True, _path),
                "pre": (True, _path),
                "post": (True, _path),
                "pre_if": (True, _text),
                "post_if": (True, _text),
                "steps": (True, lambda v, n: parse_steps(v, n, empty=True)),
            },
            name,
            versioned=False,
        )
        runs = cls(**parsed)
        if runs.composite:
            if runs.main or runs.pre or runs.post or runs.pre_if or runs.post_if:
                raise invalid(f"{name}: a composite action has steps, not main/pre/post scripts")
            for index, step in enumerate(runs.steps):
                if step.uses == "" and not step.shell:
                    raise invalid(
                        f"{name}.steps[{index}]: a run step of a composite action must name "
                        "its shell"
                    )
        else:
            if not runs.main:
                raise invalid(f"{name}: a {runs.using} action needs main")
            if runs.steps:
                raise invalid(f"{name}: only a composite action has steps")
        return runs


@dataclass(frozen=True)
class ActionMetadata:
    """The normalized ``action.yml``."""

    name: str
    #: Input name as written -> input (the runner matches names ignoring case).
    inputs: dict[str, ActionInput]
    #: Output name -> value template (composite) or None (node: the action sets it).
    outputs: dict[str, str | dict[str, Any] | None]
    runs: ActionRuns

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "inputs": {key: item.to_json() for key, item in self.inputs.items()},
            "outputs": {key: {"value": value} for key, value in self.outputs.items()},
            "runs": self.runs.to_json(),
        }

    @classmethod
    def from_json(cls, obj: object, name: str) -> ActionMetadata:
        parsed = parse_object(
            obj,
            {
                "name": (True, _text),
                "inputs": (True, _inputs),
                "outputs": (True, _outputs),
                "runs": (True, ActionRuns.from_json),
            },
            name,
            versioned=False,
        )
        return cls(**parsed)


def _inputs(value: object, name: str) -> dict[str, ActionInput]:
    if not isinstance(value, dict):
        raise invalid(f"{name} must be an object, not {kind(value)}")
    if len(value) > MAX_INPUTS:
        raise invalid(f"{name} has more than {MAX_INPUTS} inputs")
    seen: set[str] = set()
    result: dict[str, ActionInput] = {}
    for key, item in value.items():
        if not INPUT_NAME_RE.fullmatch(key):
            raise invalid(f"{name}: {key[:100]!r} is not a valid input name")
        if key.lower() in seen:
            raise invalid(f"{name}: input {key!r} is declared twice (names ignore case)")
        seen.add(key.lower())
        result[key] = ActionInput.from_json(item, f"{name}.{key}")
    return result


def _outputs(value: object, name: str) -> dict[str, str | dict[str, Any] | None]:
    if not isinstance(value, dict):
        raise invalid(f"{name} must be an object, not {kind(value)}")
    if len(value) > MAX_ACTION_OUTPUTS:
        raise invalid(f"{name} has more than {MAX_ACTION_OUTPUTS} outputs")
    result: dict[str, str | dict[str, Any] | None] = {}
    for key, item in value.items():
        if not OUTPUT_NAME_RE.fullmatch(key):
            raise invalid(f"{name}: {key[:100]!r} is not a valid output name")
        parsed = parse_object(
            item, {"value": (True, _optional_value)}, f"{name}.{key}", versioned=False
        )
        result[key] = parsed["value"]
    return result


def _repository(value: object, name: str) -> str:
    text = string(value, name)
    if text and not _REPOSITORY.fullmatch(text):
        raise invalid(f"{name} must be OWNER/REPO or empty (a ./PATH action), got {text[:200]!r}")
    return text


def _commit(value: object, name: str) -> str:
    if not isinstance(value, str) or not _COMMIT.fullmatch(value):
        raise invalid(f"{name} must be a commit id (40 lowercase hexadecimal characters)")
    return value


@dataclass(frozen=True)
class Action:
    """One resolved action: where it came from, where to download it, what it declares."""

    #: The reference as written where it was first seen (``actions/setup-python@v5``).
    reference: str
    #: The forge repository it resolved to; ``""`` for a ``./PATH`` action.
    repository: str
    commit: str
    #: Its folder inside the repository, ``""`` = the root.
    path: str
    archive_path: str
    metadata: ActionMetadata

    @property
    def key(self) -> str:
        return action_key(self.commit, self.path)

    def to_json(self) -> dict[str, Any]:
        return {
            "reference": self.reference,
            "repository": self.repository,
            "commit": self.commit,
            "path": self.path,
            "archive_path": self.archive_path,
            "metadata": self.metadata.to_json(),
        }

    @classmethod
    def from_json(cls, obj: object, name: str) -> Action:
        parsed = parse_object(
            obj,
            {
                "reference": (True, _text),
                "repository": (True, _repository),
                "commit": (True, _commit),
                "path": (True, _path),
                "archive_path": (True, archive_path),
                "metadata": (True, ActionMetadata.from_json),
            },
            name,
            versioned=False,
        )
        if not parsed["reference"]:
            raise invalid(f"{name}.reference must not be empty")
        return cls(**parsed)


def parse_actions(value: object, name: str) -> dict[str, Action]:
    """``Assignment.actions``: each key must be its action's ``commit:path``."""
    if not isinstance(value, dict):
        raise invalid(f"{name} must be an object, not {kind(value)}")
    if len(value) > MAX_ACTIONS:
        raise invalid(f"{name} has more than {MAX_ACTIONS} actions")
    result: dict[str, Action] = {}
    for key, item in value.items():
        action = Action.from_json(item, f"{name}[{key[:100]!r}]")
        if action.key != key:
            raise invalid(f"{name}: key {key[:100]!r} must be {action.key!r} (commit:path)")
        result[key] = action
    for key, action in result.items():
        check_action_keys(action.metadata.runs.steps, result, f"{name}[{key!r}].runs.steps")
    return result


def check_action_keys(
    steps: tuple[AssignmentStep, ...], actions: dict[str, Action], name: str
) -> None:
    """Every ``uses`` step must name an action of the map."""
    for index, step in enumerate(steps):
        if step.action and step.action not in actions:
            raise invalid(
                f"{name}[{index}]: action {step.action[:100]!r} (uses {step.uses[:200]!r}) is "
                "not in the assignment's actions"
            )


# --- Pre and post steps --------------------------------------------------------------------------

#: How deeply composite actions may nest (GitHub's limit is 9 below the job's step).
MAX_NESTING: Final = 9


@dataclass(frozen=True)
class HookStep:
    """A ``pre`` or ``post`` script of a node action, reported as a step of its own.

    ``path`` is the ids of the steps leading to the action: the job's step, then the steps of
    the composite actions in between. Server and runner derive the same list from the
    assignment (:func:`hook_steps`), so the server creates a step row for each.
    """

    kind: str
    id: str
    name: str
    path: tuple[str, ...]


def _label(step: AssignmentStep) -> str:
    name = step.name if isinstance(step.name, str) else ""
    return name if name and name != step.id else f"Run {step.uses}"


def hook_steps(
    steps: tuple[AssignmentStep, ...], actions: dict[str, Action]
) -> tuple[list[HookStep], list[HookStep]]:
    """The pre steps (job's own action steps, in order) and post steps (every node action's,
    nested ones too, in reverse order of their main steps), with ids unique beside ``steps``."""
    taken = {step.id for step in steps}
    found: list[tuple[str, tuple[str, ...], str]] = []

    def walk(level: tuple[AssignmentStep, ...], path: tuple[str, ...]) -> None:
        for step in level:
            action = actions.get(step.action) if step.action else None
            if action is None:
                continue
            runs = action.metadata.runs
            here = (*path, step.id)
            if runs.composite:
                if len(here) <= MAX_NESTING:
                    walk(runs.steps, here)
                continue
            if runs.pre and not path:
                found.append(("pre", here, _label(step)))
            if runs.post:
                found.append(("post", here, _label(step)))

    walk(steps, ())
    pre: list[HookStep] = []
    post: list[HookStep] = []
    for hook, path, label in found:
        candidate = f"{hook}-{'-'.join(path)}"
        number = 1
        while candidate in taken or len(candidate) > 100:
            number += 1
            candidate = f"{hook}-{number}-{path[0]}"[:100]
        taken.add(candidate)
        target = pre if hook == "pre" else post
        target.append(HookStep(hook, candidate, f"{hook.title()} {label}"[:200], path))
    return pre, list(reversed(post))
