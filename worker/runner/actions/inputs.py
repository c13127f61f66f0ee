"""An action step's inputs: ``with`` values over the action's defaults, as ``INPUT_*``.

Names match ignoring case, as on GitHub. A value and a default may be runtime templates
(setup-python's ``token`` defaults to ``${{ github.token }}``); each is evaluated when the step
runs. A required input with neither a value nor a default fails the step before anything runs,
naming it; an input the action does not declare is passed on with a warning, as GitHub does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from forge_ci.protocol import Action
from worker.runner.evaluation import EvaluationError, render


class InputError(Exception):
    """The inputs cannot be built; the message names the input."""


@dataclass(frozen=True)
class Inputs:
    #: Input name (as the action declares it, else as written) -> value.
    values: dict[str, str]
    #: Warnings for the log (unexpected or deprecated inputs).
    warnings: list[str]

    def context(self) -> dict[str, str]:
        """The ``inputs`` context of a composite action's expressions."""
        return dict(self.values)

    def environment(self) -> dict[str, str]:
        return {input_variable(name): value for name, value in self.values.items()}


def input_variable(name: str) -> str:
    """``INPUT_<NAME>``: uppercased, spaces as ``_`` (the toolkit's ``getInput`` reads it)."""
    return "INPUT_" + name.replace(" ", "_").upper()


def build_inputs(
    action: Action,
    given: Mapping[str, str | Mapping[str, Any]],
    contexts: Mapping[str, Any],
    where: str,
) -> Inputs:
    declared = action.metadata.inputs
    by_lower = {name.lower(): name for name in declared}
    values: dict[str, str] = {}
    warnings: list[str] = []
    unexpected: list[str] = []
    for name, value in given.items():
        canonical = by_lower.get(name.lower())
        if canonical is None:
            unexpected.append(name)
            canonical = name
        try:
            values[canonical] = render(value, contexts, f"{where}: with {name}")
        except EvaluationError as exc:
            raise InputError(str(exc)) from None
        message = declared[canonical].deprecation_message if canonical in declared else ""
        if message:
            warnings.append(f"Input '{canonical}' has been deprecated with message: {message}")
    if unexpected:
        valid = ", ".join(repr(name) for name in declared) or "none"
        shown = ", ".join(repr(name) for name in unexpected)
        warnings.append(f"Unexpected input(s) {shown}, valid inputs are [{valid}]")
    missing: list[str] = []
    for name, spec in declared.items():
        if name in values:
            continue
        if spec.default is None:
            if spec.required:
                missing.append(name)
            continue
        try:
            values[name] = render(spec.default, contexts, f"{where}: default of input {name}")
        except EvaluationError as exc:
            raise InputError(str(exc)) from None
    if missing:
        names = ", ".join(repr(name) for name in missing)
        raise InputError(
            f"{where}: {action.reference} requires input {names}, which the step does not "
            "give (with:) and the action has no default for"
        )
    return Inputs(values, warnings)
