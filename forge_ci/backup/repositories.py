"""Copying bare repositories into a backup and back, refs under the repository's write lock."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pygit2

from forge_ci.errors import InvalidInput
from forge_ci.gitstore import configure

#: What a bare repository holds besides ``objects/``: copied while the lock is held.
_OBJECTS = "objects"


def list_refs(git_dir: Path) -> dict[str, str]:
    """Every ref of the bare repository (hidden ones included) -> its object id, and HEAD."""
    result = subprocess.run(
        ["git", "--git-dir", str(git_dir), "for-each-ref", "--format=%(refname) %(objectname)"],
        capture_output=True,
        check=True,
        timeout=600,
    )
    refs = dict(line.split(" ", 1) for line in result.stdout.decode().splitlines() if line)
    head = (git_dir / "HEAD").read_text("utf-8").strip()
    refs["HEAD"] = head
    return refs


def _skip_temporary(directory: str, names: list[str]) -> set[str]:
    # Objects being written right now (a push after our refs were taken): git renames them into
    # place when complete, so the temporary files are never needed.
    return {
        name for name in names if name.startswith(("tmp_", "incoming-")) or name.endswith(".lock")
    }


def copy_repository(
    source: Path, target: Path, lock: Callable[[], AbstractContextManager[object]]
) -> dict[str, str]:
    """Copy the bare repository ``source`` to ``target``; return its refs.

    Everything but ``objects/`` (HEAD, config, refs, packed-refs) is copied while ``lock`` is
    held, so no push is half in; the objects afterwards: git only ever adds objects (forge-ci
    never collects garbage by itself), so every object the copied refs need is already there.
    """
    target.mkdir(parents=True)
    with lock():
        refs = list_refs(source)
        for entry in sorted(source.iterdir()):
            if entry.name == _OBJECTS:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.copytree(entry, target / entry.name, ignore=_skip_temporary)
            elif entry.is_file() and not entry.name.endswith(".lock"):
                shutil.copy2(entry, target / entry.name)
    if (source / _OBJECTS).is_dir():
        shutil.copytree(source / _OBJECTS, target / _OBJECTS, ignore=_skip_temporary)
    missing = _missing_objects(target, refs)
    if missing:
        raise InvalidInput(
            f"the copy of {source} lacks object {missing} (was the repository garbage-collected"
            " during the backup?); run the backup again"
        )
    return refs


def _missing_objects(git_dir: Path, refs: dict[str, str]) -> str | None:
    repo = pygit2.Repository(str(git_dir))
    for name, oid in refs.items():
        if name != "HEAD" and oid not in repo:
            return oid
    return None


def bare_repositories(root: Path) -> Iterator[Path]:
    """The ``*.git`` directories directly below ``root`` and one level deeper."""
    if not root.is_dir():
        return
    for path in sorted(root.glob("*.git")) + sorted(root.glob("*/*.git")):
        if path.is_dir() and (path / "HEAD").is_file():
            yield path


def restore_repository(source: Path, target: Path, hooks_dir: Path) -> None:
    """Copy a backed-up repository into place and re-assert forge-ci's settings on it."""
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, target)
    configure(pygit2.Repository(str(target)), hooks_dir)
