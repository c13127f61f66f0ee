"""Parsing and vetting SSH public keys (OpenSSH ``authorized_keys`` line format).

Accepted: ed25519, ECDSA (P-256/384/521) and RSA of at least 2048 bits. Everything else (DSA,
short RSA, certificates, options before the key type, junk) is refused with the reason.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.serialization import load_ssh_public_key

from forge_ci.errors import InvalidInput

MIN_RSA_BITS = 2048
MAX_KEY_LINE = 16 * 1024
ALLOWED_TYPES = (
    "ssh-ed25519",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "ssh-rsa",
)


@dataclass(frozen=True)
class PublicKey:
    """A vetted public key."""

    key_type: str
    bits: int
    blob: bytes
    comment: str

    @property
    def fingerprint(self) -> str:
        """``SHA256:...`` exactly as ``ssh-keygen -l`` prints it."""
        return sha256_fingerprint(self.blob)

    @property
    def openssh(self) -> str:
        return f"{self.key_type} {base64.b64encode(self.blob).decode()}"


def sha256_fingerprint(blob: bytes) -> str:
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    return f"SHA256:{digest}"


def parse_public_key(text: str) -> PublicKey:
    """Parse one public key line; raise InvalidInput naming what is wrong."""
    if len(text) > MAX_KEY_LINE:
        raise InvalidInput("the public key is too long to be an SSH public key")
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if len(lines) != 1:
        raise InvalidInput(
            "expected exactly one public key line (type, base64 key, optional comment); "
            f"found {len(lines)} lines"
        )
    fields = lines[0].split(None, 2)
    if len(fields) < 2:
        raise InvalidInput("malformed public key: expected '<type> <base64 key> [comment]'")
    key_type, b64 = fields[0], fields[1]
    comment = fields[2].strip() if len(fields) == 3 else ""
    if key_type == "ssh-dss":
        raise InvalidInput("DSA keys are refused: they are limited to 1024 bits; use ed25519")
    if key_type.endswith("-cert-v01@openssh.com"):
        raise InvalidInput("SSH certificates are not supported; add the plain public key")
    if key_type not in ALLOWED_TYPES:
        raise InvalidInput(
            f"unsupported key type {key_type!r}: use ssh-ed25519, ecdsa-sha2-nistp256/384/521 "
            "or ssh-rsa (2048 bits or more)"
        )
    try:
        blob = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput("malformed public key: the key data is not valid base64") from None
    try:
        key = load_ssh_public_key(f"{key_type} {b64}".encode())
    except (ValueError, TypeError) as exc:
        raise InvalidInput(f"malformed public key: {exc}") from None
    if isinstance(key, rsa.RSAPublicKey):
        bits = key.key_size
        if bits < MIN_RSA_BITS:
            raise InvalidInput(
                f"RSA key of {bits} bits is too weak: at least {MIN_RSA_BITS} bits are required"
            )
    elif isinstance(key, ec.EllipticCurvePublicKey):
        bits = key.curve.key_size
    elif isinstance(key, ed25519.Ed25519PublicKey):
        bits = 256
    else:  # pragma: no cover - load_ssh_public_key returned a type we did not ask for
        raise InvalidInput(f"unsupported key type {key_type!r}")
    if len(comment) > 200:
        raise InvalidInput("the key comment is longer than 200 characters; shorten it")
    return PublicKey(key_type=key_type, bits=bits, blob=blob, comment=comment)
