"""Canonical JSON (RFC 8785, JCS) for plan digests.

A run's plan is stored and compared by digest, so the same plan must always serialise to the
same bytes, whatever produced it: keys sorted by UTF-16 code units, no whitespace, UTF-8, strings
escaped minimally, numbers in ECMAScript's shortest form (``1e21``, ``1e-7``, ``0.1``).
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any


def canonical_json(value: Any) -> bytes:
    """The RFC 8785 serialisation of a JSON-able value (dict, list, str, int, float, bool, None)."""
    out: list[str] = []
    _write(value, out)
    return "".join(out).encode("utf-8")


def digest(value: Any) -> str:
    """SHA-256 hex of the canonical serialisation."""
    return hashlib.sha256(canonical_json(value)).hexdigest()


def _write(value: Any, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(json.dumps(value, ensure_ascii=False))
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, float):
        out.append(es_number(value))
    elif isinstance(value, dict):
        out.append("{")
        for i, key in enumerate(sorted(value, key=_utf16_key)):
            if not isinstance(key, str):
                raise TypeError(f"JSON object keys must be strings, not {type(key).__name__}")
            if i:
                out.append(",")
            out.append(json.dumps(key, ensure_ascii=False))
            out.append(":")
            _write(value[key], out)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _write(item, out)
        out.append("]")
    else:
        raise TypeError(f"{type(value).__name__} is not JSON-able")


def _utf16_key(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def es_number(value: float) -> str:
    """A finite float as ECMAScript's Number.prototype.toString writes it."""
    if not math.isfinite(value):
        raise ValueError("JSON has no NaN or Infinity")
    if value == 0:
        return "0"
    if value < 0:
        return "-" + es_number(-value)
    mantissa, _, exponent_text = repr(value).partition("e")
    exponent = int(exponent_text) if exponent_text else 0
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    stripped = digits.rstrip("0")
    # value = int(stripped) * 10 ** scale, and n is the decimal point position of ECMAScript.
    scale = exponent - len(fraction) + (len(digits) - len(stripped))
    count = len(stripped)
    n = count + scale
    if count <= n <= 21:
        return stripped + "0" * (n - count)
    if 0 < n <= 21:
        return stripped[:n] + "." + stripped[n:]
    if -6 < n <= 0:
        return "0." + "0" * (-n) + stripped
    sign = "+" if n - 1 >= 0 else "-"
    head = stripped[0] + ("." + stripped[1:] if count > 1 else "")
    return f"{head}e{sign}{abs(n - 1)}"
