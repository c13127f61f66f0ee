"""Credentials: 32 random bytes as 64 lowercase hex characters; only SHA-256 hashes stored.

SHA-256 without salt or stretching is enough for 256-bit random values (no dictionary to try).
Lookups go by hash; the final comparison is constant-time anyway.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from forge_ci.errors import InvalidInput
from forge_ci.protocol import ProtocolError, parse_token


def new_token() -> str:
    """A fresh credential (providers generate attempt credentials the same way)."""
    return secrets.token_hex(32)


def new_request_id() -> str:
    return secrets.token_hex(16)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("ascii")).hexdigest()


def hashes_match(stored: str, token: str) -> bool:
    return hmac.compare_digest(stored, token_hash(token))


def check_token(token: str, what: str) -> str:
    """``token`` if it is 64 lowercase hex characters, else InvalidInput naming ``what``."""
    try:
        return parse_token(token, what)
    except ProtocolError:
        raise InvalidInput(
            f"{what} must be 64 lowercase hexadecimal characters (32 random bytes), "
            "for example from `openssl rand -hex 32`"
        ) from None


def bearer_token(header: str | None) -> str | None:
    """The credential of an ``Authorization: Bearer <64 hex>`` header, or None."""
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    try:
        return parse_token(value.strip())
    except ProtocolError:
        return None


def keyed_digest(token: str, *parts: str) -> str:
    """HMAC-SHA256 of ``parts`` keyed by a credential (replay recognition without plaintext)."""
    message = b"\x00".join(part.encode("utf-8") for part in parts)
    # The one-shot form runs in C (``hmac.new`` builds the HMAC object in Python).
    return hmac.digest(token.encode("ascii"), message, "sha256").hex()


def job_token(attempt_token: str) -> str:
    """The attempt's job token (``github.token``): derived, so a claim replay gives the same one.

    64 hex characters like every credential; the server stores only its SHA-256.
    """
    return keyed_digest(attempt_token, "forge-ci job token")
