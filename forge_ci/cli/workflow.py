"""``forge-ci workflow``: validate workflow files and print normalized plans.

Exit status: 0 when every file is valid, 1 when any file is invalid, 2 when a file cannot be
read (one line on stderr names it). Notices (what a valid file asks for that forge-ci accepts and
does not do) are listed under ``notices`` and never change the exit status. Nothing here
touches the database or settings. ``validate`` itself is :mod:`forge_ci.cli.validating`, which
``forge-ci workflow validate FILES`` also runs without importing click.
"""

from __future__ import annotations

import click

from forge_ci.cli.common import EXIT_REFUSED, echo_json
from forge_ci.cli.validating import EXIT_INVALID, read, validate_files


@click.group()
def workflow() -> None:
    """Validate workflow files and show their normalized plans."""


def _echo(text: str, err: bool) -> None:
    click.echo(text, err=err)


@workflow.command()
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array, one entry per file.")
@click.argument("files", nargs=-1, required=True)
def validate(as_json: bool, files: tuple[str, ...]) -> None:
    """Check workflow FILES against the supported subset."""
    status = validate_files(as_json, files, _echo)
    if status:
        raise click.exceptions.Exit(status)


@workflow.command()
@click.argument("file")
def plan(file: str) -> None:
    """Print the normalized plan of FILE as JSON."""
    from forge_ci.workflow import WorkflowInvalid, build_plan, parse_workflow

    data = read(file, _echo)
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
