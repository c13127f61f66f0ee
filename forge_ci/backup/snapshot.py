"""Making a backup of an installation and restoring one (see the package docstring)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.engine import Engine

from forge_ci.backup.database import (
    backup_database,
    database_kind,
    dump_name,
    require_empty_database,
    restore_database,
)
from forge_ci.backup.manifest import MANIFEST_NAME, Manifest, record_files, verify_files
from forge_ci.backup.repositories import bare_repositories, copy_repository, restore_repository
from forge_ci.db import create_db_engine, reader, unavailable_on_failure
from forge_ci.errors import Conflict, InvalidInput
from forge_ci.gitstore import repository_path
from forge_ci.locks import repository_lock
from forge_ci.migrations import current_revision, head_revision, known_revision
from forge_ci.models import Repository
from forge_ci.runs.action_cache import cache_lock
from forge_ci.settings import Settings

REPOSITORIES = "repositories"
ACTION_CACHE = "action-cache"
FILES = "files"
#: Key files and configuration: backup name -> where it lives, given the settings.
_KEY_FILES: dict[str, Callable[[Settings], Path]] = {
    "secrets.key": lambda s: s.sealing_key_path,
    "secret_key": lambda s: s.secret_key_file,
    "ssh_host_ed25519_key": lambda s: s.host_key_path,
    "ssh_host_ed25519_key.pub": lambda s: s.host_key_path.with_suffix(".pub"),
    "forge-ci.toml": lambda s: s.data_dir / "forge-ci.toml",
}
#: Data directory entries that may exist before a restore (made empty by an installer).
_ALLOWED_IN_EMPTY = frozenset({"lost+found"})


@dataclass(frozen=True)
class BackupSummary:
    path: Path
    manifest: Manifest


def _repositories(engine: Engine) -> list[tuple[int, str, str]]:
    from sqlalchemy.orm import Session

    with Session(reader(engine)) as session:
        rows = session.scalars(select(Repository)).all()
        return sorted((row.id, row.owner.name, row.name) for row in rows)


def _prepare_target(target: Path) -> Path:
    """A fresh partial directory next to ``target``, which must not exist yet (or be empty)."""
    target = target.absolute()
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise Conflict(f"{target} already exists and is not an empty directory; name a new one")
    target.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"{target.name}.partial-", dir=target.parent))


def create_backup(settings: Settings, target: Path) -> BackupSummary:
    """Write a complete backup of the installation described by ``settings`` to ``target``."""
    kind = database_kind(settings.database_url)
    engine = create_db_engine(settings.database_url)
    try:
        with unavailable_on_failure(settings.database_url):  # names the database and the fix
            revision = current_revision(reader(engine))
        if revision is None:
            raise InvalidInput(
                "the database has no forge-ci schema; there is nothing to back up (a new"
                " installation starts with `forge-ci init` or `forge-ci db upgrade`)"
            )
        partial = _prepare_target(target)
        try:
            manifest = Manifest(
                forge_ci_version=version("forge-ci"),
                schema_revision=revision,
                database=kind,
                created_at=datetime.now(UTC).isoformat(timespec="seconds"),
            )
            # The database first: everything it refers to is pinned before it commits.
            backup_database(settings.database_url, partial / dump_name(kind))
            for repository_id, owner, name in _repositories(engine):
                source = repository_path(settings.repositories_dir, owner, name)
                full_name = f"{owner}/{name}"
                if not source.is_dir():
                    raise InvalidInput(
                        f"repository {full_name} is in the database but not on disk at {source}"
                    )
                manifest.repositories[full_name] = copy_repository(
                    source,
                    repository_path(partial / REPOSITORIES, owner, name),
                    _repository_lock(settings, repository_id, full_name),
                )
            for cache in bare_repositories(settings.action_cache_dir):
                copy_repository(cache, partial / ACTION_CACHE / cache.name, _cache_lock(cache))
            for name, where in _KEY_FILES.items():
                path = where(settings)
                if path.is_file():
                    (partial / FILES).mkdir(exist_ok=True)
                    shutil.copy2(path, partial / FILES / name)
            record_files(partial, manifest)
            (partial / MANIFEST_NAME).write_text(manifest.as_json(), "utf-8")
            _sync_tree(partial)
            os.replace(partial, target.absolute())
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)
            raise
        return BackupSummary(target.absolute(), manifest)
    finally:
        engine.dispose()


def _repository_lock(
    settings: Settings, repository_id: int, full_name: str
) -> Callable[[], AbstractContextManager[object]]:
    return lambda: repository_lock(
        settings.locks_dir, repository_id, full_name, settings.repo_lock_timeout
    )


def _cache_lock(cache: Path) -> Callable[[], AbstractContextManager[object]]:
    return lambda: cache_lock(cache)


def _sync_tree(root: Path) -> None:
    """fsync every file and directory below ``root`` (a backup must survive a power cut)."""
    for directory, _dirnames, filenames in os.walk(root):
        for name in filenames:
            fd = os.open(os.path.join(directory, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def check_backup(settings: Settings, backup: Path) -> Manifest:
    """Everything restore checks before it writes: format, schema, checksums, database kind."""
    backup = backup.absolute()
    if not backup.is_dir():
        raise InvalidInput(f"there is no backup directory {backup}")
    manifest = Manifest.read(backup)
    if not known_revision(manifest.schema_revision):
        raise InvalidInput(
            f"the backup's database schema ({manifest.schema_revision}) is newer than this"
            f" forge-ci ({head_revision()}; the backup was made by forge-ci"
            f" {manifest.forge_ci_version}); restore it with that version or a later one"
        )
    kind = database_kind(settings.database_url)
    if kind != manifest.database:
        raise InvalidInput(
            f"the backup holds a {manifest.database} database, but FORGE_CI_DATABASE_URL is"
            f" {kind}; restore into the same kind of database"
        )
    verify_files(backup, manifest)
    return manifest


def require_empty_data_dir(settings: Settings) -> None:
    data_dir = settings.data_dir
    if not data_dir.exists():
        return
    if not data_dir.is_dir():
        raise Conflict(f"the data directory {data_dir} is not a directory")
    entries = sorted(p.name for p in data_dir.iterdir() if p.name not in _ALLOWED_IN_EMPTY)
    if entries:
        raise Conflict(
            f"the data directory {data_dir} is not empty (it holds {entries[0]}); restore only"
            " into an empty data directory, so that nothing of another installation is mixed in"
        )


def restore_backup(settings: Settings, backup: Path) -> Manifest:
    """Restore ``backup`` into the empty data directory and database of ``settings``."""
    backup = backup.absolute()
    manifest = check_backup(settings, backup)
    require_empty_data_dir(settings)
    require_empty_database(settings.database_url)
    settings.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    for name, where in _KEY_FILES.items():
        source = backup / FILES / name
        if source.is_file():
            path = where(settings)
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            shutil.copy2(source, path)
            os.chmod(path, 0o644 if name.endswith(".pub") else 0o600)
    for owner_dir in sorted((backup / REPOSITORIES).glob("*")):
        for source in sorted(owner_dir.glob("*.git")):
            restore_repository(
                source,
                settings.repositories_dir / owner_dir.name / source.name,
                settings.hooks_dir,
            )
    for source in bare_repositories(backup / ACTION_CACHE):
        settings.action_cache_dir.mkdir(parents=True, exist_ok=True)
        shutil.copytree(source, settings.action_cache_dir / source.name)
    restore_database(settings.database_url, backup / dump_name(manifest.database))
    return manifest
