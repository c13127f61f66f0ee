"""Sealing secret values with the server's key file, kept outside the database.

The key file (``<data dir>/secrets.key``, mode 0600, created by ``forge-ci init``) holds one
or more 256-bit AES keys, one per line, the first being the *current* key::

    forge-ci-secrets-key v1 <key id: 8 hex> <key: 64 hex>

A sealed value is ``key id (8 ASCII bytes) || nonce (12) || AES-256-GCM ciphertext and tag``,
with the repository id and the secret's name bound as associated data, so a value copied to
another row of the database does not open there. A copy of the database without the key file
reveals no value, which is why the file must be backed up separately from the database.

Rotation (:func:`forge_ci.secrets.rotation.rotate_key`) writes a new current key in front of
the old ones, re-seals every value, commits, and only then drops the old keys, so a crash at
any point leaves every value readable. The file is read on every use (it is tiny), so every
process sees a rotation at once.
"""

from __future__ import annotations

import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from forge_ci.errors import ForgeCIError

_LINE = re.compile(r"forge-ci-secrets-key v1 ([0-9a-f]{8}) ([0-9a-f]{64})")
_ID_BYTES = 8
_NONCE_BYTES = 12


class SealingKeyError(ForgeCIError):
    """The key file is missing, unreadable or malformed, or does not open a value."""

    code = "sealing_key"
    http_status = 503


@dataclass(frozen=True)
class Keyring:
    """The keys of the key file: ``keys[0]`` seals, every key opens what it sealed."""

    keys: tuple[tuple[str, bytes], ...]

    @classmethod
    def load(cls, path: Path) -> Keyring:
        try:
            text = path.read_text("ascii")
        except FileNotFoundError:
            raise SealingKeyError(
                f"the secrets key file {path} does not exist; run forge-ci init (or restore "
                "it from its backup: without it no stored secret can be read)"
            ) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise SealingKeyError(f"the secrets key file {path} cannot be read: {exc}") from None
        keys: list[tuple[str, bytes]] = []
        for number, line in enumerate(text.splitlines(), start=1):
            match = _LINE.fullmatch(line.strip())
            if match is None:
                raise SealingKeyError(f"{path} line {number} is not a forge-ci secrets key")
            keys.append((match.group(1), bytes.fromhex(match.group(2))))
        if not keys:
            raise SealingKeyError(f"the secrets key file {path} holds no key")
        return cls(tuple(keys))

    @property
    def current_id(self) -> str:
        return self.keys[0][0]

    def seal(self, context: str, value: str) -> bytes:
        key_id, key = self.keys[0]
        nonce = os.urandom(_NONCE_BYTES)
        sealed = AESGCM(key).encrypt(nonce, value.encode("utf-8"), context.encode())
        return key_id.encode("ascii") + nonce + sealed

    def open(self, context: str, sealed: bytes) -> str:
        key_id = sealed[:_ID_BYTES].decode("ascii", "replace")
        for candidate, key in self.keys:
            if candidate == key_id:
                nonce = sealed[_ID_BYTES : _ID_BYTES + _NONCE_BYTES]
                try:
                    data = AESGCM(key).decrypt(
                        nonce, sealed[_ID_BYTES + _NONCE_BYTES :], context.encode()
                    )
                except InvalidTag:
                    break
                return data.decode("utf-8")
        raise SealingKeyError(
            f"a stored value ({context}) does not open with the secrets key file: the file was "
            "replaced or the database was restored without its key file"
        )

    def sealed_with_current(self, sealed: bytes) -> bool:
        return sealed[:_ID_BYTES] == self.current_id.encode("ascii")

    def render(self) -> bytes:
        return "".join(
            f"forge-ci-secrets-key v1 {key_id} {key.hex()}\n" for key_id, key in self.keys
        ).encode("ascii")


def secret_context(repository_id: int, name: str) -> str:
    """The associated data of a repository secret's sealed value."""
    return f"forge-ci repository secret\x00{repository_id}\x00{name}"


def new_key() -> tuple[str, bytes]:
    return secrets.token_hex(4), secrets.token_bytes(32)


def new_key_file() -> bytes:
    """The contents of a fresh key file: one new key."""
    return Keyring((new_key(),)).render()


def write_key_file(path: Path, keyring: Keyring) -> None:
    """Replace the key file atomically (mode 0600, synced before and after the rename)."""
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(keyring.render())
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
