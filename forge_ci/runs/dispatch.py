"""Manual runs: ``workflow_dispatch`` of one workflow file on one branch, with its inputs.

Only an existing local branch is accepted (no tags, revision expressions or hidden refs). The
branch is resolved once; the workflow is read and parsed from that exact commit, and the run
pins that commit, so a push that lands meanwhile changes nothing about this run. The inputs
given are checked against the declaration in that same file (unknown names, required inputs,
types, options) and stored, with defaults filled in, in the run's snapshot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy.orm import Session

from forge_ci.authz import Actor, Role
from forge_ci.errors import InvalidInput
from forge_ci.models import Run
from forge_ci.repos import find_repository
from forge_ci.runs.create import creating_runs, require_run_creator, with_actions
from forge_ci.runs.definition import RunDefinition, define_run
from forge_ci.runs.event_payload import EventFacts, RepositoryFacts, build_event_payload
from forge_ci.runs.sources import (
    MAX_WORKFLOW_BYTES,
    git_repository,
    read_workflow_file,
    resolve_branch,
    workflow_path_problem,
)
from forge_ci.settings import Settings

DISPATCH = "workflow_dispatch"


def input_values(pairs: Sequence[str]) -> dict[str, str]:
    """``--input NAME=VALUE`` options (CLI and SSH) as a mapping; a pair without ``=`` or a
    repeated name is refused before anything is read."""
    values: dict[str, str] = {}
    for pair in pairs:
        name, equals, value = pair.partition("=")
        if not equals or not name:
            raise InvalidInput(f"--input: give NAME=VALUE, not {pair!r}")
        if name in values:
            raise InvalidInput(f"--input: the input {name!r} is given twice")
        values[name] = value
    return values


def dispatch_run(
    session: Session,
    settings: Settings,
    actor: Actor,
    full_name: str,
    branch: str,
    workflow_path: str,
    inputs: Mapping[str, str] | None = None,
) -> Run:
    """Create (and commit) a ``workflow_dispatch`` run of ``workflow_path`` at ``branch``.

    Repository owners/admins and site administrators only. Raises InvalidInput for a bad branch
    name or path, a workflow that is invalid or does not declare ``workflow_dispatch``, and
    ``InputInvalid`` (naming the input) for ``inputs`` that do not fit its declaration;
    NotFound for a missing repository, branch or file.
    """
    from forge_ci.workflow import parse_workflow
    from forge_ci.workflow.dispatch_inputs import event_inputs, resolve_inputs

    repository = find_repository(session, actor, full_name, Role.READ)
    require_run_creator(session, actor, repository)
    problem = workflow_path_problem(workflow_path)
    if problem:
        raise InvalidInput(problem)
    git = git_repository(settings, repository)
    sha = resolve_branch(git, branch)
    blob = read_workflow_file(git, sha, workflow_path)
    if blob.data is None:
        raise InvalidInput(
            f"{workflow_path} is {blob.size} bytes at {sha[:12]}; the limit is "
            f"{MAX_WORKFLOW_BYTES} (64 KiB)"
        )
    workflow = parse_workflow(blob.data, workflow_path)
    if not workflow.triggers.workflow_dispatch:
        raise InvalidInput(
            f"{workflow_path} does not declare workflow_dispatch, so it cannot be run by hand; "
            "add workflow_dispatch to its 'on'"
        )
    values = resolve_inputs(workflow.triggers.dispatch_inputs, inputs or {})
    ref = f"refs/heads/{branch}"
    definition: RunDefinition = define_run(
        workflow,
        blob.data,
        repository=repository.full_name,
        sha=sha,
        ref=ref,
        event_name=DISPATCH,
        event=build_event_payload(
            DISPATCH,
            EventFacts(
                RepositoryFacts.of(repository),
                ref,
                sha,
                actor.name,
                inputs=event_inputs(values),
                workflow_path=workflow_path,
            ),
        ),
        actor=actor.name,
        inputs=values,
    )
    definition = with_actions(session, settings, actor, git, definition, workflow)
    with creating_runs(session, settings, repository) as creation:
        return creation.create(actor, definition)
