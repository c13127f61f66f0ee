"""action.yml metadata (issue #15): normalized for the runner; every bad file refused by name."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from forge_ci.workflow.action_metadata import (
    MAX_ACTION_BYTES,
    ActionInvalid,
    parse_action_metadata,
)
from tests.conftest import action_bundle


def _bundle_file(name: str, tag: str, tmp_path: Path) -> bytes:
    bundle = action_bundle(name)
    git_dir = tmp_path / f"{name}.git"
    if not git_dir.exists():
        subprocess.run(["git", "clone", "-q", "--bare", str(bundle), str(git_dir)], check=True)
    return subprocess.run(
        ["git", "--git-dir", str(git_dir), "show", f"{tag}:action.yml"],
        check=True,
        capture_output=True,
    ).stdout


def test_real_setup_python(tmp_path: Path) -> None:
    parsed = parse_action_metadata(
        _bundle_file("setup-python", "v5", tmp_path), "actions/setup-python@v5"
    )
    metadata = parsed.metadata
    assert metadata["name"] == "Setup Python"
    assert metadata["runs"] == {
        "using": "node20",
        "main": "dist/setup/index.js",
        "pre": "",
        "post": "dist/cache-save/index.js",
        "pre_if": "",
        "post_if": "success()",
        "steps": [],
    }
    token = metadata["inputs"]["token"]["default"]
    assert token["template"][0] == {
        "expr": "github.server_url == 'https://github.com' && github.token || ''"
    }
    assert metadata["inputs"]["python-version"]["required"] is False
    assert metadata["outputs"]["python-version"] == {"value": None}
    assert parsed.nested == []


@pytest.mark.parametrize(
    ("name", "tag", "using"),
    [
        ("checkout", "v6", "node24"),
        ("setup-node", "v4", "node20"),
        ("github-script", "v8", "node24"),
        ("cache", "v5", "node24"),
    ],
)
def test_real_actions_parse(tmp_path: Path, name: str, tag: str, using: str) -> None:
    parsed = parse_action_metadata(_bundle_file(name, tag, tmp_path), f"actions/{name}@{tag}")
    assert parsed.using == using


COMPOSITE = b"""\
name: Greeter
inputs:
  who:
    description: whom
    required: true
  greeting:
    default: Hello ${{ inputs.who }}
outputs:
  said:
    value: ${{ steps.say.outputs.text }}
runs:
  using: composite
  steps:
    - id: say
      run: echo "text=${{ inputs.greeting }}" >> "$GITHUB_OUTPUT"
      shell: bash
      env:
        WHO: ${{ inputs.who }}
    - uses: ./.github/actions/inner
      if: inputs.who != 'nobody'
      with:
        x: 1
    - uses: o/nested@v2
      continue-on-error: true
"""


def test_composite_action() -> None:
    parsed = parse_action_metadata(COMPOSITE, "o/greeter@v1")
    metadata = parsed.metadata
    assert metadata["inputs"]["who"] == {
        "required": True,
        "default": None,
        "deprecation_message": "",
    }
    assert metadata["inputs"]["greeting"]["default"] == {
        "template": ["Hello ", {"expr": "inputs.who"}]
    }
    assert metadata["outputs"]["said"] == {
        "value": {"template": [{"expr": "steps.say.outputs.text"}]}
    }
    first, second, third = metadata["runs"]["steps"]
    assert first["id"] == "say" and first["shell"] == "bash" and first["uses"] == ""
    assert first["env"] == {"WHO": {"template": [{"expr": "inputs.who"}]}}
    assert second["uses"] == "./.github/actions/inner" and second["with"] == {"x": "1"}
    assert second["if"] == "success() && (inputs.who != 'nobody')"
    assert second["id"] == "step_2" and second["action"] == ""
    assert third["continue_on_error"] is True
    assert parsed.nested == ["./.github/actions/inner", "o/nested@v2"]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (b"name: x\nruns:\n  using: docker\n  image: Dockerfile\n", "runs.using: docker is not"),
        (
            b"name: x\nruns:\n  using: node99\n  main: a.js\n",
            "runs.using 'node99' is not supported",
        ),
        (b"name: x\nruns:\n  using: node20\n", "runs.main is required"),
        (b"name: x\nruns:\n  using: node20\n  main: ../x.js\n", "must be a relative path"),
        (b"name: x\nruns:\n  using: node20\n  main: /x.js\n", "must be a relative path"),
        (b"name: x\n", "action metadata needs 'runs'"),
        (b"name: [x\n", "YAML syntax error"),
        (b"", "action metadata must be a mapping, not empty"),
        (b"- a\n", "action metadata must be a mapping"),
        (b"a: &x 1\nb: *x\n", "anchor"),
        (b"name: x\nruns:\n  using: composite\n  steps:\n    - run: echo\n", "needs shell"),
        (b"name: x\nruns:\n  using: composite\n", "must list its steps"),
        (
            b"name: x\nruns:\n  using: composite\n  steps:\n    - uses: docker://a\n",
            "Docker container actions are not supported",
        ),
        (
            b"name: x\nruns:\n  using: composite\n  steps:\n    - uses: actions/checkout@v4\n",
            "actions/checkout inside a composite action is not supported",
        ),
        (
            b"name: x\ninputs:\n  a: {}\n  A: {}\nruns: {using: node20, main: a.js}\n",
            "defined twice",
        ),
        (b"name: x\nrun: {using: node20, main: a.js}\n", "'run' is not a key"),
        (
            b"name: x\ninputs:\n  a: {required: maybe}\nruns: {using: node20, main: a.js}\n",
            "must be true or false",
        ),
        (
            b"name: x\nruns: {using: node20, main: a.js, post-if: 'success('}\n",
            "invalid expression in runs.post-if",
        ),
    ],
)
def test_refused_metadata(text: bytes, reason: str) -> None:
    with pytest.raises(ActionInvalid) as caught:
        parse_action_metadata(text, "o/bad@v1")
    assert reason in str(caught.value), str(caught.value)
    assert str(caught.value).startswith("action o/bad@v1: action.yml cannot be used: ")


def test_huge_metadata_is_refused_unread() -> None:
    text = b"name: x\n#" + b"a" * MAX_ACTION_BYTES
    with pytest.raises(ActionInvalid) as caught:
        parse_action_metadata(text, "o/huge@v1")
    assert f"the limit is {MAX_ACTION_BYTES}" in str(caught.value)


def test_every_problem_is_named_with_its_line() -> None:
    text = b"name: x\ninputs:\n  a: {requird: true}\nruns:\n  using: node20\n  mian: a.js\n"
    with pytest.raises(ActionInvalid) as caught:
        parse_action_metadata(text, "o/bad@v1")
    lines = [(d.line, d.message) for d in caught.value.diagnostics]
    assert (3, "'requird' is not a key of inputs.a; did you mean \"required\"?") in lines
    assert any(line == 6 and 'did you mean "main"' in message for line, message in lines)
