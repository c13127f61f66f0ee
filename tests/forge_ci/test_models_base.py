"""UTCDateTime's fused SQLite processors against the layers they replace, and on real SQLite."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import Column, Integer, MetaData, Table, create_engine, insert, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.dialects.sqlite import DATETIME
from sqlalchemy.engine.processors import str_to_datetime

from forge_ci.models.base import UTCDateTime

DIALECT = sqlite.dialect()
FUSED = UTCDateTime()
#: The reference: the decorator's own steps, then SQLite's text conversion (and back).
_LAYER_BIND = DATETIME().bind_processor(DIALECT)


def reference_bind(value: datetime | None) -> str | None:
    return _LAYER_BIND(FUSED.process_bind_param(value, DIALECT))


def reference_result(value: str | None) -> datetime | None:
    return FUSED.process_result_value(str_to_datetime(value), DIALECT)


offsets = st.integers(min_value=-23 * 60, max_value=23 * 60).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)
aware = st.datetimes(
    min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31), timezones=offsets
)


@given(aware)
def test_the_fused_bind_agrees_with_the_layers(value: datetime) -> None:
    bind = FUSED.bind_processor(DIALECT)
    assert bind is not None
    assert bind(value) == reference_bind(value)


@given(aware)
def test_the_fused_result_agrees_with_the_layers(value: datetime) -> None:
    result = FUSED.result_processor(DIALECT, None)
    assert result is not None
    for text in (
        reference_bind(value),
        # SQLite's CURRENT_TIMESTAMP form, and a date alone.
        f"{value.year:04d}-{value.month:02d}-{value.day:02d} {value:%H:%M:%S}",
        f"{value.year:04d}-{value.month:02d}-{value.day:02d}",
        # What other writers may have stored: a "T" separator, an offset, a short fraction.
        value.isoformat(),
        value.astimezone(UTC).replace(tzinfo=None).isoformat("T", "milliseconds") + "Z",
    ):
        assert result(text) == reference_result(text)
        assert result(text).tzinfo is UTC


def test_none_passes_and_a_naive_datetime_is_refused() -> None:
    bind, result = FUSED.bind_processor(DIALECT), FUSED.result_processor(DIALECT, None)
    assert bind is not None and result is not None
    assert bind(None) is None and result(None) is None
    with pytest.raises(ValueError, match="naive datetime given to a UTC column"):
        bind(datetime(2026, 12, 2, 7, 0))


def test_other_dialects_keep_the_layers() -> None:
    """PostgreSQL stores timestamptz itself: the decorator's own step, an aware UTC value."""
    bind = FUSED.bind_processor(postgresql.psycopg.dialect())
    assert bind is not None
    at = datetime(2026, 12, 2, 9, 30, tzinfo=timezone(timedelta(hours=2)))
    assert bind(at) == at and bind(at).tzinfo is UTC


def test_a_round_trip_through_sqlite(tmp_path: Path) -> None:
    table = Table(
        "stamps", MetaData(), Column("id", Integer, primary_key=True), Column("at", FUSED)
    )
    engine = create_engine(f"sqlite:///{tmp_path / 'stamps.db'}")
    table.metadata.create_all(engine)
    at = datetime(2026, 12, 2, 9, 30, 5, 123, tzinfo=timezone(timedelta(hours=2)))
    with engine.begin() as connection:
        connection.execute(insert(table).values(id=1, at=at))
        assert connection.scalar(select(table.c.at)) == at
        assert connection.scalar(select(table.c.at)).tzinfo is UTC
    engine.dispose()
    stored = sqlite3.connect(tmp_path / "stamps.db").execute("SELECT at FROM stamps").fetchone()
    assert stored == ("2026-12-02 07:30:05.000123",)
