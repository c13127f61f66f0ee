"""Source pins: a hidden ref per run that keeps its commit alive.

Every run owns ``refs/forge-ci/pipelines/<random token>`` pointing at its commit, created under
the repository lock *before* the run's database transaction commits and deleted again when that
transaction fails. A force-push plus ``git gc --prune=now`` therefore cannot take a run's source
away, and a rerun pins the same commit again. ``transfer.hideRefs`` hides the namespace from
clients; pins have no automatic retention policy.

A crash between the pin and the commit may leave an orphan pin (harmless: it only retains
objects); it can never leave a committed run that depends on a movable branch.
"""

from __future__ import annotations

import secrets

import pygit2

from forge_ci.errors import NotFound
from forge_ci.gitstore import INTERNAL_REF_PREFIX

PIN_PREFIX = INTERNAL_REF_PREFIX + "pipelines/"


def create_pin(git: pygit2.Repository, sha: str) -> str:
    """Pin ``sha`` under a new random ref and return the ref's name."""
    try:
        commit = git[sha]
    except (KeyError, ValueError):
        raise NotFound(f"commit {sha} is no longer in the repository") from None
    if not isinstance(commit, pygit2.Commit):
        raise NotFound(f"{sha} is not a commit")
    name = PIN_PREFIX + secrets.token_hex(16)
    git.references.create(name, commit.id)
    return name


def delete_pin(git: pygit2.Repository, name: str) -> None:
    """Remove a pin (used when the transaction that needed it failed); absent pins are fine."""
    if not name.startswith(PIN_PREFIX):
        raise ValueError(f"{name} is not a run pin")
    try:
        git.references.delete(name)
    except KeyError:
        pass


def pinned_commit(git: pygit2.Repository, name: str) -> str | None:
    """The commit a pin points at, or None when the pin does not exist."""
    try:
        return str(git.references[name].target)
    except KeyError:
        return None
