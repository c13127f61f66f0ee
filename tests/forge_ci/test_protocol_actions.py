"""Assignment version 2: action steps (``action``, ``with``) and the ``actions`` map."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from forge_ci import protocol
from forge_ci.protocol import Action, Assignment, ProtocolError, action_key
from tests.forge_ci.test_protocol import assignment_json

NODE_COMMIT = "a" * 40
COMPOSITE_COMMIT = "b" * 40
NODE_KEY = action_key(NODE_COMMIT, "")
COMPOSITE_KEY = action_key(COMPOSITE_COMMIT, "actions/greet")


def step(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "s",
        "name": "s",
        "uses": "",
        "action": "",
        "with": {},
        "run": "",
        "shell": "",
        "working_directory": "",
        "env": {},
        "if": "success()",
        "continue_on_error": False,
        "timeout_minutes": 0,
    }
    return {**base, **fields}


def node_action() -> dict[str, Any]:
    return {
        "reference": "actions/setup-python@v5",
        "repository": "actions/setup-python",
        "commit": NODE_COMMIT,
        "path": "",
        "archive_path": "/-/runner-api/v1/attempts/9/actions/1.tar",
        "metadata": {
            "name": "Setup Python",
            "inputs": {
                "python-version": {"required": False, "default": None, "deprecation_message": ""},
                "token": {
                    "required": False,
                    "default": {"template": [{"expr": "github.token"}]},
                    "deprecation_message": "",
                },
            },
            "outputs": {"python-version": {"value": None}},
            "runs": {
                "using": "node20",
                "main": "dist/setup/index.js",
                "pre": "",
                "post": "dist/cache-save/index.js",
                "pre_if": "",
                "post_if": "success()",
                "steps": [],
            },
        },
    }


def composite_action() -> dict[str, Any]:
    return {
        "reference": "alice/tools/actions/greet@v1",
        "repository": "alice/tools",
        "commit": COMPOSITE_COMMIT,
        "path": "actions/greet",
        "archive_path": "/-/runner-api/v1/attempts/9/actions/2.tar",
        "metadata": {
            "name": "Greet",
            "inputs": {"who": {"required": True, "default": "world", "deprecation_message": ""}},
            "outputs": {"greeting": {"value": {"template": [{"expr": "steps.say.outputs.text"}]}}},
            "runs": {
                "using": "composite",
                "main": "",
                "pre": "",
                "post": "",
                "pre_if": "",
                "post_if": "",
                "steps": [
                    step(
                        id="say",
                        run={"template": ["echo text=hi ", {"expr": "inputs.who"}]},
                        shell="bash",
                    ),
                    step(
                        id="py",
                        uses="actions/setup-python@v5",
                        action=NODE_KEY,
                        **{"with": {"python-version": "3.11"}},
                    ),
                ],
            },
        },
    }


def with_actions() -> dict[str, Any]:
    data = assignment_json()
    data["actions"] = {NODE_KEY: node_action(), COMPOSITE_KEY: composite_action()}
    data["steps"].append(
        step(
            id="greet",
            uses="alice/tools/actions/greet@v1",
            action=COMPOSITE_KEY,
            **{"with": {"who": {"template": [{"expr": "github.actor"}]}}},
        )
    )
    return data


def test_actions_round_trip() -> None:
    data = with_actions()
    parsed = Assignment.from_json(data)
    assert parsed.assignment_version == protocol.ASSIGNMENT_VERSION == 2
    assert json.loads(protocol.dumps(parsed.to_json())) == data
    greet = parsed.steps[-1]
    assert greet.is_action and greet.action == COMPOSITE_KEY
    assert greet.inputs == {"who": {"template": [{"expr": "github.actor"}]}}
    composite = parsed.actions[COMPOSITE_KEY]
    assert isinstance(composite, Action) and composite.metadata.runs.composite
    assert composite.metadata.runs.steps[1].action == NODE_KEY
    node = parsed.actions[NODE_KEY].metadata
    assert node.inputs["token"].default == {"template": [{"expr": "github.token"}]}
    assert node.inputs["python-version"].default is None
    assert node.outputs == {"python-version": None}
    assert (node.runs.post, node.runs.post_if) == ("dist/cache-save/index.js", "success()")
    claim = protocol.claim_body(parsed, 1)
    assert protocol.parse_claim_response(json.loads(protocol.dumps(claim))) == parsed


Change = Callable[[dict[str, Any]], None]


def _set(path: tuple[Any, ...], value: Any) -> Change:
    def change(data: dict[str, Any]) -> None:
        target: Any = data
        for part in path[:-1]:
            target = target[part]
        target[path[-1]] = value

    return change


def _delete(path: tuple[Any, ...]) -> Change:
    def change(data: dict[str, Any]) -> None:
        target: Any = data
        for part in path[:-1]:
            target = target[part]
        del target[path[-1]]

    return change


NODE = ("actions", NODE_KEY)
COMP = ("actions", COMPOSITE_KEY)
NODE_RUNS = (*NODE, "metadata", "runs")
COMP_RUNS = (*COMP, "metadata", "runs")


@pytest.mark.parametrize(
    "change, message",
    [
        (_delete(("actions",)), "'actions' is required"),
        (_set(("actions",), []), "actions must be an object"),
        (_delete(("steps", 2, "action")), "'action' is required"),
        (_delete(("steps", 2, "with")), "'with' is required"),
        (_set(("steps", 2, "action"), ""), "needs an action key"),
        (_set(("steps", 2, "action"), "c" * 40 + ":"), "not in the assignment's actions"),
        (_set(("steps", 2, "run"), "echo"), "a uses step has no run script"),
        (_set(("steps", 1, "action"), NODE_KEY), "does not use an action"),
        (_set(("steps", 1, "with"), {"x": "1"}), "a run step takes no with inputs"),
        (_set(("steps", 2, "with"), {"who": 1}), r"with.who must be text or a template"),
        (_set(("steps", 2, "with"), {"who": "a", "WHO": "b"}), "given twice"),
        (_set(("steps", 2, "with"), {"=x": "a"}), "not a valid input name"),
        (_set(("steps", 2, "with"), []), "with must be an object"),
        (_set(("actions", "x"), node_action()), "must be 'a{40}:'"),
        (_set((*NODE, "commit"), "A" * 40), "commit must be a commit id"),
        (_set((*NODE, "repository"), "no-slash"), "OWNER/REPO"),
        (_set((*NODE, "reference"), ""), "reference must not be empty"),
        (_set((*NODE, "archive_path"), "http://elsewhere/a.tar"), "archive_path must be a path"),
        (_set((*NODE, "archive_path"), "/-/runner-api/v1/../x.tar"), "archive_path"),
        (_set((*NODE, "surprise"), 1), "unknown field 'surprise'"),
        (_set((*COMP, "path"), "../up"), "path must be a relative path"),
        (_set((*COMP, "path"), "/abs"), "path must be a relative path"),
        (_set((*NODE, "metadata", "inputs"), {"a b!": {}}), "not a valid input name"),
        (_set((*NODE, "metadata", "inputs", "token", "required"), "yes"), "required must be"),
        (_delete((*NODE, "metadata", "inputs", "token", "deprecation_message")), "required"),
        (
            _set(
                (*NODE, "metadata", "inputs", "Token"),
                {"required": False, "default": None, "deprecation_message": ""},
            ),
            "twice",
        ),
        (_set((*NODE, "metadata", "outputs"), {"o": {}}), "'value' is required"),
        (_set((*NODE, "metadata", "outputs"), {"o o": {"value": None}}), "not a valid output"),
        (_set((*NODE_RUNS, "using"), "docker"), "using must be one of"),
        (_set((*NODE_RUNS, "main"), ""), "needs main"),
        (_set((*NODE_RUNS, "main"), "../escape.js"), "main must be a relative path"),
        (_set((*NODE_RUNS, "steps"), [step()]), "only a composite action has steps"),
        (_set((*COMP_RUNS, "main"), "x.js"), "a composite action has steps"),
        (_set((*COMP_RUNS, "steps", 0, "shell"), ""), "must name its shell"),
        (_set((*COMP_RUNS, "steps", 1, "id"), "say"), "step ids are not unique"),
        (_set((*COMP_RUNS, "steps", 1, "action"), "d" * 40 + ":"), "not in the assignment's"),
    ],
)
def test_action_refusals(change: Change, message: str) -> None:
    data = copy.deepcopy(with_actions())
    change(data)
    with pytest.raises(ProtocolError, match=message):
        Assignment.from_json(data)


def test_step_defaults_keep_run_steps_unchanged() -> None:
    """A step built without action fields is a run step with no inputs."""
    parsed = Assignment.from_json(assignment_json())
    assert parsed.steps[1].action == "" and parsed.steps[1].inputs == {}
    assert parsed.steps[0].inputs == {"fetch-depth": "0"}
    assert parsed.actions == {}


# --- Request fields of the runner side: masks, annotations, summaries -----------------------------

EXECUTION = "ef" * 16


def _body(**fields: Any) -> bytes:
    return json.dumps({"version": 1, "execution_id": EXECUTION, **fields}).encode()


def test_log_masks_and_step_reports_round_trip() -> None:
    log = protocol.LogRequest(EXECUTION, 3, "s", "stdout", "", ["a-secret", "other value"])
    body = protocol.request_body(log)
    assert body["masks"] == ["a-secret", "other value"]
    assert protocol.parse_request("logs", protocol.dumps(body)) == log
    # Empty optional fields stay off the wire (older servers never saw them).
    assert "masks" not in protocol.request_body(
        protocol.LogRequest(EXECUTION, 1, "", "stdout", "x")
    )
    note = protocol.Annotation("warning", "careful", "a.py", "T", 3, 4, 5, 6)
    step = protocol.StepRequest(EXECUTION, "s", "completed", "success", 0, False, [note], "sum")
    assert protocol.parse_request("steps", protocol.dumps(protocol.request_body(step))) == step
    plain = protocol.StepRequest(EXECUTION, "s", "running", "", -1, False)
    assert set(protocol.request_body(plain)) == {
        "version",
        "execution_id",
        "step_id",
        "state",
        "conclusion",
        "exit_code",
        "continue_on_error",
    }


def _annotation(**fields: Any) -> dict[str, Any]:
    base = {
        "level": "error",
        "message": "m",
        "file": "",
        "title": "",
        "line": 0,
        "end_line": 0,
        "col": 0,
        "end_column": 0,
    }
    return {**base, **fields}


STEP = {
    "step_id": "s",
    "state": "completed",
    "conclusion": "failure",
    "exit_code": 1,
    "continue_on_error": False,
}


@pytest.mark.parametrize(
    "endpoint, fields, message",
    [
        (
            "logs",
            {"sequence": "1", "step_id": "", "stream": "stdout", "text": "", "masks": ["  "]},
            "not blank",
        ),
        (
            "logs",
            {"sequence": "1", "step_id": "", "stream": "stdout", "text": "", "masks": ["x" * 2049]},
            "1 to 2048 characters",
        ),
        (
            "logs",
            {"sequence": "1", "step_id": "", "stream": "stdout", "text": "", "masks": ["v"] * 65},
            "more than 64",
        ),
        (
            "logs",
            {"sequence": "1", "step_id": "", "stream": "stdout", "text": "", "masks": "v"},
            "array of strings",
        ),
        ("steps", {**STEP, "annotations": [_annotation(level="fatal")]}, "level must be"),
        ("steps", {**STEP, "annotations": [_annotation(message="m" * 1025)]}, "1024"),
        ("steps", {**STEP, "annotations": [_annotation(line=-1)]}, "line must be between"),
        ("steps", {**STEP, "annotations": [_annotation(extra=1)]}, "unknown field"),
        ("steps", {**STEP, "annotations": [_annotation()] * 31}, "more than 30"),
        ("steps", {**STEP, "summary": "s" * (16 * 1024 + 1)}, "longer than 16384 bytes"),
        (
            "steps",
            {**STEP, "state": "running", "conclusion": "", "summary": "x"},
            "come with the completed report",
        ),
    ],
)
def test_request_field_refusals(endpoint: str, fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        protocol.parse_request(endpoint, _body(**fields))


def test_hook_steps_are_the_pre_and_post_scripts_in_order() -> None:
    parsed = Assignment.from_json(with_actions())
    pre, post = protocol.hook_steps(parsed.steps, parsed.actions)
    # The node action (a post script) is used only inside the composite, at greet/py.
    assert pre == []
    assert [(hook.id, hook.path) for hook in post] == [("post-greet-py", ("greet", "py"))]
    data = with_actions()
    data["steps"].append(
        step(id="direct", name="direct", uses="actions/setup-python@v5", action=NODE_KEY)
    )
    data["actions"][NODE_KEY]["metadata"]["runs"]["pre"] = "dist/pre.js"
    parsed = Assignment.from_json(data)
    pre, post = protocol.hook_steps(parsed.steps, parsed.actions)
    assert [hook.id for hook in pre] == ["pre-direct"]  # nested actions get no pre step
    assert [hook.id for hook in post] == ["post-direct", "post-greet-py"]  # newest first
    assert post[0].name == "Post Run actions/setup-python@v5"
