"""Fixtures for the workflow engine tests: parsing helpers and the shared acceptance corpus."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from forge_ci.workflow import Diagnostic, Workflow, WorkflowInvalid, build_plan, parse_workflow
from forge_ci_testing.corpus import corpus_root


@pytest.fixture
def corpus_dir() -> Path:
    """The acceptance corpus; the test skips (and CI fails such skips) when it is missing."""
    root = corpus_root()
    if root is None:
        pytest.skip(
            "shared/corpus is missing: expected beside the checkout or under "
            "$FORGE_CI_SHARED_DIR/corpus"
        )
    return root


@pytest.fixture
def accept() -> Callable[[str], Workflow]:
    """Parse dedented YAML that must be valid; fail with every diagnostic otherwise."""

    def run(text: str) -> Workflow:
        try:
            return parse_workflow(textwrap.dedent(text), "test.yml")
        except WorkflowInvalid as exc:
            listing = "\n".join(f"{d.line}:{d.column}: {d.message}" for d in exc.diagnostics)
            pytest.fail(f"workflow refused:\n{listing}")

    return run


@pytest.fixture
def refuse() -> Callable[[str | bytes], list[Diagnostic]]:
    """Parse YAML that must be refused and return its diagnostics (dedented when text)."""

    def run(text: str | bytes) -> list[Diagnostic]:
        source = textwrap.dedent(text) if isinstance(text, str) else text
        with pytest.raises(WorkflowInvalid) as caught:
            parse_workflow(source, "test.yml")
        diagnostics = caught.value.diagnostics
        assert diagnostics, "WorkflowInvalid without diagnostics"
        assert diagnostics == sorted(diagnostics)
        for diagnostic in diagnostics:
            assert diagnostic.line >= 1 and diagnostic.column >= 1
        return diagnostics

    return run


@pytest.fixture
def plan_of(accept: Callable[[str], Workflow]) -> Callable[[str], dict[str, object]]:
    """The normalized plan of valid dedented YAML."""

    def run(text: str) -> dict[str, object]:
        return build_plan(accept(text))

    return run
