"""Mirroring: create or refresh a forge repository from a git URL (``forge-ci repo mirror``).

Operators keep the actions they allow as forge repositories (``actions/setup-python``), which
run creation looks in first (``forge_ci.runs.actions``). A mirror fetches every branch and tag
of the URL; a refresh moves branches and tags to where the URL has them and adds new ones, but
deletes nothing unless ``prune`` is given. Runs are unaffected either way: each pinned the
commits it uses under ``refs/forge-ci/actions/``, which no refresh touches (nor ``git gc``).

The fetch runs under the repository's write lock, without the deployment hooks (a mirror
refresh is not a push: it records no push event and starts no workflow), without user or system
git configuration and within a time limit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from forge_ci.accounts import create_user
from forge_ci.authz import Actor
from forge_ci.errors import InvalidInput, PermissionDenied
from forge_ci.gitstore import open_repository, repository_path
from forge_ci.locks import repository_lock
from forge_ci.models import Repository, User
from forge_ci.names import split_full_name
from forge_ci.repos import create_repository
from forge_ci.runs.action_cache import git_fetch, git_reachable
from forge_ci.settings import ACTION_SOURCE_SCHEMES, Settings

MIRROR_SECONDS = 600.0
_KINDS = ("refs/heads/", "refs/tags/")


@dataclass
class MirrorResult:
    """What a mirror run changed, by full ref name."""

    full_name: str
    created_repository: bool
    created_owner: bool
    added: list[str] = field(default_factory=list)
    moved: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)


def _refs(settings: Settings, owner: str, name: str) -> dict[str, str]:
    git = open_repository(repository_path(settings.repositories_dir, owner, name))
    return {
        ref: str(git.references[ref].target) for ref in git.references if ref.startswith(_KINDS)
    }


def mirror_repository(
    session: Session,
    settings: Settings,
    actor: Actor,
    full_name: str,
    url: str,
    *,
    prune: bool = False,
) -> MirrorResult:
    """Create ``full_name`` from ``url`` or refresh it (operators and site administrators)."""
    if not actor.is_site_admin:
        raise PermissionDenied("only operators and site administrators mirror repositories")
    if not url.startswith(ACTION_SOURCE_SCHEMES) and not url.startswith("/"):
        raise InvalidInput(
            f"--from {url!r} is not a git URL (use {', '.join(ACTION_SOURCE_SCHEMES)} or an "
            "absolute path)"
        )
    owner_name, name = split_full_name(full_name)
    # Checked before anything is created: a mistyped URL leaves no empty repository behind.
    problem = git_reachable(url, MIRROR_SECONDS)
    if problem is not None:
        raise InvalidInput(f"cannot mirror {full_name} from {url}: {problem}")
    created_owner = False
    owner = session.scalar(select(User).where(User.name == owner_name))
    if owner is None:
        create_user(session, actor, owner_name, None)
        created_owner = True
        session.flush()
    repository = session.scalar(
        select(Repository)
        .join(User, Repository.owner_id == User.id)
        .where(User.name == owner_name, Repository.name == name)
    )
    created = repository is None
    if repository is None:
        repository = create_repository(session, settings, actor, full_name)
    repository.mirror_url = url
    session.commit()
    result = MirrorResult(full_name, created, created_owner)
    path = repository_path(settings.repositories_dir, owner_name, name)
    with repository_lock(settings.locks_dir, repository.id, full_name, settings.repo_lock_timeout):
        before = _refs(settings, owner_name, name)
        refspecs = ["+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"]
        problem = _fetch(path, url, refspecs, prune)
        if problem is not None:
            raise InvalidInput(f"cannot mirror {full_name} from {url}: {problem}")
        after = _refs(settings, owner_name, name)
    for ref, sha in sorted(after.items()):
        if ref not in before:
            result.added.append(ref)
        elif before[ref] != sha:
            result.moved.append(ref)
    for ref in sorted(before):
        if ref not in after:
            result.deleted.append(ref)
    return result


def _fetch(git_dir: Path, url: str, refspecs: list[str], prune: bool) -> str | None:
    # Without the deployment hooks (core.hooksPath): a mirror refresh is not a push.
    return git_fetch(
        git_dir,
        url,
        refspecs,
        MIRROR_SECONDS,
        extra_config=["core.hooksPath=/dev/null"],
        options=["--prune"] if prune else [],
    )
