"""Cutting log records into lines (the same rule as static/logview/model.js)."""

from __future__ import annotations

from forge_ci.coordinator.logs import LogLine
from web.logs import Lines


def _lines(*records: tuple[str, str] | tuple[str, str, str]) -> tuple[list[tuple[str, str]], bool]:
    lines = Lines()
    for cursor, record in enumerate(records, 1):
        step, text = record[0], record[1]
        stream = record[2] if len(record) > 2 else "stdout"
        lines.add(LogLine(cursor, step, stream, text))
    return [(line.step_id, line.text) for line in lines.lines], lines.open


def test_lines_span_records_until_a_newline() -> None:
    assert _lines(("a", "hel"), ("a", "lo\nwor"), ("a", "ld\n")) == (
        [("a", "hello"), ("a", "world")],
        False,
    )


def test_a_record_without_a_final_newline_leaves_the_line_open() -> None:
    assert _lines(("a", "one\ntwo")) == ([("a", "one"), ("a", "two")], True)


def test_a_new_step_ends_the_open_line() -> None:
    assert _lines(("a", "no newline"), ("b", "next\n")) == (
        [("a", "no newline"), ("b", "next")],
        False,
    )


def test_empty_lines_and_carriage_returns() -> None:
    assert _lines(("a", "x\n\n\ny\r\n")) == ([("a", "x"), ("a", ""), ("a", ""), ("a", "y")], False)
    assert _lines(("a", "\n")) == ([("a", "")], False)
    assert _lines(("a", "")) == ([], False)
