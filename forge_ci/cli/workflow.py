"""``forge-ci workflow``: validate workflow files and print normalized plans.

Exit status: 0 when every file is valid, 1 when any file is invalid, 2 when a file cannot be
read (one line on stderr names it). Notices (what a valid file asks for that forge-ci accepts and
does not do) are listed under ``notices`` and never change the exit status. Nothing here
touches the database or settings.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from forge_ci.cli.common import EXIT_REFUSED, echo_json

EXIT_INVALID = 1


@click.group()
def workflow() -> None:
    """Validate workflow files and show their normalized plans."""


def _read(path: str) -> bytes | None:
    """The file's bytes, or ``None`` after one stderr line saying why it cannot be read."""
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        reason = exc.strerror or exc.__class__.__name__
        click.echo(f"forge-ci: cannot read {path}: {reason}", err=True)
        return None


def _check(path: str, data: bytes) -> dict[str, Any]:
    from forge_ci.workflow import WorkflowInvalid, build_plan, parse_workflow, plan_digest

    try:
        parsed = parse_workflow(data, path)
    except WorkflowInvalid as exc:
        errors = [diagnostic.as_dict() for diagnostic in exc.diagnostics]
        return {
            "path": path,
            "valid": False,
            "errors": errors,
            "notices": [],
            "plan_digest": None,
        }
    local = [d.as_dict() for d in _local_action_problems(path, parsed)]
    if local:
        return {"path": path, "valid": False, "errors": local, "notices": [], "plan_digest": None}
    return {
        "path": path,
        "valid": True,
        "errors": [],
        "notices": [notice.as_dict() for notice in parsed.notices],
        "plan_digest": plan_digest(build_plan(parsed)),
    }


def _local_action_problems(path: str, parsed: Any) -> list[Any]:
    """Offline checks of ``./PATH`` actions when FILE sits in a checkout's .github/workflows.

    Their action.yml is read from the working tree (run creation reads it from the commit) and
    checked, and so are the step's ``with`` keys against its inputs. Other actions are checked
    when a run is created.
    """
    from forge_ci.workflow import Diagnostic
    from forge_ci.workflow.action_metadata import ActionInvalid, parse_action_metadata
    from forge_ci.workflow.actions import input_problems, parse_reference
    from forge_ci.workflow.nodes import Mapping

    workflow_dir = Path(path).resolve().parent
    if workflow_dir.parts[-2:] != (".github", "workflows"):
        return []
    root = workflow_dir.parent.parent
    problems: list[Diagnostic] = []
    for job in parsed.jobs:
        for step in job.steps:
            if step.action is None or not step.action.startswith("."):
                continue
            uses = step.node.get("uses") or step.node
            folder = root / parse_reference(step.action).path
            files = [folder / name for name in ("action.yml", "action.yaml")]
            found = next((file for file in files if file.is_file()), None)
            if found is None:
                message = f"uses: {step.action}: there is no {folder}/action.yml (or action.yaml)"
                problems.append(Diagnostic(uses.line, uses.column, message))
                continue
            try:
                metadata = parse_action_metadata(found.read_bytes(), step.action, found.name)
            except ActionInvalid as exc:
                problems.append(Diagnostic(uses.line, uses.column, exc.message))
                continue
            with_node = step.node.get("with")
            keys = with_node.items if isinstance(with_node, Mapping) else []
            positions = {key.value: key for key, _ in keys}
            for name, message in input_problems(step.action, metadata.input_names, positions):
                problems.append(Diagnostic(positions[name].line, positions[name].column, message))
    return problems


@workflow.command()
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array, one entry per file.")
@click.argument("files", nargs=-1, required=True)
def validate(as_json: bool, files: tuple[str, ...]) -> None:
    """Check workflow FILES against the supported subset."""
    results: list[dict[str, Any]] = []
    unreadable = False
    for path in files:
        data = _read(path)
        if data is None:
            unreadable = True
            continue
        results.append(_check(path, data))
    if as_json:
        sys.stdout.write(json.dumps(results, indent=2) + "\n")
    else:
        for result in results:
            if result["valid"]:
                click.echo(f"{result['path']}: valid (plan {result['plan_digest']})")
            for error in result["errors"]:
                click.echo(
                    f"{result['path']}:{error['line']}:{error['column']}: {error['message']}"
                )
            for notice in result["notices"]:
                where = f"{result['path']}:{notice['line']}:{notice['column']}"
                click.echo(f"{where}: notice: {notice['message']}")
    if unreadable:
        raise click.exceptions.Exit(EXIT_REFUSED)
    if not all(result["valid"] for result in results):
        raise click.exceptions.Exit(EXIT_INVALID)


@workflow.command()
@click.argument("file")
def plan(file: str) -> None:
    """Print the normalized plan of FILE as JSON."""
    from forge_ci.workflow import WorkflowInvalid, build_plan, parse_workflow

    data = _read(file)
    if data is None:
        raise click.exceptions.Exit(EXIT_REFUSED)
    try:
        parsed = parse_workflow(data, file)
    except WorkflowInvalid as exc:
        for diagnostic in exc.diagnostics:
            click.echo(
                f"{file}:{diagnostic.line}:{diagnostic.column}: {diagnostic.message}", err=True
            )
        raise click.exceptions.Exit(EXIT_INVALID) from None
    echo_json(build_plan(parsed))
