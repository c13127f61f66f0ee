"""The backup manifest: what a backup holds, with a checksum for every file."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forge_ci.errors import InvalidInput

FORMAT = "forge-ci-backup 1"
MANIFEST_NAME = "manifest.json"
_CHUNK = 1024 * 1024


@dataclass
class Manifest:
    """The contents of ``manifest.json``."""

    forge_ci_version: str
    schema_revision: str
    database: str  # "sqlite" or "postgresql"
    created_at: str
    #: ``owner/name`` -> {ref: object id}, hidden refs included.
    repositories: dict[str, dict[str, str]] = field(default_factory=dict)
    #: Relative path -> {"sha256": ..., "size": ...} for every file but the manifest.
    files: dict[str, dict[str, Any]] = field(default_factory=dict)

    def as_json(self) -> str:
        return json.dumps({"format": FORMAT, **self.__dict__}, indent=2, sort_keys=True) + "\n"

    @classmethod
    def read(cls, backup_dir: Path) -> Manifest:
        path = backup_dir / MANIFEST_NAME
        try:
            data = json.loads(path.read_text("utf-8"))
        except FileNotFoundError:
            raise InvalidInput(
                f"{backup_dir} is not a forge-ci backup: it has no {MANIFEST_NAME}"
            ) from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InvalidInput(f"the backup manifest {path} cannot be read: {exc}") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            found = data.get("format") if isinstance(data, dict) else None
            raise InvalidInput(
                f"the backup manifest {path} has format {found!r}; this forge-ci reads {FORMAT!r}"
            )
        try:
            manifest = cls(
                forge_ci_version=str(data["forge_ci_version"]),
                schema_revision=str(data["schema_revision"]),
                database=str(data["database"]),
                created_at=str(data["created_at"]),
                repositories={str(k): dict(v) for k, v in data["repositories"].items()},
                files={str(k): dict(v) for k, v in data["files"].items()},
            )
        except (KeyError, AttributeError, TypeError, ValueError) as exc:
            raise InvalidInput(f"the backup manifest {path} is incomplete: {exc!r}") from None
        if manifest.database not in ("sqlite", "postgresql"):
            raise InvalidInput(
                f"the backup manifest {path} names an unknown database {manifest.database!r}"
            )
        return manifest


def file_digest(path: Path) -> tuple[str, int]:
    """SHA-256 (hex) and size of the file at ``path``."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def relative_files(root: Path) -> list[str]:
    """Every regular file below ``root`` (POSIX relative paths, sorted), the manifest excepted.

    Anything that is neither a file nor a directory (a link, a socket) is refused: a backup
    holds only plain files, so restoring one can never write outside the data directory.
    """
    found = []
    for directory, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(directory) / name
            if path.is_symlink() or not (path.is_dir() or path.is_file()):
                raise InvalidInput(f"{path} in the backup is not a plain file or directory")
        for name in filenames:
            relative = (Path(directory) / name).relative_to(root).as_posix()
            if relative != MANIFEST_NAME:
                found.append(relative)
    return sorted(found)


def record_files(root: Path, manifest: Manifest) -> None:
    """Fill ``manifest.files`` with the checksum of every file below ``root``."""
    for relative in relative_files(root):
        digest, size = file_digest(root / relative)
        manifest.files[relative] = {"sha256": digest, "size": size}


def verify_files(root: Path, manifest: Manifest) -> None:
    """Refuse, naming the first file, unless the files below ``root`` are exactly the manifest's."""
    present = set(relative_files(root))
    missing = sorted(set(manifest.files) - present)
    if missing:
        raise InvalidInput(
            f"the backup {root} is incomplete: {missing[0]} is missing"
            + (f" (and {len(missing) - 1} more files)" if len(missing) > 1 else "")
        )
    extra = sorted(present - set(manifest.files))
    if extra:
        raise InvalidInput(
            f"the backup {root} holds {extra[0]}, which its manifest does not list; it was"
            " changed after it was made"
        )
    for relative, expected in sorted(manifest.files.items()):
        digest, size = file_digest(root / relative)
        if digest != expected.get("sha256") or size != expected.get("size"):
            raise InvalidInput(
                f"checksum mismatch in the backup {root}: {relative} is not the file the backup"
                " recorded (damaged or changed); nothing was restored"
            )
