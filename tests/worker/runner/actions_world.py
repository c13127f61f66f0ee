"""Actions for runner tests: trees, metadata, and a forge that hands them to the runner.

The workflow parser and run creation of ``uses:`` belong to the actions-server side; runner
tests build their own assignments instead. :func:`install` wraps the coordinator's
``build_assignment`` (run in this process by the test server, on both claim paths) so that
chosen steps of the plan become action steps with an ``actions`` map, and serves each action's
tree as a tar at its ``archive_path`` beside the real runner API. Everything else (claim, step
rows with their pre and post steps, logs, masking, completion) is the real server.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import re
import subprocess
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from flask import Blueprint, Response, request

from forge_ci import protocol
from forge_ci.coordinator import claims, direct_claims
from forge_ci.protocol import Action, AssignmentStep
from tests.conftest import action_bundle
from tests.worker.runner.conftest import Forge
from web import csrf

_EXPR = re.compile(r"\$\{\{(.*?)\}\}", re.S)


def value(text: str | None) -> Any:
    """A plan value: text, or a runtime template for text with ``${{ }}``."""
    if text is None:
        return None
    if "${{" not in text:
        return text
    parts: list[Any] = []
    position = 0
    for match in _EXPR.finditer(text):
        if match.start() > position:
            parts.append(text[position : match.start()])
        parts.append({"expr": match.group(1).strip()})
        position = match.end()
    if position < len(text):
        parts.append(text[position:])
    return {"template": parts}


def step(step_id: str, **fields: Any) -> dict[str, Any]:
    """A composite step on the wire (``uses`` names a test action: see :class:`ActionSpec`)."""
    wire: dict[str, Any] = {
        "id": step_id,
        "name": step_id,
        "uses": "",
        "action": "",
        "with": {},
        "run": value(fields.pop("run", "")),
        "shell": fields.pop("shell", "bash" if "uses" not in fields else ""),
        "working_directory": "",
        "env": {key: value(item) for key, item in fields.pop("env", {}).items()},
        "if": fields.pop("condition", "success()"),
        "continue_on_error": fields.pop("continue_on_error", False),
        "timeout_minutes": 0,
    }
    if "uses" in fields:
        wire["uses"] = fields.pop("uses")
        wire["with"] = {key: value(item) for key, item in fields.pop("with", {}).items()}
    assert not fields, fields
    return wire


@dataclass
class ActionSpec:
    """An action: its files and its metadata (``runs`` as on the wire, steps via :func:`step`)."""

    files: Mapping[str, str | bytes]
    runs: dict[str, Any]
    inputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    outputs: dict[str, str | None] = field(default_factory=dict)
    name: str = "test action"
    #: A tar to serve instead of one built from ``files`` (bad archives).
    archive: bytes | None = None


def node(main: str = "main.js", **runs: str) -> dict[str, Any]:
    base = {"using": "node20", "main": main, "pre": "", "post": "", "pre_if": "", "post_if": ""}
    return {**base, **runs, "steps": []}


def composite(*steps: dict[str, Any]) -> dict[str, Any]:
    base = {"using": "composite", "main": "", "pre": "", "post": "", "pre_if": "", "post_if": ""}
    return {**base, "steps": list(steps)}


def declare(required: bool = False, default: str | None = None, deprecated: str = "") -> Any:
    return {"required": required, "default": value(default), "deprecation_message": deprecated}


def tar_of(files: Mapping[str, str | bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, content in sorted(files.items()):
            data = content.encode() if isinstance(content, str) else content
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o755 if name.endswith(".sh") else 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def tree_files(root: Path) -> dict[str, bytes]:
    """Every regular file below ``root`` (no ``.git``), by relative path."""
    files: dict[str, bytes] = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if ".git" in relative.parts or not path.is_file() or path.is_symlink():
            continue
        files[str(relative)] = path.read_bytes()
    return files


def bundle_tree(name: str, tag: str, tmp_path: Path) -> Path:
    """The tree of ``tag`` in ``shared/actions/<name>.bundle``, checked out."""
    bundle = action_bundle(name)
    target = tmp_path / f"{name}-{tag}"
    subprocess.run(
        ["git", "clone", "-q", "--no-checkout", str(bundle), str(target)],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        ["git", "-C", str(target), "checkout", "-q", f"refs/tags/{tag}"],
        check=True,
        capture_output=True,
    )
    return target


def from_action_yml(root: Path) -> ActionSpec:
    """A ActionSpec from a real ``action.yml`` (a small normalizer for tests)."""
    document = yaml.safe_load((root / "action.yml").read_text())
    inputs = {
        key: declare(
            bool(spec.get("required", False)),
            None if spec.get("default") is None else str(spec["default"]),
            str(spec.get("deprecationMessage", "")),
        )
        for key, spec in (document.get("inputs") or {}).items()
    }
    runs = document["runs"]
    return ActionSpec(
        files=tree_files(root),
        runs=node(
            runs["main"],
            using=runs["using"],
            pre=runs.get("pre", ""),
            post=runs.get("post", ""),
            pre_if=runs.get("pre-if", ""),
            post_if=runs.get("post-if", ""),
        ),
        inputs=inputs,
        outputs={key: None for key in document.get("outputs") or {}},
        name=document.get("name", ""),
    )


def _commit(name: str) -> str:
    return hashlib.sha1(name.encode()).hexdigest()


class ActionWorld:
    """Test actions by name, and the job steps that use them."""

    def __init__(self, forge: Forge, actions: Mapping[str, ActionSpec]) -> None:
        self.forge = forge
        self.actions = dict(actions)
        self.names = sorted(self.actions)
        self.uses: dict[str, tuple[str, dict[str, Any]]] = {}
        self.requests: list[str] = []

    def key(self, name: str) -> str:
        return protocol.action_key(_commit(name), "")

    def _wire_steps(self, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
        result = []
        for item in steps:
            item = dict(item)
            if item["uses"]:
                name = item["uses"]
                item["uses"] = f"tests/{name}@v1"
                item["action"] = self.key(name)
            result.append(item)
        return result

    def action_map(self, attempt_id: int) -> dict[str, Action]:
        result = {}
        for number, name in enumerate(self.names, start=1):
            test = self.actions[name]
            runs = dict(test.runs)
            runs["steps"] = self._wire_steps(runs["steps"])
            wire = {
                "reference": f"tests/{name}@v1",
                "repository": f"tests/{name}",
                "commit": _commit(name),
                "path": "",
                "archive_path": (
                    f"{protocol.API_PREFIX}/attempts/{attempt_id}/test-actions/{number}.tar"
                ),
                "metadata": {
                    "name": test.name,
                    "inputs": test.inputs,
                    "outputs": {key: {"value": value(v)} for key, v in test.outputs.items()},
                    "runs": runs,
                },
            }
            result[self.key(name)] = Action.from_json(wire, name)
        return result

    def rewrite(self, assignment: protocol.Assignment) -> protocol.Assignment:
        steps: list[AssignmentStep] = []
        for item in assignment.steps:
            if item.id in self.uses:
                name, given = self.uses[item.id]
                item = dataclasses.replace(
                    item,
                    uses=f"tests/{name}@v1",
                    action=self.key(name),
                    inputs={key: value(v) for key, v in given.items()},
                    run="",
                )
            steps.append(item)
        return dataclasses.replace(
            assignment, steps=tuple(steps), actions=self.action_map(assignment.attempt_id)
        )

    def serve(self, number: int) -> Response:
        name = self.names[number - 1]
        self.requests.append(name)
        test = self.actions[name]
        body = test.archive if test.archive is not None else tar_of(test.files)
        return Response(body, mimetype="application/x-tar", headers={"Cache-Control": "no-store"})


def install(
    forge: Forge,
    monkeypatch: pytest.MonkeyPatch,
    actions: Mapping[str, ActionSpec],
    uses: Mapping[str, tuple[str, dict[str, Any]]],
) -> ActionWorld:
    """Make plan steps ``uses`` (step id -> (action name, with)) action steps."""
    world = ActionWorld(forge, actions)
    world.uses = dict(uses)
    original = claims.build_assignment

    def build(*args: Any, **kwargs: Any) -> protocol.Assignment:
        return world.rewrite(original(*args, **kwargs))

    # Both claim paths build assignments (the direct one for the common claim).
    monkeypatch.setattr(claims, "build_assignment", build)
    monkeypatch.setattr(direct_claims, "build_assignment", build)

    def archive(attempt_id: str, number: str) -> Response:
        assert request.headers.get("Authorization", "").startswith("Bearer ")
        return world.serve(int(number))

    name = "test_action_archives"
    if name not in forge.app.blueprints:
        blueprint = Blueprint(name, __name__)
        blueprint.add_url_rule(
            f"{protocol.API_PREFIX}/attempts/<attempt_id>/test-actions/<number>.tar",
            "archive",
            lambda attempt_id, number: _SERVED[id(forge.app)](attempt_id, number),
            methods=["POST"],
        )
        forge.app.register_blueprint(blueprint)
        csrf.exempt(forge.app, name)
    _SERVED[id(forge.app)] = archive
    return world


#: The archive view of each test app (one world at a time).
_SERVED: dict[int, Any] = {}
