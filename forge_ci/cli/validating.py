"""``forge-ci workflow validate`` without click: the command people run most, started fast.

Importing click costs about as much as the rest of a one-file validation, so :func:`fast_validate`
runs the command itself when its arguments are plain (files and ``--json``, nothing that starts
with another dash, and no shell-completion request); anything else (``--help``, ``-h``, ``--``,
an unknown option, no file) returns ``None`` and goes through click, which prints its usual help
and usage errors. What runs is the same code as the click command (:mod:`forge_ci.cli.workflow`
calls :func:`validate_files` too) and behaves the same: the same output, byte for byte, the same
exit status, and the same handling of a closed pipe and of Ctrl-C as click's.

Exit status: 0 when every file is valid, 1 when any file is invalid, 2 when a file cannot be read
(one line on stderr names it).
"""

from __future__ import annotations

import errno
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from forge_ci.cli.validating_workers import Outcome

EXIT_INVALID = 1
#: ``forge_ci.cli.common.EXIT_REFUSED``, which imports click (a test holds them equal).
EXIT_REFUSED = 2
#: The variable click reads for shell completion of ``forge-ci``.
COMPLETE_VAR = "_FORGE_CI_COMPLETE"

#: ``echo(text, err)``: one line on stdout (or stderr), as ``click.echo`` writes it.
Echo = Callable[[str, bool], None]


def fast_validate(args: list[str]) -> int | None:
    """Run ``workflow validate ARGS`` without click; ``None`` when click must parse ARGS."""
    if not args or os.environ.get(COMPLETE_VAR):
        return None
    files = [arg for arg in args if arg != "--json"]
    if not files or any(arg.startswith("-") for arg in files):
        return None
    from forge_ci.errors import ForgeCIError

    try:
        return validate_files(len(files) < len(args), files, _echo)
    except ForgeCIError as exc:  # as forge_ci.cli.common.run_cli maps it
        _echo(f"forge-ci: {exc.message}", True)
        return EXIT_REFUSED
    except (EOFError, KeyboardInterrupt):  # as click's main() and run_cli report it
        _echo("", True)
        _echo("forge-ci: aborted", True)
        return EXIT_REFUSED
    except OSError as exc:  # a closed pipe ends the command as click's main() ends it
        if exc.errno != errno.EPIPE:
            raise
        # What the Python docs advise (and click does with a private wrapper): the reader is
        # gone, so the interpreter's last flush at exit must not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(1)


def _echo(text: str, err: bool) -> None:
    """``click.echo(text, err=err)``: the line and a flush, on a plain UTF-8 stream.

    Anything click would treat differently (an ANSI escape it strips when the stream is not a
    terminal, a stream that is not UTF-8 text, which it re-wraps) is handed to click itself.
    """
    stream = sys.stderr if err else sys.stdout
    encoding = getattr(stream, "encoding", None) or ""
    if "\x1b" in text or encoding.lower() not in ("utf-8", "utf8") or not stream.errors:
        import click

        click.echo(text, err=err)
        return
    stream.write(text + "\n")
    stream.flush()


def read(path: str, echo: Echo) -> bytes | None:
    """The file's bytes, or ``None`` after one stderr line saying why it cannot be read."""
    data = _read(path)
    if isinstance(data, str):
        echo(data, True)
        return None
    return data


def _read(path: str) -> bytes | str:
    """The file's bytes, or the stderr line saying why it cannot be read."""
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        reason = exc.strerror or exc.__class__.__name__
        return f"forge-ci: cannot read {path}: {reason}"


def validate_files(as_json: bool, files: list[str] | tuple[str, ...], echo: Echo) -> int:
    """Check FILES, print the results (text, or a JSON array), return the exit status."""
    results: list[dict[str, Any]] = []
    unreadable = False
    for _, message, result in _outcomes(files, echo):
        if message is not None:
            unreadable = True
        if result is not None:
            results.append(result)
    if as_json:
        sys.stdout.write(json.dumps(results, indent=2) + "\n")
    else:
        for result in results:
            if result["valid"]:
                echo(f"{result['path']}: valid (plan {result['plan_digest']})", False)
            for error in result["errors"]:
                echo(
                    f"{result['path']}:{error['line']}:{error['column']}: {error['message']}", False
                )
            for notice in result["notices"]:
                where = f"{result['path']}:{notice['line']}:{notice['column']}"
                echo(f"{where}: notice: {notice['message']}", False)
    if unreadable:
        return EXIT_REFUSED
    if not all(result["valid"] for result in results):
        return EXIT_INVALID
    return 0


def _outcomes(files: list[str] | tuple[str, ...], echo: Echo) -> list[Outcome]:
    """Each file's result or unreadable message, in order; those messages are already echoed.

    Many files are checked in worker processes (:mod:`forge_ci.cli.validating_workers`) and
    give what the serial loop gives; one file, or anything amiss with the workers, takes the
    serial loop, which echoes each message as it reads.
    """

    def check_one(index: int) -> Outcome:
        path = files[index]
        data = _read(path)
        if isinstance(data, str):
            return index, data, None
        return index, None, check(path, data)

    workers = 1
    if len(files) > 1:  # one file (the start-up people wait for) does without the module
        from forge_ci.cli.validating_workers import check_in_workers, worker_count

        workers = worker_count(len(files))
    if workers > 1:
        # What a check imports is imported before the fork, once, not in every worker.
        import forge_ci.workflow.action_metadata
        import forge_ci.workflow.actions
        import forge_ci.workflow.parser  # noqa: F401

        outcomes = check_in_workers(len(files), workers, check_one)
        if outcomes is not None:
            for _, message, _ in outcomes:
                if message is not None:
                    echo(message, True)
            return outcomes
    serial: list[Outcome] = []
    for index in range(len(files)):
        outcome = check_one(index)
        if outcome[1] is not None:
            echo(outcome[1], True)
        serial.append(outcome)
    return serial


def check(path: str, data: bytes) -> dict[str, Any]:
    """One file's result: validity, errors, notices and (when valid) its plan digest."""
    from forge_ci.workflow import WorkflowInvalid, parse_workflow
    from forge_ci.workflow.parser import workflow_plan_digest

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
        "plan_digest": workflow_plan_digest(parsed),
    }


def _local_action_problems(path: str, parsed: Any) -> list[Any]:
    """Offline checks of ``./PATH`` actions when FILE sits in a checkout's .github/workflows.

    Their action.yml is read from the working tree (run creation reads it from the commit) and
    checked, and so are the step's ``with`` keys against its inputs. Other actions are checked
    when a run is created.
    """
    local = [
        (step, step.action)
        for job in parsed.jobs
        for step in job.steps
        if step.action is not None and step.action.startswith(".")
    ]
    if not local:
        return []
    workflow_dir = Path(path).resolve().parent
    if workflow_dir.parts[-2:] != (".github", "workflows"):
        return []
    from forge_ci.workflow import Diagnostic
    from forge_ci.workflow.action_metadata import ActionInvalid, parse_action_metadata
    from forge_ci.workflow.actions import input_problems, parse_reference
    from forge_ci.workflow.nodes import Mapping

    root = workflow_dir.parent.parent
    problems: list[Diagnostic] = []
    for step, action in local:
        uses = step.node.get("uses") or step.node
        folder = root / parse_reference(action).path
        files = [folder / name for name in ("action.yml", "action.yaml")]
        found = next((file for file in files if file.is_file()), None)
        if found is None:
            message = f"uses: {action}: there is no {folder}/action.yml (or action.yaml)"
            problems.append(Diagnostic(uses.line, uses.column, message))
            continue
        try:
            metadata = parse_action_metadata(found.read_bytes(), action, found.name)
        except ActionInvalid as exc:
            problems.append(Diagnostic(uses.line, uses.column, exc.message))
            continue
        with_node = step.node.get("with")
        keys = with_node.items if isinstance(with_node, Mapping) else []
        positions = {key.value: key for key, _ in keys}
        for name, message in input_problems(action, metadata.input_names, positions):
            problems.append(Diagnostic(positions[name].line, positions[name].column, message))
    return problems
