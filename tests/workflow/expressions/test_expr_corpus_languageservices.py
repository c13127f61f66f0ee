"""GitHub's own cross-language expression tests (actions/languageservices), replayed.

``derived/expression-cases.json`` holds 1,020 cases run upstream against GitHub's C#, Go and
TypeScript evaluators. The harness semantics (shared/corpus/README.md): the keys of ``contexts``
are the only named values (any other name is a parse error), values compare as JSON (1 == 1.0),
an expected error matches by kind and its message by containment.

Result: every case is in scope and passes, including the optional ``case()`` (28) and the
``.*`` / ``[*]`` filter cases (58); the error kind is matched exactly (lexing / parsing /
evaluation) and so is GitHub's message, position included.

Skipped ids: none (``SKIPPED`` below is empty; an entry needs an id and a reason).
"""

from __future__ import annotations

from typing import Any

import pytest
from expr_corpus import load_corpus, require_corpus

from forge_ci.workflow.expressions import ExpressionError, evaluate, parse_expression
from forge_ci.workflow.expressions.coercion import KIND_NAMES, kind_of

CORPUS = "actions-languageservices/derived/expression-cases.json"

#: Case id -> why it is not replayed. Empty: every case passes.
SKIPPED: dict[str, str] = {}

_CASES: list[dict[str, Any]] = load_corpus(CORPUS) or []


def _params() -> list[Any]:
    if not _CASES:
        return [pytest.param(None, id="corpus-missing")]
    return [
        pytest.param(
            case,
            id=case["id"],
            marks=[pytest.mark.skip(reason=SKIPPED[case["id"]])] if case["id"] in SKIPPED else [],
        )
        for case in _CASES
    ]


@pytest.mark.parametrize("case", _params())
def test_case(case: dict[str, Any] | None) -> None:
    if case is None:
        require_corpus(CORPUS)
        return
    text = case["expr"]
    contexts = case["contexts"]
    try:
        node = parse_expression(text, allowed_contexts=list(contexts))
        value = evaluate(node, contexts, expression=text)
    except ExpressionError as error:
        if case["expect"] != "error":
            raise
        assert error.kind == case["error_kind"], str(error)
        assert case["error_message"] in str(error)
        return
    assert case["expect"] == "value", f"expected {case['error_kind']} error, got {value!r}"
    assert KIND_NAMES[kind_of(value)] == case["result_kind"]
    assert value == case["result_value"]


def test_whole_corpus_is_in_scope() -> None:
    cases = require_corpus(CORPUS)
    assert len(cases) == 1020
    assert not SKIPPED.keys() - {case["id"] for case in cases}, "SKIPPED names unknown ids"
    assert len(cases) - len(SKIPPED) == 1020
