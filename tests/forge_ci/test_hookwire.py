"""The hook wire format: what hooks and the SSH parent say to each other."""

from __future__ import annotations

import pytest

from forge_ci.hookwire import (
    Answer,
    Request,
    WireError,
    decode_answer,
    decode_request,
    encode_answer,
    encode_request,
    parse_updates,
)
from forge_ci.refs import Update, events_in, is_zero

ZERO, A, B = "0" * 40, "a" * 40, "b" * 40


def test_requests_and_answers_round_trip() -> None:
    request = Request(
        "pre-receive",
        "-",
        "abc123",
        (Update(ZERO, A, "refs/heads/main"), Update(A, B, "refs/tags/v1")),
    )
    assert decode_request(encode_request(request)) == request
    empty = Request("pre-receive", "-", "abc123", ())
    assert decode_request(encode_request(empty)) == empty
    for answer in (Answer(True), Answer(False, "forge-ci: no\n  because: reasons")):
        assert decode_answer(encode_answer(answer, "k3y"), "k3y") == answer
    assert encode_request(empty).endswith(b"\n.\n")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"hello\n.\n", "header"),
        (b"forge-ci-hook 1\nonly-two fields\n.\n", "second line"),
        (b"forge-ci-hook 1\npre-receive - s\nnot an update\n.\n", "update line 1"),
        (b"forge-ci-hook 1\npre-receive - s\n" + f"{A} xyz refs/x\n.\n".encode(), "object id"),
        (b"forge-ci-hook 1\n\xff\n.\n", "not UTF-8"),
        (b"forge-ci-hook 1\npre-receive - s\n", "incomplete"),
    ],
)
def test_malformed_requests_are_named(data: bytes, message: str) -> None:
    with pytest.raises(WireError, match=message):
        decode_request(data)


def test_an_ok_without_this_pushs_key_is_not_an_ok() -> None:
    with pytest.raises(WireError):
        decode_answer(b"maybe\n", "k3y")
    with pytest.raises(WireError):
        decode_answer(b"ok\n", "k3y")
    with pytest.raises(WireError):
        decode_answer(b"ok another-key\n", "k3y")


def test_only_real_moves_outside_forge_ci_make_events() -> None:
    updates = parse_updates(
        f"{ZERO} {A} refs/heads/main\n"
        f"{ZERO} {A} HEAD\n"
        f"{ZERO} {ZERO} refs/heads/packed\n"
        f"{A} {A} refs/heads/same\n"
        f"{ZERO} {A} refs/forge-ci/push-events/1\n"
        f"{A} {ZERO} refs/tags/v1\n"
    )
    events = (Update(ZERO, A, "refs/heads/main"), Update(A, ZERO, "refs/tags/v1"))
    assert events_in(updates) == events
    assert is_zero(ZERO) and is_zero("0" * 64) and not is_zero(A)
    # The wire carries every update: the SSH parent must see (and refuse) pushes into
    # refs/forge-ci/, and records only the events among them.
    request = decode_request(encode_request(Request("pre-receive", "-", "s", updates)))
    assert request.updates == updates
