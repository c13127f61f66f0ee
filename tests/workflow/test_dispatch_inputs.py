"""``workflow_dispatch`` inputs: the declaration (located refusals) and values at dispatch."""

from __future__ import annotations

import pytest
from wf_support import JOBS, Accept, Refuse, messages

from forge_ci.workflow import build_plan
from forge_ci.workflow.dispatch_inputs import (
    MAX_INPUTS,
    DispatchInput,
    InputInvalid,
    event_inputs,
    resolve_inputs,
)

DECLARED = """\
on:
  workflow_dispatch:
    inputs:
      tag:
        description: The tag to build
        required: true
      debug:
        type: boolean
        default: false
      level:
        type: choice
        options: [info, debug, trace]
        default: info
      count:
        type: number
        default: 3
      target:
        type: environment
      note:
"""


def declared(accept: Accept) -> tuple[DispatchInput, ...]:
    return accept(DECLARED + JOBS).triggers.dispatch_inputs


def test_every_type_is_declared(accept: Accept) -> None:
    inputs = declared(accept)
    assert [(i.name, i.type, i.required, i.default) for i in inputs] == [
        ("tag", "string", True, None),
        ("debug", "boolean", False, False),
        ("level", "choice", False, "info"),
        ("count", "number", False, "3"),
        ("target", "environment", False, None),
        ("note", "string", False, None),
    ]
    assert inputs[0].description == "The tag to build"
    assert inputs[2].options == ("info", "debug", "trace")
    plan = build_plan(accept(DECLARED + JOBS))
    assert plan["on"]["workflow_dispatch"]["inputs"]["level"] == {
        "type": "choice",
        "required": False,
        "default": "info",
        "options": ["info", "debug", "trace"],
    }


def test_inputs_null_or_empty_declare_none(accept: Accept) -> None:
    for text in (
        "on:\n  workflow_dispatch:\n    inputs:\n",
        "on:\n  workflow_dispatch:\n    inputs: {}\n",
    ):
        triggers = accept(text + JOBS).triggers
        assert triggers.workflow_dispatch and triggers.dispatch_inputs == ()


def head(body: str) -> str:
    return "on:\n  workflow_dispatch:\n    inputs:\n" + body + JOBS


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("      x:\n        type: text\n", "5:15: 'text' is not an input type; use one of string"),
        ("      x:\n        type: choice\n", "5:9: input 'x' is a choice and needs options"),
        ("      x:\n        type: choice\n        options: []\n", "must be a non-empty list"),
        (
            "      x:\n        type: choice\n        options: [a, b]\n        default: c\n",
            "7:18: the default 'c' of input 'x' is not one of its options (a, b)",
        ),
        ("      x:\n        options: [a]\n", "5:9: options apply to type: choice only"),
        (
            "      x:\n        type: boolean\n        default: yes\n",
            "must be true or false, not 'yes' (YAML 1.1 spellings",
        ),
        ("      x:\n        type: boolean\n        default: 'true'\n", "must be true or false"),
        ("      x:\n        type: number\n        default: many\n", "must be a number, not 'many'"),
        ("      x:\n        default: true\n", "must be text, not the boolean true; quote it"),
        ("      x:\n        required: yes\n", "required of input 'x' must be true or false"),
        ("      x:\n        secret: true\n", "5:9: 'secret' is not a key of input 'x'"),
        ("      1x:\n", "4:7: '1x' is not an input name"),
        ("      x: 3\n", "4:10: input 'x' must be a mapping"),
        ("      x:\n      X:\n", "5:7: 'X' is already defined as 'x' (line 4)"),
        ("      x:\n        type: choice\n        options: [a, a]\n", "the option 'a' of input"),
    ],
)
def test_refused_declarations_are_located(refuse: Refuse, body: str, expected: str) -> None:
    found = messages(refuse(head(body)))
    assert expected in found, found


def test_at_most_25_inputs_as_on_github(accept: Accept, refuse: Refuse) -> None:
    body = "".join(f"      i{n}:\n" for n in range(MAX_INPUTS))
    assert len(accept(head(body)).triggers.dispatch_inputs) == MAX_INPUTS
    found = messages(refuse(head(body + "      extra:\n")))
    assert f"{4 + MAX_INPUTS}:7: a workflow_dispatch event may define up to 25 inputs" in found


def test_other_dispatch_keys_are_still_refused(refuse: Refuse) -> None:
    found = messages(refuse("on:\n  workflow_dispatch:\n    branches: [main]\n" + JOBS))
    assert "3:5: 'branches' is not a workflow_dispatch key" in found


# -- values at dispatch -------------------------------------------------------------------------


def test_defaults_fill_what_is_not_given_and_types_follow_github(accept: Accept) -> None:
    values = resolve_inputs(declared(accept), {"tag": "v1.0", "debug": "true"})
    assert values == {
        "tag": "v1.0",
        "debug": True,
        "level": "info",
        "count": "3",
        "target": "",
        "note": "",
    }
    # github.event.inputs: the same, booleans as text.
    assert event_inputs(values)["debug"] == "true"
    assert all(isinstance(v, str) for v in event_inputs(values).values())
    assert resolve_inputs(declared(accept), {"tag": "x"})["debug"] is False


@pytest.mark.parametrize(
    ("given", "name", "message"),
    [
        ({}, "tag", "input 'tag' is required"),
        ({"tag": "  "}, "tag", "input 'tag' is required and may not be empty"),
        ({"tag": "a", "debug": "yes"}, "debug", "input 'debug' is a boolean: give true or false"),
        ({"tag": "a", "level": "INFO"}, "level", "input 'level' must be one of info, debug, trace"),
        ({"tag": "a", "count": "3 apples"}, "count", "input 'count' is a number, not '3 apples'"),
        ({"tag": "a", "tagg": "b"}, "tagg", "unknown input 'tagg'; did you mean \"tag\"?"),
        ({"tag": "a\x00b"}, "tag", "input 'tag' contains a control character"),
        ({"tag": "x" * 70_000}, "tag", "GitHub's limit, kept here, is 65535"),
    ],
)
def test_values_that_do_not_fit_name_the_input(
    accept: Accept, given: dict[str, str], name: str, message: str
) -> None:
    with pytest.raises(InputInvalid) as caught:
        resolve_inputs(declared(accept), given)
    assert message in caught.value.message
    assert caught.value.input_name == name
    assert caught.value.http_status == 400


def test_a_workflow_without_inputs_refuses_any() -> None:
    with pytest.raises(InputInvalid, match="unknown input 'x': the workflow declares no inputs"):
        resolve_inputs((), {"x": "1"})
    assert resolve_inputs((), {}) == {}


def test_values_keep_what_was_typed(accept: Accept) -> None:
    values = resolve_inputs(declared(accept), {"tag": " v1 $(id) ", "count": "-2.5e3", "note": ""})
    assert values["tag"] == " v1 $(id) " and values["count"] == "-2.5e3" and values["note"] == ""
