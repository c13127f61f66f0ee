"""Field validators of the runner protocol: strict JSON and the scalars every message uses.

Standard library only (the in-container runner imports this package under ``python -S``).
Every channel of :mod:`forge_ci.protocol` parses with these, so the server and the runner
cannot drift apart.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

PROTOCOL_VERSION: Final = 1
INT64_MAX: Final = 2**63 - 1

_DECIMAL = re.compile(r"0|[1-9][0-9]*")
HEX32 = re.compile(r"[0-9a-f]{32}")
HEX64 = re.compile(r"[0-9a-f]{64}")
STEP_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,99}")
OUTPUT_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,99}")
ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")
#: A variable name a step's process may be given: GitHub accepts any name in ``env`` (``a-b``,
#: ``x.y``); only ``=`` and NUL cannot pass through ``execve``, and forge-ci also leaves out
#: control characters (names are shown in logs and pages). At most 255 characters.
PROCESS_ENV_NAME_RE = re.compile(r"[^=\x00-\x1f\x7f]{1,255}")
#: ``uses`` of the built-in checkout step (the workflow engine plans it, the runner runs it).
#: Here rather than in ``steps`` (which re-exports both) so that the workflow parser reads them
#: without defining the runner's step class.
CHECKOUT: Final = "forge-ci/checkout@v1"
#: An action input name as written (matched case-insensitively; ``INPUT_<NAME>`` is built
#: from it by uppercasing and replacing spaces with ``_``).
INPUT_NAME_RE: Final = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_. -]{0,99}")


class ProtocolError(Exception):
    """A message broke the wire format. ``code`` is stable; ``status`` is the HTTP status."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status

    def __str__(self) -> str:
        return self.message


def invalid(message: str) -> ProtocolError:
    return ProtocolError("invalid_request", message)


# --- Scalars -------------------------------------------------------------------------------------


def parse_decimal(value: object, name: str, *, positive: bool = False) -> int:
    """A canonical decimal string as an int (``positive``: IDs, which start at 1)."""
    if not isinstance(value, str):
        raise invalid(f'{name} must be a decimal string such as "1", not {kind(value)}')
    if not value.isascii() or not _DECIMAL.fullmatch(value):
        raise invalid(
            f"{name} must be a canonical decimal string (digits only, no sign, spaces or "
            f"leading zeros), got {value[:40]!r}"
        )
    # Length first: int() of 4,301 digits or more raises Python's own ValueError.
    if len(value) > len(str(INT64_MAX)) or int(value) > INT64_MAX:
        raise invalid(f"{name} is larger than the 64-bit limit")
    number = int(value)
    if positive and number == 0:
        raise invalid(f"{name} must be at least 1")
    return number


def decimal(number: int) -> str:
    """An int as a canonical decimal string (the inverse of :func:`parse_decimal`)."""
    if number < 0 or number > INT64_MAX:
        raise ValueError(f"{number} is outside the wire range")
    return str(number)


def kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def string(value: object, name: str, *, max_bytes: int | None = None) -> str:
    if not isinstance(value, str):
        raise invalid(f"{name} must be a string, not {kind(value)}")
    if max_bytes is not None and len(value.encode("utf-8", "surrogatepass")) > max_bytes:
        raise invalid(f"{name} is longer than {max_bytes} bytes")
    return value


def utf8(value: str, name: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise invalid(f"{name} contains a lone surrogate; send valid UTF-8 text") from None
    if "\x00" in value:
        raise invalid(f"{name} contains a NUL character")
    return value


def hex_text(value: object, name: str, pattern: re.Pattern[str], length: int) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise invalid(f"{name} must be {length} lowercase hexadecimal characters")
    return value


def parse_token(value: object, name: str = "credential") -> str:
    """A 64-character lowercase hex credential (32 random bytes)."""
    return hex_text(value, name, HEX64, 64)


def integer(value: object, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid(f"{name} must be a whole JSON number, not {kind(value)}")
    if not low <= value <= high:
        raise invalid(f"{name} must be between {low} and {high}, got {value}")
    return value


def boolean(value: object, name: str) -> bool:
    if not isinstance(value, bool):
        raise invalid(f"{name} must be true or false, not {kind(value)}")
    return value


def choice(value: object, name: str, allowed: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise invalid(f"{name} must be one of {', '.join(allowed)}; got {value!r}"[:300])
    return value


def parse_step_id(value: object, name: str = "step_id") -> str:
    if not isinstance(value, str) or not STEP_ID.fullmatch(value):
        raise invalid(
            f"{name} must be a step id (a letter or '_', then letters, digits, '_' or '-')"
        )
    return value


# --- Parsing JSON bodies -------------------------------------------------------------------------


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise invalid(f"field {key!r} appears twice")
        result[key] = value
    return result


def _no_constants(name: str) -> Any:
    raise invalid(f"{name} is not valid JSON")


def loads(body: bytes) -> Any:
    """Strict JSON: UTF-8, no duplicate keys, no NaN/Infinity."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise invalid("the body is not UTF-8") from None
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constants)
    except ProtocolError:
        raise
    except (ValueError, RecursionError):
        raise invalid("the body is not valid JSON") from None


def dumps(value: Any) -> bytes:
    """Compact, deterministic JSON as sent on the wire."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()


#: field name -> (required, parser)
Fields = Mapping[str, tuple[bool, Callable[[object, str], Any]]]


def parse_object(
    obj: object, fields: Fields, what: str, *, versioned: bool = True
) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise invalid(f"{what} must be a JSON object, not {kind(obj)}")
    if versioned:
        if "version" not in obj:
            raise invalid(f"{what}: field 'version' is required")
        version = obj["version"]
        if isinstance(version, bool) or not isinstance(version, int):
            raise invalid(f"{what}: version must be the number {PROTOCOL_VERSION}")
        if version != PROTOCOL_VERSION:
            raise ProtocolError(
                "unsupported_version",
                f"{what}: protocol version {version} is not supported; this server speaks "
                f"version {PROTOCOL_VERSION}",
            )
    allowed = set(fields) | ({"version"} if versioned else set())
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise invalid(f"{what}: unknown field {unknown[0]!r}"[:200])
    parsed: dict[str, Any] = {}
    for name, (required, parse) in fields.items():
        if name not in obj:
            if required:
                raise invalid(f"{what}: field {name!r} is required")
            continue
        parsed[name] = parse(obj[name], name)
    return parsed
