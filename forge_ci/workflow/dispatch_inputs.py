"""``workflow_dispatch`` inputs: declared in the file, checked when someone runs the workflow.

Declared as on GitHub::

    on:
      workflow_dispatch:
        inputs:
          level:                     # a name: a letter or _, then letters, digits, - or _
            description: Log level
            required: true
            type: choice             # string (the default), boolean, choice, number, environment
            options: [info, debug]   # choice only, and required for it
            default: info            # of the input's type; a choice default is one of options

:func:`parse_dispatch_inputs` checks the declaration (located problems, at most
:data:`MAX_INPUTS` inputs, as GitHub allows); :func:`resolve_inputs` checks the values given at
dispatch (by the web form, the CLI) and returns every declared input with its value, typed as
the ``inputs`` context has them: ``bool`` for booleans, text for every other type (GitHub hands
numbers over as strings too). ``github.event.inputs`` has the same names with text values only
(:func:`event_inputs`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping as MappingABC
from typing import Any

from forge_ci.errors import InvalidInput
from forge_ci.records import record
from forge_ci.workflow.diagnostics import Problems, did_you_mean
from forge_ci.workflow.nodes import (
    Mapping,
    Node,
    Scalar,
    Sequence,
    describe,
    is_null,
    scalar_type,
)
from forge_ci.workflow.values import boolean, distinct_keys, string

TYPES = ("string", "boolean", "choice", "number", "environment")
KEYS = ("description", "required", "default", "type", "options", "deprecationMessage")
#: GitHub: "you may only define up to 25 `inputs` for a `workflow_dispatch` event".
MAX_INPUTS = 25
#: GitHub refuses dispatch payloads whose inputs are longer than this (characters of JSON).
MAX_INPUTS_CHARACTERS = 65_535
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")
_NUMBER = re.compile(r"\s*[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s*\Z")
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

InputValue = str | bool


@record(frozen=True)
class DispatchInput:
    """One declared input; ``default`` is None when the file gives none."""

    name: str
    type: str = "string"
    description: str = ""
    required: bool = False
    default: InputValue | None = None
    options: tuple[str, ...] = ()
    deprecation: str = ""

    def as_plan(self) -> dict[str, Any]:
        plan: dict[str, Any] = {"type": self.type, "required": self.required}
        if self.description:
            plan["description"] = self.description
        if self.default is not None:
            plan["default"] = self.default
        if self.options:
            plan["options"] = list(self.options)
        if self.deprecation:
            plan["deprecation_message"] = self.deprecation
        return plan


class InputInvalid(InvalidInput):
    """A value given at dispatch does not fit the input it names (or names none)."""

    code = "dispatch_input_invalid"

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.input_name = name


# -- declaring ---------------------------------------------------------------------------------


def parse_dispatch_inputs(node: Node, problems: Problems) -> tuple[DispatchInput, ...]:
    """Check the value of ``workflow_dispatch.inputs`` and return the inputs it declares."""
    if is_null(node):
        return ()
    if not isinstance(node, Mapping):
        problems.at(
            node, f"workflow_dispatch inputs must be a mapping of inputs, not {describe(node)}"
        )
        return ()
    entries = distinct_keys(node, "input names", problems)
    if len(entries) > MAX_INPUTS:
        problems.at(
            entries[MAX_INPUTS][0],
            f"a workflow_dispatch event may define up to {MAX_INPUTS} inputs (as on GitHub); "
            f"this one defines {len(entries)}",
        )
    inputs: list[DispatchInput] = []
    for key, value in entries:
        if not _NAME.match(key.value):
            problems.at(
                key,
                f"'{key.value}' is not an input name: start with a letter or _, then use "
                "letters, digits, - and _",
            )
            continue
        parsed = _parse_input(key.value, value, problems)
        if parsed is not None:
            inputs.append(parsed)
    return tuple(inputs)


def _parse_input(name: str, node: Node, problems: Problems) -> DispatchInput | None:
    if is_null(node):
        return DispatchInput(name)
    if not isinstance(node, Mapping):
        problems.at(node, f"input '{name}' must be a mapping, not {describe(node)}")
        return None
    where = f"input '{name}'"
    found: dict[str, tuple[Scalar, Node]] = {}
    for key, value in node.items:
        if key.value not in KEYS:
            problems.at(
                key, f"'{key.value}' is not a key of {where}{problems.hint(key.value, KEYS)}"
            )
        else:
            found[key.value] = (key, value)
    kind = "string"
    if "type" in found:
        type_node = found["type"][1]
        text = string(type_node, f"the type of {where}", problems)
        if text is not None:
            if text.value in TYPES:
                kind = text.value
            else:
                problems.at(
                    text,
                    f"'{text.value}' is not an input type{problems.hint(text.value, TYPES)}; "
                    f"use one of {', '.join(TYPES)}",
                )
                return None
    description = _text(found, "description", where, problems)
    deprecation = _text(found, "deprecationMessage", where, problems)
    required = False
    if "required" in found:
        required = bool(boolean(found["required"][1], f"required of {where}", problems))
    options = _options(found, kind, where, problems)
    default = _default(found, kind, options, where, problems)
    return DispatchInput(name, kind, description, required, default, options, deprecation)


def _text(found: dict[str, tuple[Scalar, Node]], key: str, where: str, problems: Problems) -> str:
    if key not in found or is_null(found[key][1]):
        return ""
    text = string(found[key][1], f"{key} of {where}", problems)
    return text.value if text is not None else ""


def _options(
    found: dict[str, tuple[Scalar, Node]], kind: str, where: str, problems: Problems
) -> tuple[str, ...]:
    if "options" not in found:
        if kind == "choice":
            problems.at(
                found["type"][0],
                f"{where} is a choice and needs options: a list of the values to choose from",
            )
        return ()
    key, node = found["options"]
    if kind != "choice":
        problems.at(key, f"options apply to type: choice only, and {where} is a {kind}")
        return ()
    if not isinstance(node, Sequence) or not node.items:
        problems.at(node, f"the options of {where} must be a non-empty list, not {describe(node)}")
        return ()
    options: list[str] = []
    for item in node.items:
        text = string(item, f"the options of {where}", problems)
        if text is None:
            continue
        if text.value in options:
            problems.at(item, f"the option '{text.value}' of {where} is listed twice")
            continue
        options.append(text.value)
    return tuple(options)


def _default(
    found: dict[str, tuple[Scalar, Node]],
    kind: str,
    options: tuple[str, ...],
    where: str,
    problems: Problems,
) -> InputValue | None:
    if "default" not in found or is_null(found["default"][1]):
        return None
    node = found["default"][1]
    if kind == "boolean":
        return boolean(node, f"the default of {where} (a boolean input)", problems)
    text = string(node, f"the default of {where}", problems)
    if text is None:
        return None
    if kind != "number" and scalar_type(text) == "bool":
        problems.at(
            node,
            f"the default of {where} (a {kind}) must be text, not the boolean {text.value}; "
            f"quote it ('{text.value}') or use type: boolean",
        )
        return None
    if kind == "choice" and options and text.value not in options:
        problems.at(
            node,
            f"the default '{text.value}' of {where} is not one of its options "
            f"({', '.join(options)})",
        )
        return None
    if kind == "number" and _number(text.value) is None:
        problems.at(node, f"the default of {where} must be a number, not {describe(node)}")
        return None
    return text.value  # as written: "3.10" stays "3.10", like every string GitHub reads


def _number(text: str) -> float | None:
    if not _NUMBER.match(text):
        return None
    value = float(text)
    return value if math.isfinite(value) else None


# -- dispatching -------------------------------------------------------------------------------


def resolve_inputs(
    declared: tuple[DispatchInput, ...], given: MappingABC[str, str]
) -> dict[str, InputValue]:
    """Every declared input with its value: the one given, else its default (see module doc).

    Raises :class:`InputInvalid` naming the input for a name the workflow does not declare, a
    required input without a value, a boolean that is not true/false, a choice outside its
    options, a number that is not one, or values longer than GitHub accepts in total.
    """
    names = [spec.name for spec in declared]
    for name in given:
        if name not in names:
            if not names:
                raise InputInvalid(name, f"unknown input '{name}': the workflow declares no inputs")
            raise InputInvalid(
                name,
                f"unknown input '{name}'{did_you_mean(name, names)} (the workflow declares "
                f"{', '.join(names)})",
            )
    values: dict[str, InputValue] = {}
    for spec in declared:
        values[spec.name] = _value(spec, given.get(spec.name))
    size = len(json.dumps(event_inputs(values), ensure_ascii=False))
    if size > MAX_INPUTS_CHARACTERS:
        largest = max(values, key=lambda name: len(str(values[name])))
        raise InputInvalid(
            largest,
            f"the inputs are {size} characters long; GitHub's limit, kept here, is "
            f"{MAX_INPUTS_CHARACTERS} (the longest is '{largest}')",
        )
    return values


def _value(spec: DispatchInput, given: str | None) -> InputValue:
    name = spec.name
    if given is None or (given == "" and spec.type != "string"):
        if spec.default is not None:
            return spec.default
        if spec.required:
            raise InputInvalid(name, f"input '{name}' is required")
        return False if spec.type == "boolean" else ""
    if _CONTROL.search(given):
        raise InputInvalid(name, f"input '{name}' contains a control character")
    if spec.type == "boolean":
        lowered = given.strip().lower()
        if lowered not in ("true", "false"):
            raise InputInvalid(
                name, f"input '{name}' is a boolean: give true or false, not {given!r}"
            )
        return lowered == "true"
    if spec.type == "choice" and given not in spec.options:
        raise InputInvalid(
            name,
            f"input '{name}' must be one of {', '.join(spec.options)}, not {given!r}",
        )
    if spec.type == "number" and _number(given) is None:
        raise InputInvalid(name, f"input '{name}' is a number, not {given!r}")
    if spec.required and spec.type == "string" and not given.strip():
        raise InputInvalid(name, f"input '{name}' is required and may not be empty")
    return given


def event_inputs(values: MappingABC[str, InputValue]) -> dict[str, str]:
    """``github.event.inputs``: the same inputs, booleans as "true"/"false" (as on GitHub)."""
    return {
        name: ("true" if value else "false") if isinstance(value, bool) else value
        for name, value in values.items()
    }
