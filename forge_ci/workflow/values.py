"""Readers for scalar values of known types: strings, booleans, timeouts.

Typing follows the YAML 1.2 core schema (see ``nodes``): a boolean is ``true`` or ``false`` in any
of its three casings and nothing else, so the YAML 1.1 spellings ``yes``/``no``/``on``/``off`` are
refused where a boolean is expected (with a hint) instead of silently meaning true or false, and
are plain text where a string is expected. Numbers must be written as numbers, not quoted.
"""

from __future__ import annotations

from forge_ci.workflow.diagnostics import Problems
from forge_ci.workflow.nodes import (
    MAX_SAFE_INTEGER,
    YAML11_BOOLEANS,
    Mapping,
    Node,
    Scalar,
    describe,
    integer,
    is_null,
    scalar_type,
)

MAX_TIMEOUT_MINUTES = 360


def string(node: Node, where: str, problems: Problems) -> Scalar | None:
    """A non-null scalar (numbers and booleans keep their spelling as text)."""
    if isinstance(node, Scalar) and not is_null(node):
        return node
    problems.at(node, f"{where} must be a string, not {describe(node)}")
    return None


def boolean(node: Node, where: str, problems: Problems) -> bool | None:
    """A literal ``true`` or ``false``."""
    if isinstance(node, Scalar) and scalar_type(node) == "bool":
        return node.value.lower() == "true"
    hint = ""
    if isinstance(node, Scalar) and node.plain and node.value in YAML11_BOOLEANS:
        hint = " (YAML 1.1 spellings such as yes, no, on and off are not booleans)"
    problems.at(node, f"{where} must be true or false, not {describe(node)}{hint}")
    return None


def timeout_minutes(node: Node, where: str, problems: Problems) -> int | None:
    """A literal whole number of minutes from 1 through 360."""
    if isinstance(node, Scalar) and scalar_type(node) == "int" and node.value.lstrip("+").isdigit():
        value = integer(node)
        if value is not None and 1 <= value <= MAX_TIMEOUT_MINUTES:
            return value
    problems.at(
        node,
        f"{where} must be a whole number of minutes from 1 through {MAX_TIMEOUT_MINUTES}, "
        f"not {describe(node)}",
    )
    return None


def positive_int(node: Node, where: str, problems: Problems) -> int | None:
    """A literal whole number of at least 1."""
    if isinstance(node, Scalar) and scalar_type(node) == "int" and node.value.lstrip("+").isdigit():
        value = integer(node)
        if value is not None and 1 <= value <= MAX_SAFE_INTEGER:
            return value
    problems.at(
        node,
        f"{where} must be a whole number from 1 through {MAX_SAFE_INTEGER}, not {describe(node)}",
    )
    return None


def distinct_keys(node: Mapping, what: str, problems: Problems) -> list[tuple[Scalar, Node]]:
    """The entries of a mapping whose keys are names, without later keys that differ only by case.

    GitHub compares the keys of ``env``, ``outputs``, matrices and the like without regard to
    case and refuses a second spelling ("'a' is already defined"); forge-ci does the same, so that
    ``matrix.Version_Name`` cannot mean one key here and another there.
    """
    first: dict[str, Scalar] = {}
    kept: list[tuple[Scalar, Node]] = []
    for key, value in node.items:
        earlier = first.setdefault(key.value.lower(), key)
        if earlier is not key:
            problems.at(
                key,
                f"'{key.value}' is already defined as '{earlier.value}' (line {earlier.line}); "
                f"{what} are compared without regard to case",
            )
            continue
        kept.append((key, value))
    return kept
