"""The hook wire format: what hooks and the SSH parent say to each other."""

from __future__ import annotations

import pytest

from forge_ci.hookwire import (
    Answer,
    Request,
    Update,
    WireError,
    decode_answer,
    decode_request,
    encode_answer,
    encode_request,
    events_in,
    is_zero,
    parse_updates,
)

ZERO, A, B = "0" * 40, "a" * 40, "b" * 40


def test_requests_and_answers_round_trip() -> None:
    request = Request(
        "reference-transaction",
        "prepared",
        "abc123",
        (Update(ZERO, A, "refs/heads/main"), Update(A, B, "refs/tags/v1")),
    )
    assert decode_request(encode_request(request)) == request
    empty = Request("pre-receive", "-", "abc123", ())
    assert decode_request(encode_request(empty)) == empty
    for answer in (Answer(True), Answer(False, "forge-ci: no\n  because: reasons")):
        assert decode_answer(encode_answer(answer)) == answer


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"hello\n", "header"),
        (b"forge-ci-hook 1\nonly-two fields\n", "second line"),
        (b"forge-ci-hook 1\npre-receive - s\nnot an update\n", "update line 1"),
        (b"forge-ci-hook 1\npre-receive - s\n" + f"{A} xyz refs/heads/x\n".encode(), "object id"),
        (b"forge-ci-hook 1\n\xff\n", "not UTF-8"),
    ],
)
def test_malformed_requests_are_named(data: bytes, message: str) -> None:
    with pytest.raises(WireError, match=message):
        decode_request(data)


def test_malformed_answers_are_refused() -> None:
    with pytest.raises(WireError):
        decode_answer(b"maybe\n")


def test_only_real_moves_outside_forge_ci_make_events() -> None:
    updates = parse_updates(
        f"{ZERO} {A} refs/heads/main\n"
        f"{ZERO} {A} HEAD\n"
        f"{ZERO} {ZERO} refs/heads/packed\n"
        f"{A} {A} refs/heads/same\n"
        f"{ZERO} {A} refs/forge-ci/push-events/1\n"
        f"{A} {ZERO} refs/tags/v1\n"
    )
    assert events_in(updates) == [
        Update(ZERO, A, "refs/heads/main"),
        Update(A, ZERO, "refs/tags/v1"),
    ]
    assert is_zero(ZERO) and is_zero("0" * 64) and not is_zero(A)


def test_values_are_immutable_and_compare_by_value() -> None:
    update = Update(ZERO, A, "refs/heads/main")
    assert update == Update(ZERO, A, "refs/heads/main") and update != Update(ZERO, B, "x")
    assert len({update, Update(ZERO, A, "refs/heads/main")}) == 1
    assert "refs/heads/main" in repr(update)
    with pytest.raises(AttributeError):
        update.ref = "refs/heads/other"  # type: ignore[misc]
