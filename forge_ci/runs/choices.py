"""What the dispatch form offers: the repository's branches, the workflow files it can run and
the inputs each declares.

Only files that would be accepted are offered (valid, and declaring ``workflow_dispatch`` at
the default branch's commit), so the form never pre-fills one that is refused. Suggestions
only: :func:`forge_ci.runs.dispatch.dispatch_run` checks whatever is submitted. Whether a file
can be dispatched depends only on its bytes, so the answer is kept by blob id: the page does
not parse every workflow file on every view.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pygit2
from sqlalchemy.orm import Session

from forge_ci.authz import Actor, Role
from forge_ci.errors import ForgeCIError
from forge_ci.repos import find_repository
from forge_ci.runs.blob_answers import BlobAnswers
from forge_ci.runs.sources import git_repository, list_workflow_files, resolve_branch
from forge_ci.settings import Settings

if TYPE_CHECKING:
    from forge_ci.workflow.dispatch_inputs import DispatchInput

#: Branches offered at most (by name); any other existing branch can still be typed.
MAX_BRANCHES = 200


@dataclass(frozen=True)
class DispatchChoices:
    branches: tuple[str, ...]
    default_branch: str
    #: Workflow files at the default branch's commit that can be dispatched (empty when the
    #: branch does not exist).
    workflow_paths: tuple[str, ...]
    #: The inputs each of those files declares (the form shows them).
    inputs: dict[str, tuple[DispatchInput, ...]] = field(default_factory=dict)


def _declared_inputs(data: bytes, path: str) -> tuple[DispatchInput, ...] | None:
    """The inputs of a valid file that declares workflow_dispatch; None for any other file."""
    from forge_ci.workflow import parse_workflow

    try:
        triggers = parse_workflow(data, path).triggers
    except ForgeCIError:
        return None
    return triggers.dispatch_inputs if triggers.workflow_dispatch else None


_DISPATCHABLE: BlobAnswers[tuple[DispatchInput, ...] | None] = BlobAnswers(_declared_inputs)


def _dispatchable(git: pygit2.Repository, sha: str, path: str) -> tuple[DispatchInput, ...] | None:
    """The inputs of ``path`` at ``sha`` if it can be dispatched, else None."""
    found = _DISPATCHABLE.answer(git, sha, path)
    return found[0] if found is not None else None


def dispatch_choices(
    session: Session, settings: Settings, actor: Actor, full_name: str
) -> DispatchChoices:
    """Branches and workflow files of ``full_name`` (readers may look)."""
    repository = find_repository(session, actor, full_name, Role.READ)
    git = git_repository(settings, repository)
    prefix = "refs/heads/"
    branches = sorted(
        name.removeprefix(prefix) for name in git.references if name.startswith(prefix)
    )
    inputs: dict[str, tuple[DispatchInput, ...]] = {}
    try:
        sha = resolve_branch(git, repository.default_branch)
        for path in list_workflow_files(git, sha).paths:
            declared = _dispatchable(git, sha, path)
            if declared is not None:
                inputs[path] = declared
    except ForgeCIError:
        inputs = {}
    return DispatchChoices(
        tuple(branches[:MAX_BRANCHES]), repository.default_branch, tuple(inputs), inputs
    )
