"""Output handling pieces: incremental decoding, chunk sizes, defusing, the report."""

from __future__ import annotations

import io
import json

from forge_ci.protocol import (
    MAX_BODY_BYTES,
    AttemptStatus,
    LogRequest,
    dumps,
    request_body,
)
from worker.runner.report import Report, StepRecord, defuse
from worker.runner.steps import StreamDecoder
from worker.runner.uploader import CHUNK_ESCAPED_BYTES, escaped_size, split_chunk


def test_a_character_split_between_reads_stays_whole() -> None:
    decoder = StreamDecoder()
    encoded = "héllo €".encode()
    pieces = [encoded[i : i + 1] for i in range(len(encoded))]
    assert (
        "".join(decoder.decode(piece) for piece in pieces) + decoder.decode(b"", final=True)
        == "héllo €"
    )


def test_invalid_bytes_and_nul_become_replacement_characters() -> None:
    decoder = StreamDecoder()
    text = decoder.decode(b"ok \xff\xfe \x00 end") + decoder.decode(b"\xe2\x82", final=True)
    assert text == "ok \ufffd\ufffd \ufffd end\ufffd"


def test_chunks_fit_the_request_body_limit_whatever_the_text() -> None:
    for text in ("a" * 200_000, "\x01" * 200_000, "€" * 200_000, '"\\' * 100_000):
        rest = text
        pieces = []
        while rest:
            head, rest = split_chunk(rest)
            assert head
            assert escaped_size(head) <= CHUNK_ESCAPED_BYTES
            body = request_body(LogRequest("0" * 32, 2**62, "some-step", "stderr", head))
            assert len(dumps(body)) < MAX_BODY_BYTES
            pieces.append(head)
        assert "".join(pieces) == text


def test_workflow_command_lines_are_defused() -> None:
    assert defuse("::add-mask::x\nok\n  ::error::y") == "| ::add-mask::x\nok\n|   ::error::y"
    assert defuse("a::b") == "a::b"


def _status(conclusion: str) -> AttemptStatus:
    return AttemptStatus(7, "completed", "e" * 32, 3, 0, 1, 2, False, "", conclusion)


def test_exit_status_follows_what_the_server_confirmed() -> None:
    unconfirmed = Report(7, "e" * 32, "success", reported=False)
    assert unconfirmed.exit_status() == 2
    success = Report(7, "e" * 32, "success", reported=True, server=_status("success"))
    assert success.exit_status() == 0
    failure = Report(7, "e" * 32, "failure", reported=True, server=_status("failure"))
    assert failure.exit_status() == 1
    ended = Report(7, "e" * 32, "ended", reported=False, server=_status("timed_out"))
    assert ended.exit_status() == 1


def test_the_report_is_one_json_line_without_outputs() -> None:
    report = Report(
        7,
        "e" * 32,
        "failure",
        reason="::set-output name=x::y",
        reported=True,
        server=_status("failure"),
        steps=[StepRecord("build", "failure", "failure", 3)],
        log_sequence=3,
    )
    out = io.StringIO()
    report.write(out)
    line = out.getvalue()
    assert line.count("\n") == 1 and line.startswith("{")
    assert json.loads(line) == {
        "version": 1,
        "attempt_id": "7",
        "execution_id": "e" * 32,
        "result": "failure",
        "reason": "| ::set-output name=x::y",
        "reported": True,
        "confirmed": True,
        "conclusion": "failure",
        "steps": [{"id": "build", "outcome": "failure", "conclusion": "failure", "exit_code": 3}],
        "log_sequence": "3",
        "dropped_log_characters": 0,
    }
