"""The built-in checkout's inputs (forge_ci/workflow/checkout.py): accepted, normalized, refused."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_steps import plan_steps, steps
from wf_support import messages

from forge_ci.workflow import Diagnostic
from forge_ci.workflow.checkout import DEFAULTS, normalize_path, path_problem

Refuse = Callable[[str | bytes], list[Diagnostic]]
PlanOf = Callable[[str], dict[str, Any]]


def checkout_with(plan_of: PlanOf, inputs: str) -> dict[str, str]:
    (step,) = plan_steps(plan_of(steps(f"uses: actions/checkout@v4\nwith:\n{inputs}")))
    result: dict[str, str] = step["with"]
    return result


def test_no_inputs_mean_the_defaults(plan_of: PlanOf) -> None:
    (step,) = plan_steps(plan_of(steps("uses: actions/checkout@v6")))
    assert step["with"] == DEFAULTS == {
        "fetch-depth": "1", "ref": "", "path": "", "clean": "true", "fetch-tags": "false",
    }  # fmt: skip


def test_every_supported_input_is_normalized(plan_of: PlanOf) -> None:
    inputs = """\
  fetch-depth: 0
  ref: v1.2
  path: ./src//app/
  clean: False
  fetch-tags: 'TRUE'
  persist-credentials: false
  submodules: false
  lfs: "false"
"""
    assert checkout_with(plan_of, inputs) == {
        "fetch-depth": "0", "ref": "v1.2", "path": "src/app", "clean": "false",
        "fetch-tags": "true", "persist-credentials": "false",
    }  # fmt: skip
    assert checkout_with(plan_of, "  fetch-depth: '25'\n  ref:\n")["fetch-depth"] == "25"


def test_submodules_are_accepted_with_a_notice_and_refs_keep_their_expressions(
    plan_of: PlanOf,
) -> None:
    from forge_ci.workflow import parse_workflow

    text = steps(
        "uses: actions/checkout@v4\nwith:\n  submodules: recursive\n"
        "  ref: ${{ github.event.pull_request.head.sha || github.ref }}\n"
        "  token: ${{ secrets.PAT || github.token }}"
    )
    workflow = parse_workflow(text)
    assert [n.message for n in workflow.notices] == [
        "with.submodules: submodules are not checked out on forge-ci; their folders stay empty",
        "with.token is not used: the built-in checkout reads the run's own repository, which "
        "needs no credentials",
    ]
    # The token is never evaluated, so its secret is not asked for.
    (step,) = plan_steps(plan_of(text))
    assert "token" not in step["with"] and step["env"] == {}
    inputs = checkout_with(plan_of, "  ref: ${{ github.head_ref }}\n  submodules: false\n")
    assert inputs["ref"] == "${{ github.head_ref }}"  # evaluated and pinned at run creation
    assert "submodules" not in inputs


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ("  fetch-depth: -1", "with.fetch-depth must be 0 (all history) or a number of commits"),
        ("  fetch-depth: deep", "not 'deep'"),
        ("  fetch-depth: 1000001", "up to 1000000"),
        ("  clean: yes", "with.clean must be true or false, not 'yes'"),
        ("  fetch-tags: 1", "with.fetch-tags must be true or false"),
        ("  submodules: maybe", "with.submodules must be true, false or recursive"),
        ("  lfs: true", "takes only lfs: false"),
        ("  sparse-checkout: src", "sparse checkouts are not supported"),
        ("  repository: other/repo", "reads only the run's own repository"),
        ("  ssh-key: ${{ secrets.KEY }}", "with.ssh-key is not supported"),
        ("  token: ${{ secrets }}", "name one secret, like secrets.NAME"),
        ("  fetch_depth: 0", 'did you mean "fetch-depth"?'),
        ("  path: ../up", "must stay inside the workspace"),
        ("  path: /abs", "must be relative to the workspace"),
        ("  path: .home/x", "is reserved"),
        ("  path: a/.git", "must not name a .git directory"),
        ("  ref: ${{ steps.x.outputs.ref }}", "the steps context is not available in with.ref"),
        ("  ref: ${{ env.REF }}", "the env context is not available in with.ref"),
        ("  path: ${{ secrets.DIR }}", "(not in with.path)"),
        ("  path: ${{ hashFiles('x') }}", "only step keys can use it (not with.path)"),
        ("  ref: 'a b'", "is not a valid branch, tag or commit name"),
        ("  ref: main..x", "is not a valid branch, tag or commit name"),
        ("  ref: [a]", "with.ref must be a value"),
        ("  fetch-depth: 1\n  Fetch-Depth: 2", "given twice"),
    ],
)
def test_refusals_are_located_and_name_the_input(refuse: Refuse, inputs: str, message: str) -> None:
    found = messages(refuse(steps(f"uses: actions/checkout@v4\nwith:\n{inputs}")))
    assert message in found, found
    if "is not supported by" in found:
        assert "supported inputs: fetch-depth, ref, path, clean, fetch-tags" in found


def _reference_path(text: str) -> str | None:
    """The reference: what a relative in-workspace path normalizes to, or None if refused."""
    if len(text) > 255 or text.startswith("/") or "\\" in text:
        return None
    if any(ord(char) < 32 for char in text):
        return None
    parts = [part for part in text.split("/") if part and part != "."]
    if ".." in parts or any(part.lower() == ".git" for part in parts):
        return None
    if parts and parts[0] in (".home", ".tmp"):
        return None
    return "/".join(parts)


@given(st.lists(st.sampled_from(["a", "b", ".", "..", "", ".git", ".GIT", ".home", "x\\y", "\n"]),
                max_size=6), st.booleans())  # fmt: skip
def test_paths_match_the_reference(parts: list[str], absolute: bool) -> None:
    text = ("/" if absolute else "") + "/".join(parts)
    expected = _reference_path(text)
    problem = path_problem(text)
    assert (problem is None) == (expected is not None), (text, problem)
    if expected is not None:
        assert normalize_path(text) == expected
