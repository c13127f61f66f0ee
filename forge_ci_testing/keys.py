"""Real SSH public keys made with ssh-keygen, for tests."""

from __future__ import annotations

import subprocess
from pathlib import Path


def make_key(
    directory: Path, key_type: str = "ed25519", bits: int | None = None, name: str = "id"
) -> Path:
    """Create a key pair with ssh-keygen; return the private key path (``.pub`` beside it)."""
    path = directory / f"{name}_{key_type}{bits or ''}"
    command = ["ssh-keygen", "-q", "-t", key_type, "-N", "", "-C", f"{name}@test", "-f", str(path)]
    if bits:
        command += ["-b", str(bits)]
    subprocess.run(command, check=True, stdin=subprocess.DEVNULL)
    return path


def fingerprint(private_key: Path) -> str:
    out = subprocess.run(
        ["ssh-keygen", "-l", "-E", "sha256", "-f", f"{private_key}.pub"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return out.split()[1]
