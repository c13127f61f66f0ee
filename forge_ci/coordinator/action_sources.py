"""Action archives: the pinned tree of one of a run's actions, as a ``tar`` for the runner.

``POST <archive_path>`` (``/attempts/<id>/actions/<n>.tar``, ``n`` the action's position among
the run's actions sorted by key) is served under the same rules as ``source.tar``: a live,
running attempt of the asking runner instance, no cancellation requested, the run's requester
still allowed to run code. The action must be one this attempt's job may run, and its commit
must still be pinned where the run found it (``refs/forge-ci/actions/<commit>`` in the forge
repository or the action cache; a ``./PATH`` action by the run's own pin)::

    attempt request (locked): running, this execution ──► requester authorized
      ──► n names an action of this job ──► where it lives      (the transaction ends here)
    pin check ──► tar of <commit>:<path>: regular files (0644/0755), folders and symbolic links
      (their target as committed, checked at run creation); at most 10,000 files and 64 MiB

The tar is written here from git objects, so nothing of the repository's configuration runs.
A pinned commit's tree never changes, so the tar is kept, once built, under
``<action cache>/archives/<commit>-<path digest>.tar`` (written to a temporary file, synced and
renamed into place) and served from there by the next job (after the same checks and the same
pin check): inflating the git objects of a large action (setup-python: 8 MiB, 0.2 s of CPU) is
paid once per action, not per job. The folder may be deleted at any time.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tarfile
import tempfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO

import pygit2
from pygit2.enums import FileMode
from sqlalchemy.orm import Session

from forge_ci.coordinator.attempts import running_job
from forge_ci.coordinator.errors import SourceRefused
from forge_ci.coordinator.sources import SourceArchive
from forge_ci.gitstore import repository_path
from forge_ci.models import Attempt, Repository
from forge_ci.protocol import SourceRequest
from forge_ci.runs.actions import (
    MAX_ACTION_FILES,
    MAX_ACTION_TREE_BYTES,
    ActionProblem,
    action_repository,
    job_action_keys,
    link_target,
)
from forge_ci.runs.pins import pinned_commit
from forge_ci.settings import Settings

_SPOOL_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class ActionTarget:
    """Which tree of which bare repository an attempt may read as an action."""

    repository_dir: Path
    commit: str
    path: str
    pin_ref: str
    reference: str
    #: Where built archives are kept (None: built every time).
    archives_dir: Path | None = None


def locate_action(
    session: Session,
    settings: Settings,
    attempt: Attempt,
    request: SourceRequest,
    index: int,
    now: datetime,
) -> ActionTarget | str:
    """The action tree ``attempt`` may read, or why its requester may no longer run code."""
    live = running_job(session, attempt, request.execution_id, now, "fetching an action")
    if isinstance(live, str):
        return live
    job = live
    run = job.run
    snapshot = run.actions or {}
    entries = snapshot.get("actions") or {}
    ordered = sorted(entries)
    allowed = job_action_keys(snapshot, list(job.definition().get("steps", [])))
    if not 0 <= index < len(ordered) or ordered[index] not in allowed:
        raise SourceRefused(f"job {job.key} has no action number {index}")
    entry = entries[ordered[index]]
    repository = session.get(Repository, run.repository_id)
    if repository is None:
        raise SourceRefused("the repository of this run no longer exists")
    run_dir = repository_path(settings.repositories_dir, repository.owner.name, repository.name)
    directory = action_repository(session, settings, run_dir, entry)
    if directory is None:
        raise SourceRefused(f"the repository of action {entry['reference']} no longer exists")
    pin = run.pin_ref if entry["source"]["kind"] == "run" else str(entry["pin_ref"])
    return ActionTarget(
        directory,
        entry["commit"],
        entry["path"],
        pin,
        entry["reference"],
        settings.action_cache_dir / "archives",
    )


def build_action_archive(target: ActionTarget) -> SourceArchive:
    """The ``tar`` of the action's folder at its pinned commit (see the module doc)."""
    name = target.reference
    try:
        git = pygit2.Repository(str(target.repository_dir))
    except pygit2.GitError:
        raise SourceRefused(f"the repository of action {name} cannot be opened") from None
    if pinned_commit(git, target.pin_ref) != target.commit:
        raise SourceRefused(
            f"commit {target.commit[:12]} of action {name} is no longer pinned; it is gone"
        )
    kept = _kept_path(target)
    if kept is not None:
        try:
            cached = kept.open("rb")
        except OSError:
            pass
        else:
            return SourceArchive(cached, os.fstat(cached.fileno()).st_size, target.commit)
    tree = git[target.commit].peel(pygit2.Tree)
    for part in target.path.split("/") if target.path else []:
        tree = git[tree[part].id].peel(pygit2.Tree)
    spool: IO[bytes] = tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES)  # noqa: SIM115
    try:
        with tarfile.open(fileobj=spool, mode="w", format=tarfile.PAX_FORMAT) as archive:
            _add_tree(git, tree, "", archive, name)
        size = spool.tell()
        if kept is not None:
            _keep(spool, kept)
    except BaseException:
        spool.close()
        raise
    spool.seek(0)
    return SourceArchive(spool, size, target.commit)


def _kept_path(target: ActionTarget) -> Path | None:
    if target.archives_dir is None:
        return None
    digest = hashlib.sha256(target.path.encode()).hexdigest()[:16]
    return target.archives_dir / f"{target.commit}-{digest}.tar"


def _keep(spool: IO[bytes], kept: Path) -> None:
    """Copy the built archive to ``kept`` atomically; a failure only means no reuse."""
    part: str | None = None
    try:
        kept.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        descriptor, part = tempfile.mkstemp(dir=kept.parent, suffix=".part")
        with os.fdopen(descriptor, "wb") as out:
            spool.seek(0)
            shutil.copyfileobj(spool, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(part, kept)
        part = None
    except OSError:
        pass
    finally:
        if part is not None:
            Path(part).unlink(missing_ok=True)


def _add_tree(
    git: pygit2.Repository, tree: pygit2.Tree, prefix: str, archive: tarfile.TarFile, name: str
) -> None:
    files = 0
    total = 0
    stack: list[tuple[str, pygit2.Tree]] = [(prefix, tree)]
    while stack:
        base, current = stack.pop()
        for entry in sorted(current, key=lambda item: item.name or ""):
            path = base + (entry.name or "")
            if not entry.name or entry.name in (".", "..") or entry.name.lower() == ".git":
                raise SourceRefused(f"action {name}: {path!r} cannot be unpacked")
            mode = entry.filemode
            if mode == FileMode.TREE:
                info = tarfile.TarInfo(path)
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                archive.addfile(info)
                stack.append((path + "/", git[entry.id].peel(pygit2.Tree)))
            elif mode in (FileMode.BLOB, FileMode.BLOB_EXECUTABLE):
                data = bytes(git[entry.id].peel(pygit2.Blob).data)
                files += 1
                total += len(data)
                if files > MAX_ACTION_FILES or total > MAX_ACTION_TREE_BYTES:
                    raise SourceRefused(f"action {name} is larger than the archive limits")
                info = tarfile.TarInfo(path)
                info.size = len(data)
                info.mode = 0o755 if mode == FileMode.BLOB_EXECUTABLE else 0o644
                archive.addfile(info, io.BytesIO(data))
            elif mode == FileMode.LINK:
                info = tarfile.TarInfo(path)
                info.type = tarfile.SYMTYPE
                try:
                    info.linkname = link_target(git, entry.id, name, path)
                except ActionProblem as problem:
                    raise SourceRefused(str(problem)) from None
                info.mode = 0o777
                archive.addfile(info)
            else:
                raise SourceRefused(f"action {name}: {path!r} is not a file or folder")
