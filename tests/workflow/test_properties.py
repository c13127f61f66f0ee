"""Property tests: no input makes the parser raise anything but ``WorkflowInvalid``."""

from __future__ import annotations

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from wf_support import MINIMAL

from forge_ci.workflow import WorkflowInvalid, build_plan, parse_workflow, plan_digest

#: Pieces that exercise YAML structure and every part of the checker.
FRAGMENTS = [
    "on", "push", "pull_request", "workflow_dispatch", "jobs", "steps", "run", "uses",
    "runs-on", "env", "needs", "strategy", "matrix", "include", "exclude", "if", "name", "id",
    "forge-ci/checkout@v1", "actions/checkout@v4", "with", "shell", "bash", "working-directory",
    "timeout-minutes", "continue-on-error", "outputs", "permissions", "contents", "read",
    "concurrency", "group", "branches", "paths", "types", "defaults", "self-hosted",
    "${{", "}}", "${{ github.sha }}", "${{ matrix.x }}", "${{ secrets.X }}",
    "${{ steps.a.outputs.b }}",
    "success()", "&&", "||", "!", "'", '"', "[", "]", "{", "}", ",", ":", ": ", "- ", "-",
    "\n", "\n  ", "\n    ", "\n      - ", "  ", "\t", "#", "&a", "*a", "!!str", "<<", "?",
    "|", ">", "~", "null", "true", "yes", "0", "3.10", "1e400", ".inf", "---", "...", "%YAML",
    "\\", "\x00", "\ufeff", "é", "\ud800", "**", "!main",
]  # fmt: skip

yamlish = st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=8), max_size=60).map("".join)


def check(data: str | bytes) -> None:
    try:
        workflow = parse_workflow(data, "fuzz.yml")
    except WorkflowInvalid as exc:
        assert exc.diagnostics
        for diagnostic in exc.diagnostics:
            assert diagnostic.line >= 1 and diagnostic.column >= 1 and diagnostic.message
        return
    plan_digest(build_plan(workflow))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(yamlish)
def test_yamlish_text_never_crashes(text: str) -> None:
    check(text)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_crash(data: bytes) -> None:
    check(data)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, len(MINIMAL)), yamlish)
def test_mutations_of_a_valid_workflow_never_crash(position: int, insert: str) -> None:
    check(MINIMAL[:position] + insert + MINIMAL[position:])
    check(MINIMAL[:position] + insert)


keys = st.sampled_from(FRAGMENTS[:40])
scalars = st.sampled_from(FRAGMENTS) | st.integers(-5, 400) | st.booleans() | st.none()
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(keys, values, max_size=6), st.dictionaries(keys, values, max_size=6))
def test_structured_workflows_never_crash(job: dict[str, object], step: dict[str, object]) -> None:
    # Well-formed YAML with random keys and values reaches the checks behind the loader.
    document = {
        "on": "push",
        "jobs": {"build": {"runs-on": "self-hosted", **job, "steps": [{"run": "x", **step}]}},
    }
    check(yaml.safe_dump(document, sort_keys=False, allow_unicode=True))
