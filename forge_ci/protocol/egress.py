"""``POST attempts/<id>/egress``: the provider sends its proxy's connection records (audit).

Authenticated by the provider credential (a job never holds it, so a job cannot write its own
audit). The body also carries the attempt credential, which the provider chose at the claim:
the server checks it against the attempt and masks what the job could have put into a host
name before anything is stored or written to the job's log. Sequences are the proxy's, from 1
per attempt; a replayed sequence is stored once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from forge_ci.protocol.fields import (
    PROTOCOL_VERSION,
    Fields,
    boolean,
    integer,
    invalid,
    kind,
    parse_object,
    parse_token,
    string,
    utf8,
)

#: Records in one request; the provider sends more in further requests.
MAX_EGRESS_RECORDS = 200
_BIG = 2**62


def _text(limit: int) -> Any:
    return lambda value, name: utf8(string(value, name, max_bytes=limit), name)


@dataclass(frozen=True)
class EgressRecord:
    sequence: int
    at_ms: int
    method: str
    host: str
    port: int
    address: str
    allowed: bool
    explicit: bool
    reason: str
    closed: str
    bytes_out: int
    bytes_in: int
    milliseconds: int

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


_RECORD_FIELDS: Fields = {
    "sequence": (True, lambda v, n: integer(v, n, 1, 2**31 - 1)),
    "at_ms": (True, lambda v, n: integer(v, n, 0, _BIG)),
    "method": (True, _text(16)),
    "host": (True, _text(255)),
    "port": (True, lambda v, n: integer(v, n, 0, 65535)),
    "address": (True, _text(200)),
    "allowed": (True, boolean),
    "explicit": (True, boolean),
    "reason": (True, _text(500)),
    "closed": (True, _text(200)),
    "bytes_out": (True, lambda v, n: integer(v, n, 0, _BIG)),
    "bytes_in": (True, lambda v, n: integer(v, n, 0, _BIG)),
    "milliseconds": (True, lambda v, n: integer(v, n, 0, _BIG)),
}


def _records(value: object, name: str) -> list[EgressRecord]:
    if not isinstance(value, list):
        raise invalid(f"{name} must be an array, not {kind(value)}")
    if not 1 <= len(value) <= MAX_EGRESS_RECORDS:
        raise invalid(f"{name} must hold 1 to {MAX_EGRESS_RECORDS} records")
    return [
        EgressRecord(**parse_object(item, _RECORD_FIELDS, f"{name}[{i}]", versioned=False))
        for i, item in enumerate(value)
    ]


@dataclass(frozen=True)
class EgressRequest:
    attempt_token: str
    connections: list[EgressRecord]

    def to_json(self) -> dict[str, Any]:
        return {
            "version": PROTOCOL_VERSION,
            "attempt_token": self.attempt_token,
            "connections": [record.to_json() for record in self.connections],
        }


EGRESS_FIELDS: Fields = {
    "attempt_token": (True, parse_token),
    "connections": (True, _records),
}
