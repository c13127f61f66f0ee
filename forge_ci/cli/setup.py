"""Preparing a data directory: folders, secrets, host key, schema (``forge-ci init``)."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from forge_ci.settings import Settings


def _write_private(path: Path, data: bytes) -> None:
    """Create ``path`` with mode 0600 without ever exposing it wider; never overwrite."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def ensure_layout(settings: Settings) -> list[str]:
    """Create what is missing in the data directory; return what was created, for the log."""
    created: list[str] = []
    for folder in (
        settings.data_dir,
        settings.repositories_dir,
        settings.hooks_dir,
        settings.locks_dir,
        settings.run_dir,
    ):
        if not folder.exists():
            folder.mkdir(parents=True, mode=0o700)
            created.append(str(folder))
    if not settings.secret_key_file.exists():
        _write_private(settings.secret_key_file, secrets.token_hex(32).encode())
        created.append(str(settings.secret_key_file))
    if not settings.sealing_key_path.exists():
        from forge_ci.secrets.sealing import new_key_file

        _write_private(settings.sealing_key_path, new_key_file())
        created.append(str(settings.sealing_key_path))
    if not settings.host_key_path.exists():
        key = ed25519.Ed25519PrivateKey.generate()
        _write_private(
            settings.host_key_path,
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.OpenSSH,
                serialization.NoEncryption(),
            ),
        )
        public = key.public_key().public_bytes(
            serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
        )
        settings.host_key_path.with_suffix(".pub").write_bytes(public + b"\n")
        created.append(str(settings.host_key_path))
    return created
