"""``action.yml``: an action's metadata, read into the normalized object the runner executes.

Pure code. The file comes from a third-party repository, so it goes through the same bounded
loader as workflow files (64 KiB, one document, no anchors or tags) and is checked as a whole;
every problem is reported at its line and column, and the action is refused as a whole, so
nothing of a malformed action ever runs. The result is the ``metadata`` object of the runner
wire format (docs/runner-protocol.md, "Actions")::

    {"name": ..., "inputs": {NAME: {"required", "default", "deprecation_message"}},
     "outputs": {NAME: {"value"}},
     "runs": {"using", "main", "pre", "post", "pre_if", "post_if", "steps": [...]}}

Values that hold ``${{ }}`` become runtime templates ``{"template": [text | {"expr": ...}]}``:
an action's expressions read contexts (``inputs``, ``env``, ``runner``...) only the runner has.
Docker actions are refused; composite steps are step objects like the workflow's, with ``uses``
as written, ``action`` (filled in when the run resolves it) and ``with``.
"""

from __future__ import annotations

from typing import Any

from forge_ci.errors import InvalidInput
from forge_ci.records import field, record
from forge_ci.workflow.actions import ReferenceInvalid, parse_reference
from forge_ci.workflow.diagnostics import Diagnostic, Problems
from forge_ci.workflow.env import env_name_problem
from forge_ci.workflow.expressions import (
    STATUS_FUNCTIONS,
    ExpressionError,
    called_functions,
    parse_condition,
    parse_expression,
    split_template,
)
from forge_ci.workflow.loader import decode, load
from forge_ci.workflow.nodes import Mapping, Node, Scalar, Sequence, describe, is_null, scalar_type

#: The largest action.yml read (the workflow loader's bound); larger files are refused unread.
MAX_ACTION_BYTES = 64 * 1024
MAX_COMPOSITE_STEPS = 64
NODE_RUNTIMES = ("node12", "node16", "node20", "node24")
TOP_KEYS = ("name", "description", "author", "inputs", "outputs", "runs", "branding")
INPUT_KEYS = ("description", "required", "default", "deprecationMessage")
OUTPUT_KEYS = ("description", "value")
NODE_KEYS = ("using", "main", "pre", "post", "pre-if", "post-if")
COMPOSITE_STEP_KEYS = (
    "id",
    "name",
    "run",
    "uses",
    "with",
    "shell",
    "working-directory",
    "env",
    "if",
    "continue-on-error",
)


class ActionInvalid(InvalidInput):
    """An action's metadata cannot be run; ``diagnostics`` are located in its action.yml."""

    code = "action_invalid"

    def __init__(self, action: str, file: str, diagnostics: list[Diagnostic]) -> None:
        self.action = action
        self.file = file
        self.diagnostics = sorted(diagnostics)
        shown = "; ".join(f"{d.line}:{d.column}: {d.message}" for d in self.diagnostics[:5])
        more = len(self.diagnostics) - 5
        extra = f" (and {more} more)" if more > 0 else ""
        super().__init__(f"action {action}: {file} cannot be used: {shown}{extra}")


@record
class ActionMetadata:
    """A checked action.yml: the wire ``metadata`` and the references its composite steps use."""

    metadata: dict[str, Any]
    nested: list[str] = field(default_factory=list)

    @property
    def input_names(self) -> list[str]:
        return list(self.metadata["inputs"])

    @property
    def using(self) -> str:
        return str(self.metadata["runs"]["using"])


def parse_action_metadata(data: bytes, action: str, file: str = "action.yml") -> ActionMetadata:
    """Read ``data`` (the action.yml of ``action``) or raise ActionInvalid naming every problem."""
    problems = Problems()
    if len(data) > MAX_ACTION_BYTES:
        problems.add(1, 1, f"the file is {len(data)} bytes; the limit is {MAX_ACTION_BYTES}")
        raise ActionInvalid(action, file, problems.sorted())
    if not data.strip():
        problems.add(1, 1, "action metadata must be a mapping, not empty")
        raise ActionInvalid(action, file, problems.sorted())
    source = decode(data, problems)
    root = load(source, problems) if source is not None else None
    if problems or not isinstance(root, Mapping):
        if not problems:
            what = "empty" if root is None else describe(root)
            problems.add(1, 1, f"action metadata must be a mapping, not {what}")
        raise ActionInvalid(action, file, problems.sorted())
    reader = _Reader(problems)
    metadata = reader.read(root, action)
    if problems:
        raise ActionInvalid(action, file, problems.sorted())
    return ActionMetadata(metadata, reader.nested)


class _Reader:
    def __init__(self, problems: Problems) -> None:
        self.problems = problems
        self.nested: list[str] = []

    def _keys(self, node: Mapping, allowed: tuple[str, ...], where: str) -> None:
        for key, _ in node.items:
            if key.value not in allowed:
                hint = self.problems.hint(key.value, allowed)
                self.problems.at(key, f"'{key.value}' is not a key of {where}{hint}")

    def _mapping(self, node: Node | None, where: str) -> Mapping | None:
        if node is None or is_null(node):
            return None
        if not isinstance(node, Mapping):
            self.problems.at(node, f"{where} must be a mapping, not {describe(node)}")
            return None
        return node

    def _text(self, node: Node | None, where: str) -> str | None:
        if node is None:
            return None
        if isinstance(node, Scalar) and not is_null(node):
            return node.value
        self.problems.at(node, f"{where} must be text, not {describe(node)}")
        return None

    def value(self, node: Node, where: str) -> str | dict[str, Any] | None:
        """Text, or a runtime template when the text holds ``${{ }}``."""
        text = self._text(node, where)
        if text is None or "${{" not in text:
            return text
        try:
            pieces = split_template(text)
        except ExpressionError as exc:
            self.problems.at(node, f"invalid expression in {where}: {exc.message}")
            return None
        parts: list[str | dict[str, str]] = []
        for piece in pieces:
            parts.append(piece if isinstance(piece, str) else {"expr": piece.source.strip()})
        return {"template": parts}

    def read(self, root: Mapping, action: str) -> dict[str, Any]:
        self._keys(root, TOP_KEYS, "action metadata")
        name = self._text(root.get("name"), "name") or action
        inputs = self._inputs(root.get("inputs"))
        runs_node = root.get("runs")
        if runs_node is None:
            self.problems.at(root, "action metadata needs 'runs'")
            runs: dict[str, Any] = {}
        else:
            runs = self._runs(runs_node)
        outputs = self._outputs(root.get("outputs"), runs.get("using") == "composite")
        return {"name": name, "inputs": inputs, "outputs": outputs, "runs": runs}

    def _inputs(self, node: Node | None) -> dict[str, Any]:
        mapping = self._mapping(node, "inputs")
        result: dict[str, Any] = {}
        seen: set[str] = set()
        for key, spec in mapping.items if mapping is not None else []:
            name = key.value
            if name.lower() in seen:
                self.problems.at(key, f"the input '{name}' is defined twice (case does not count)")
                continue
            seen.add(name.lower())
            entry: dict[str, Any] = {"required": False, "default": None, "deprecation_message": ""}
            body = self._mapping(spec, f"inputs.{name}")
            if body is not None:
                self._keys(body, INPUT_KEYS, f"inputs.{name}")
                required = body.get("required")
                if required is not None:
                    entry["required"] = self._flag(required, f"inputs.{name}.required")
                if "default" in body and not is_null(body["default"]):
                    entry["default"] = self.value(body["default"], f"inputs.{name}.default")
                message = self._text(body.get("deprecationMessage"), "deprecationMessage")
                entry["deprecation_message"] = message or ""
            result[name] = entry
        return result

    def _flag(self, node: Node, where: str) -> bool:
        # GitHub reads required as a boolean or as the text "true"/"false".
        if isinstance(node, Scalar) and node.value.strip().lower() in ("true", "false"):
            return node.value.strip().lower() == "true"
        self.problems.at(node, f"{where} must be true or false, not {describe(node)}")
        return False

    def _outputs(self, node: Node | None, composite: bool) -> dict[str, Any]:
        mapping = self._mapping(node, "outputs")
        result: dict[str, Any] = {}
        for key, spec in mapping.items if mapping is not None else []:
            body = self._mapping(spec, f"outputs.{key.value}")
            value = None
            if body is not None:
                self._keys(body, OUTPUT_KEYS, f"outputs.{key.value}")
                if composite and "value" in body:
                    value = self.value(body["value"], f"outputs.{key.value}.value")
                elif composite:
                    self.problems.at(body, f"outputs.{key.value} of a composite action needs value")
            result[key.value] = {"value": value}
        return result

    def _runs(self, node: Node) -> dict[str, Any]:
        runs = self._mapping(node, "runs")
        if runs is None:
            if isinstance(node, Scalar):
                self.problems.at(node, "runs must be a mapping with 'using'")
            return {}
        using_node = runs.get("using")
        using = (self._text(using_node, "runs.using") or "") if using_node is not None else ""
        if using_node is None:
            self.problems.at(runs, "runs needs 'using' (node20, node24 or composite)")
            return {}
        lowered = using.lower()
        assert using_node is not None
        if lowered == "docker":
            self.problems.at(
                using_node,
                "runs.using: docker is not supported: Docker container actions need Docker, "
                "which jobs do not have; use a node or composite action",
            )
            return {}
        result: dict[str, Any] = {
            "using": lowered,
            "main": "",
            "pre": "",
            "post": "",
            "pre_if": "",
            "post_if": "",
            "steps": [],
        }
        if lowered in NODE_RUNTIMES:
            self._keys(runs, NODE_KEYS, f"runs (using {using})")
            for key in ("main", "pre", "post"):
                text = self._text(runs.get(key), f"runs.{key}")
                if text is not None:
                    self._entry_point(runs[key], text, f"runs.{key}")
                    result[key] = text
            if not result["main"] and "main" not in runs:
                self.problems.at(runs, f"runs.main is required for a {using} action")
            for key in ("pre-if", "post-if"):
                text = self._text(runs.get(key), f"runs.{key}")
                if text is not None:
                    result[key.replace("-", "_")] = self._condition(runs[key], text, f"runs.{key}")
        elif lowered == "composite":
            self._keys(runs, ("using", "steps"), "runs (using composite)")
            result["steps"] = self._steps(runs.get("steps"), runs)
        else:
            self.problems.at(
                using_node,
                f"runs.using '{using}' is not supported; forge-ci runs "
                f"{', '.join(NODE_RUNTIMES)} and composite actions",
            )
        return result

    def _entry_point(self, node: Node, path: str, where: str) -> None:
        parts = path.replace("\\", "/").split("/")
        if not path or path.startswith("/") or any(part in ("..", "") for part in parts):
            self.problems.at(
                node, f"{where} must be a relative path inside the action, not {path!r}"
            )

    def _condition(self, node: Node, text: str, where: str) -> str:
        try:
            parse_condition(text)
        except ExpressionError as exc:
            self.problems.at(node, f"invalid expression in {where}: {exc.message}")
            return ""
        stripped = text.strip()
        if stripped.startswith("${{") and stripped.endswith("}}"):
            stripped = stripped[3:-2].strip()
        return stripped

    def _steps(self, node: Node | None, parent: Mapping) -> list[dict[str, Any]]:
        if not isinstance(node, Sequence) or not node.items:
            where = node if node is not None else parent
            self.problems.at(where, "runs.steps of a composite action must list its steps")
            return []
        if len(node.items) > MAX_COMPOSITE_STEPS:
            self.problems.at(
                node.items[MAX_COMPOSITE_STEPS],
                f"a composite action has at most {MAX_COMPOSITE_STEPS} steps",
            )
        steps = []
        ids: set[str] = set()
        for index, item in enumerate(node.items[:MAX_COMPOSITE_STEPS], start=1):
            step = self._step(item, index, ids)
            if step is not None:
                steps.append(step)
        return steps

    def _step(self, node: Node, index: int, ids: set[str]) -> dict[str, Any] | None:
        where = f"runs.steps[{index}]"
        if not isinstance(node, Mapping):
            self.problems.at(node, f"{where} must be a mapping, not {describe(node)}")
            return None
        self._keys(node, COMPOSITE_STEP_KEYS, f"a composite step ({where})")
        step_id = self._text(node.get("id"), f"{where}.id") or f"step_{index}"
        if step_id.lower() in ids:
            self.problems.at(node.get("id") or node, f"the step id '{step_id}' is used twice")
        ids.add(step_id.lower())
        run_node, uses_node = node.get("run"), node.get("uses")
        step: dict[str, Any] = {
            "id": step_id,
            "name": "",
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
        if (run_node is None) == (uses_node is None):
            self.problems.at(node, f"{where} needs either run or uses")
            return None
        if "name" in node:
            step["name"] = self.value(node["name"], f"{where}.name") or ""
        if run_node is not None:
            step["run"] = self.value(run_node, f"{where}.run") or ""
            shell = self._text(node.get("shell"), f"{where}.shell")
            if shell is None:
                self.problems.at(node, f"{where}: a run step of a composite action needs shell")
            step["shell"] = shell or ""
            if "working-directory" in node:
                step["working_directory"] = self._text(node["working-directory"], where) or ""
            if "with" in node:
                self.problems.at(node.key_node("with") or node, f"{where}: a run step has no with")
        elif uses_node is not None:
            self._uses(uses_node, step, where)
            for written in ("shell", "working-directory"):
                if written in node:
                    self.problems.at(
                        node.key_node(written) or node, f"{where}: a uses step has no {written}"
                    )
            body = self._mapping(node.get("with"), f"{where}.with")
            for name, item in body.items if body is not None else []:
                step["with"][name.value] = self.value(item, f"{where}.with.{name.value}") or ""
        env = self._mapping(node.get("env"), f"{where}.env")
        for name, item in env.items if env is not None else []:
            problem = env_name_problem(name.value)
            if problem:
                self.problems.at(name, problem)
            step["env"][name.value] = self.value(item, f"{where}.env.{name.value}") or ""
        if "if" in node:
            text = self._text(node["if"], f"{where}.if")
            if text is not None:
                step["if"] = self._step_condition(node["if"], text, f"{where}.if")
        if "continue-on-error" in node:
            step["continue_on_error"] = self._continue(node["continue-on-error"], where)
        return step

    def _uses(self, node: Node, step: dict[str, Any], where: str) -> None:
        text = self._text(node, f"{where}.uses")
        if text is None:
            return
        try:
            reference = parse_reference(text)
        except ReferenceInvalid as exc:
            self.problems.at(node, str(exc))
            return
        if reference.repository.lower() == "actions/checkout":
            self.problems.at(
                node,
                "actions/checkout inside a composite action is not supported; check out "
                "in the workflow's own steps",
            )
            return
        step["uses"] = text
        if text not in self.nested:
            self.nested.append(text)

    def _step_condition(self, node: Node, text: str, where: str) -> str:
        stripped = self._condition(node, text, where)
        if not stripped:
            return "success()"
        try:
            functions = {name.lower() for name in called_functions(parse_expression(stripped))}
        except ExpressionError:
            return "success()"
        # GitHub's implicit success() && when no status function is called, as in workflows.
        if functions & set(STATUS_FUNCTIONS):
            return stripped
        return f"success() && ({stripped})"

    def _continue(self, node: Node, where: str) -> bool | dict[str, str]:
        if isinstance(node, Scalar) and scalar_type(node) == "bool":
            return node.value.lower() == "true"
        text = self._text(node, f"{where}.continue-on-error") or ""
        stripped = text.strip()
        if stripped.startswith("${{") and stripped.endswith("}}"):
            return {"expr": stripped[3:-2].strip()}
        self.problems.at(node, f"{where}.continue-on-error must be true, false or one ${{{{ }}}}")
        return False
