"""What the dispatch form offers: the repository's branches and its workflow files.

Suggestions only: :func:`forge_ci.runs.dispatch.dispatch_run` checks whatever is submitted.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from forge_ci.authz import Actor, Role
from forge_ci.errors import ForgeCIError
from forge_ci.repos import find_repository
from forge_ci.runs.sources import git_repository, list_workflow_files, resolve_branch
from forge_ci.settings import Settings

#: Branches offered at most (by name); any other existing branch can still be typed.
MAX_BRANCHES = 200


@dataclass(frozen=True)
class DispatchChoices:
    branches: tuple[str, ...]
    default_branch: str
    #: Workflow files at the default branch's commit (empty when the branch does not exist).
    workflow_paths: tuple[str, ...]


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
    paths: tuple[str, ...] = ()
    try:
        sha = resolve_branch(git, repository.default_branch)
        paths = list_workflow_files(git, sha).paths
    except ForgeCIError:
        paths = ()
    return DispatchChoices(tuple(branches[:MAX_BRANCHES]), repository.default_branch, paths)
