"""``strategy``: a static matrix and how it expands into job instances.

Expansion follows GitHub's documented rules, in this order:

1. the cartesian product of the vectors, in the order the keys are written;
2. ``exclude`` removes every combination that matches all key/values of one exclude entry;
3. each ``include`` entry is added to every combination whose original values it does not
   contradict (it may overwrite values added by an earlier include, never original ones); when it
   fits no combination, it becomes a combination of its own.

The matrix must be literal YAML: a matrix computed by an expression (``fromJSON``...) is refused
because the plan, and the number of jobs, must be known when the workflow is parsed.
"""

from __future__ import annotations

import json
from typing import Any

from forge_ci.records import record
from forge_ci.workflow.diagnostics import Problems
from forge_ci.workflow.nodes import (
    MAX_SAFE_INTEGER,
    Mapping,
    Node,
    Scalar,
    Sequence,
    describe,
    integer,
    scalar_type,
)
from forge_ci.workflow.nodes import typed_value as scalar_value
from forge_ci.workflow.values import distinct_keys

#: GitHub's limit for one matrix, and forge-ci's for a whole workflow.
MAX_COMBINATIONS = 256
STRATEGY_KEYS = ("matrix", "fail-fast", "max-parallel")


@record(frozen=True)
class Strategy:
    """A parsed strategy: the expanded combinations (empty without a matrix) and its options."""

    combinations: tuple[dict[str, Any], ...]
    keys: tuple[str, ...]
    fail_fast: bool
    max_parallel: int | None
    has_matrix: bool


def parse_strategy(node: Node, problems: Problems) -> Strategy | None:
    """Check ``strategy`` and expand its matrix; ``None`` when its matrix is not valid.

    A wrong option (``fail-fast``, ``max-parallel``, an unknown key) is reported and the valid
    matrix still comes back, so that the job's matrix references and labels are checked too.
    """
    if not isinstance(node, Mapping):
        problems.at(node, f"strategy must be a mapping, not {describe(node)}")
        return None
    fail_fast = True
    max_parallel: int | None = None
    combinations: list[dict[str, Any]] = []
    keys: list[str] = []
    has_matrix = False
    expanded: tuple[list[dict[str, Any]], list[str]] | None = None
    for key, value in node.items:
        name = key.value
        if name == "matrix":
            has_matrix = True
            expanded = _matrix(value, problems)
            if expanded is not None:
                combinations, keys = expanded
        elif name == "fail-fast":
            if isinstance(value, Scalar) and scalar_type(value) == "bool":
                fail_fast = value.value.lower() == "true"
            else:
                problems.at(
                    value, f"strategy.fail-fast must be true or false, not {describe(value)}"
                )
        elif name == "max-parallel":
            if isinstance(value, Scalar) and scalar_type(value) == "int" and value.value.isdigit():
                number = integer(value)
                if number is None or number > MAX_SAFE_INTEGER:
                    problems.at(
                        value,
                        f"strategy.max-parallel is at most {MAX_SAFE_INTEGER}, "
                        f"not {describe(value)}",
                    )
                elif number < 1:
                    problems.at(value, "strategy.max-parallel must be at least 1")
                else:
                    max_parallel = number
            else:
                problems.at(
                    value, f"strategy.max-parallel must be a whole number, not {describe(value)}"
                )
        else:
            problems.at(key, f"'{name}' is not a strategy key{problems.hint(name, STRATEGY_KEYS)}")
    if not has_matrix:
        # fail-fast / max-parallel alone (as GitHub allows): one instance, a strategy context.
        return Strategy((), (), fail_fast, max_parallel, False)
    if expanded is None:
        return None
    return Strategy(tuple(combinations), tuple(keys), fail_fast, max_parallel, has_matrix)


def _matrix(node: Node, problems: Problems) -> tuple[list[dict[str, Any]], list[str]] | None:
    if isinstance(node, Scalar) and "${{" in node.value:
        problems.at(
            node,
            "a matrix computed by an expression is not supported; write the "
            "matrix out (forge-ci expands it when the workflow is parsed)",
        )
        return None
    if not isinstance(node, Mapping):
        problems.at(node, f"strategy.matrix must be a mapping, not {describe(node)}")
        return None
    before = len(problems)
    vectors: list[tuple[str, list[Any]]] = []
    include: list[tuple[Node, dict[str, Any]]] = []
    exclude: list[tuple[Node, dict[str, Any]]] = []
    for key, value in distinct_keys(node, "matrix keys", problems):
        if key.value in ("include", "exclude"):
            entries = _entries(key.value, value, problems)
            (include if key.value == "include" else exclude).extend(entries)
            continue
        if "${{" in key.value:
            problems.at(key, "expressions are not allowed in matrix keys")
            continue
        if isinstance(value, Scalar) and "${{" in value.value:
            problems.at(
                value,
                f"matrix vector '{key.value}' computed by an expression is not "
                "supported; list its values",
            )
            continue
        if not isinstance(value, Sequence):
            problems.at(value, f"matrix vector '{key.value}' must be a list, not {describe(value)}")
            continue
        if not value.items:
            problems.at(value, f"matrix vector '{key.value}' does not contain any values")
            continue
        values = [_value(item, problems) for item in value.items]
        vectors.append((key.value, values))
    if len(problems) != before:
        return None
    if not vectors and not include:
        problems.at(node, "the matrix has no vectors and no include entries")
        return None
    size = 1
    for _, values in vectors:
        size *= len(values)
        if size > MAX_COMBINATIONS * 16:
            break
    if size > MAX_COMBINATIONS * 16 or len(include) > MAX_COMBINATIONS:
        problems.at(node, f"the matrix expands to more than {MAX_COMBINATIONS} jobs")
        return None
    vector_keys = [name for name, _ in vectors]
    spelling = {name.lower(): name for name in vector_keys}
    for entry_node, entry in include:
        for name in entry:
            known = spelling.setdefault(name.lower(), name)
            if known != name:
                problems.at(
                    entry_node,
                    f"include key '{name}' is already defined as '{known}'; matrix keys are "
                    "compared without regard to case",
                )
    for entry_node, entry in exclude:
        for name in entry:
            if name not in vector_keys:
                hint = problems.hint(name, vector_keys)
                problems.at(entry_node, f"exclude key '{name}' is not a matrix vector{hint}")
    if len(problems) != before:
        return None
    combinations = _expand(vectors, [e for _, e in include], [e for _, e in exclude])
    if len(combinations) > MAX_COMBINATIONS:
        problems.at(
            node, f"the matrix expands to {len(combinations)} jobs; the limit is {MAX_COMBINATIONS}"
        )
        return None
    if not combinations:
        problems.at(node, "exclude removes every combination of the matrix")
        return None
    keys = list(vector_keys)
    for combination in combinations:
        for name in combination:
            if name not in keys:
                keys.append(name)
    return combinations, keys


def _entries(kind: str, node: Node, problems: Problems) -> list[tuple[Node, dict[str, Any]]]:
    if isinstance(node, Scalar) and "${{" in node.value:
        problems.at(node, f"matrix {kind} computed by an expression is not supported")
        return []
    if not isinstance(node, Sequence):
        problems.at(node, f"matrix {kind} must be a list of mappings, not {describe(node)}")
        return []
    entries: list[tuple[Node, dict[str, Any]]] = []
    for item in node.items:
        if not isinstance(item, Mapping) or not item.items:
            problems.at(item, f"each matrix {kind} entry must be a non-empty mapping")
            continue
        entry = {
            key.value: _value(value, problems)
            for key, value in distinct_keys(item, "matrix keys", problems)
        }
        entries.append((item, entry))
    return entries


def _value(node: Node, problems: Problems) -> Any:
    """The JSON value of a matrix value (scalars typed by the YAML 1.2 core schema)."""
    if isinstance(node, Scalar):
        if "${{" in node.value:
            problems.at(node, "expressions are not allowed in matrix values")
            return None
        try:
            return scalar_value(node)
        except ValueError as exc:
            problems.at(node, f"invalid matrix value: {exc}")
            return None
    if isinstance(node, Sequence):
        return [_value(item, problems) for item in node.items]
    assert isinstance(node, Mapping)
    return {
        key.value: _value(value, problems)
        for key, value in distinct_keys(node, "keys of a matrix value", problems)
    }


def _same(left: Any, right: Any) -> bool:
    # JSON equality: 1 and 1.0 are the same matrix value, true and 1 are not.
    return json.dumps(left, sort_keys=True) == json.dumps(right, sort_keys=True)


def _expand(
    vectors: list[tuple[str, list[Any]]],
    include: list[dict[str, Any]],
    exclude: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    combinations: list[dict[str, Any]] = [{}] if vectors else []
    for name, values in vectors:
        combinations = [{**combo, name: value} for combo in combinations for value in values]
    combinations = [
        combo
        for combo in combinations
        if not any(all(_same(combo[k], v) for k, v in entry.items()) for entry in exclude)
    ]
    original = {name for name, _ in vectors}
    extras: list[dict[str, Any]] = []
    for entry in include:
        fitted = False
        for combo in combinations:
            if all(_same(combo[k], v) for k, v in entry.items() if k in original):
                combo.update({k: v for k, v in entry.items() if k not in original})
                fitted = True
        if not fitted:
            extras.append(dict(entry))
    return combinations + extras
