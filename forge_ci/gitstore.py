"""Bare repositories on disk, through pygit2 (and the git CLI where git itself must run).

Layout under the data directory::

    repositories/
      <owner>/
        <name>.git/          bare repository; core.hooksPath -> <data dir>/hooks
    hooks/                   the deployment's hook programs (never from a repository)

``core.hooksPath`` is set when a repository is created and re-asserted before every push, so a
repository can never bring hooks of its own.
"""

from __future__ import annotations

import os
from pathlib import Path

import pygit2

from forge_ci.errors import NotFound

# refs/forge-ci/: forge-ci's own namespace; never advertised to clients, never writable by pushes.
from forge_ci.refs import INTERNAL_REF_PREFIX as INTERNAL_REF_PREFIX


def repository_path(repositories_dir: Path, owner: str, name: str) -> Path:
    return repositories_dir / owner / f"{name}.git"


def init_bare(path: Path, hooks_dir: Path, default_branch: str) -> None:
    """Create a bare repository configured for forge-ci."""
    path.parent.mkdir(parents=True, exist_ok=True)
    repo = pygit2.init_repository(str(path), bare=True, initial_head=default_branch)
    configure(repo, hooks_dir)


def configure(repo: pygit2.Repository, hooks_dir: Path) -> None:
    """(Re-)assert the settings every managed repository must have."""
    config = repo.config
    if _get(config, "core.hooksPath") != str(hooks_dir):
        config["core.hooksPath"] = str(hooks_dir)
    wanted = {
        # Internal pins are hidden from every client (upload-pack and receive-pack).
        "transfer.hideRefs": INTERNAL_REF_PREFIX.rstrip("/"),
        "receive.denyDeleteCurrent": "false",
        "receive.fsckObjects": "true",
        "core.logAllRefUpdates": "false",
        "gc.auto": "0",
    }
    for key, value in wanted.items():
        if _get(config, key) != value:
            config[key] = value


def _get(config: pygit2.Config, key: str) -> str | None:
    try:
        return str(config[key])
    except KeyError:
        return None


def open_repository(path: Path) -> pygit2.Repository:
    try:
        return pygit2.Repository(str(path))
    except pygit2.GitError:
        raise NotFound(f"repository storage missing at {path.name}") from None


def ensure_configured(path: Path, hooks_dir: Path) -> None:
    """Re-assert configuration (called before each push, under the repository lock)."""
    configure(open_repository(path), hooks_dir)


def read_ref(repo: pygit2.Repository, name: str) -> str | None:
    """The object id ``name`` points at (as hex), or None when the ref does not exist."""
    ref = repo.references.get(name)
    if ref is None:
        return None
    return str(ref.resolve().target)


def has_object(repo: pygit2.Repository, oid: str) -> bool:
    return oid in repo


def set_ref(repo: pygit2.Repository, name: str, oid: str | None) -> None:
    """Point the branch or tag ``name`` at ``oid``, or delete it when None (no hooks run).

    Only for an operator's explicit verdict (:mod:`forge_ci.pushes.inspection`): every other
    ref change goes through a push.
    """
    if not name.startswith(("refs/heads/", "refs/tags/")):
        raise ValueError(f"only branches and tags can be set, not {name}")
    if oid is None:
        if repo.references.get(name) is not None:
            repo.references.delete(name)
        return
    repo.references.create(name, pygit2.Oid(hex=oid), force=True)


def pin(repo: pygit2.Repository, name: str, oid: str) -> None:
    """Point the internal ref ``name`` at ``oid`` (idempotent; libgit2 runs no hooks)."""
    if not name.startswith(INTERNAL_REF_PREFIX):
        raise ValueError(f"pins live under {INTERNAL_REF_PREFIX}, not {name}")
    repo.references.create(name, pygit2.Oid(hex=oid), force=True)


def peeled_tag(repo: pygit2.Repository, oid: str) -> str | None:
    """What the annotated tag ``oid`` finally points at (through tags of tags); None otherwise."""
    found = repo[oid]
    if not isinstance(found, pygit2.Tag):
        return None
    while isinstance(found, pygit2.Tag):
        found = found.get_object()
    return str(found.id)


def clean_git_environment(home: str) -> dict[str, str]:
    """For git subprocesses: no user or system configuration applies, no prompt is shown."""
    return {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": home,
        "LANG": "C",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0",
    }
