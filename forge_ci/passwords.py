"""Password hashing with argon2id (argon2-cffi's defaults, which follow RFC 9106)."""

from __future__ import annotations

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

from forge_ci.errors import InvalidInput

MIN_PASSWORD_LENGTH = 8
MAX_PASSWORD_LENGTH = 1024

_hasher: PasswordHasher | None = None


def _get_hasher() -> PasswordHasher:
    global _hasher
    if _hasher is None:
        _hasher = PasswordHasher()
    return _hasher


def check_password_policy(password: str) -> None:
    if len(password) < MIN_PASSWORD_LENGTH:
        raise InvalidInput(f"the password must have at least {MIN_PASSWORD_LENGTH} characters")
    if len(password) > MAX_PASSWORD_LENGTH:
        raise InvalidInput(f"the password may have at most {MAX_PASSWORD_LENGTH} characters")


def hash_password(password: str) -> str:
    check_password_policy(password)
    return _get_hasher().hash(password)


def verify_password(password_hash: str | None, password: str) -> bool:
    """True when ``password`` matches; False for a mismatch, a missing or a corrupt hash."""
    if not password_hash or len(password) > MAX_PASSWORD_LENGTH:
        return False
    try:
        return _get_hasher().verify(password_hash, password)
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False
