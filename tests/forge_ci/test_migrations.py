"""Migrations from empty on both databases, and refusal of unmigrated or newer schemas."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text

from forge_ci.db import create_db_engine
from forge_ci.errors import SchemaNotCurrent
from forge_ci.migrations import check_schema, current_revision, head_revision, upgrade
from forge_ci.models import Base


def test_upgrade_from_empty_creates_every_table(empty_db_url: str) -> None:
    engine = create_db_engine(empty_db_url)
    try:
        assert current_revision(engine) is None
        upgrade(engine)
        assert current_revision(engine) == head_revision()
        tables = set(inspect(engine).get_table_names())
        assert set(Base.metadata.tables) <= tables
        upgrade(engine)  # idempotent
        check_schema(engine)
    finally:
        engine.dispose()


def test_the_models_and_the_migrations_agree(empty_db_url: str) -> None:
    """A model changed without a migration fails here (alembic autogenerate finds a diff)."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    engine = create_db_engine(empty_db_url)
    try:
        upgrade(engine)
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            diff = compare_metadata(context, Base.metadata)
        assert diff == []
    finally:
        engine.dispose()


def test_an_unmigrated_database_is_refused_with_the_fix(empty_db_url: str) -> None:
    engine = create_db_engine(empty_db_url)
    try:
        with pytest.raises(SchemaNotCurrent, match="run `forge-ci db upgrade`"):
            check_schema(engine)
    finally:
        engine.dispose()


def test_a_newer_schema_is_refused(db_url: str) -> None:
    engine = create_db_engine(db_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = '9999_future'"))
        with pytest.raises(SchemaNotCurrent, match="newer than this forge-ci"):
            check_schema(engine)
    finally:
        engine.dispose()


def test_an_older_schema_is_refused(empty_db_url: str) -> None:
    engine = create_db_engine(empty_db_url)
    try:
        upgrade(engine, "0001_baseline")
        if head_revision() == "0001_baseline":
            with engine.begin() as conn:
                conn.execute(text("DELETE FROM alembic_version"))
            with pytest.raises(SchemaNotCurrent, match="no forge-ci schema yet"):
                check_schema(engine)
        else:
            with pytest.raises(SchemaNotCurrent, match="older than this forge-ci"):
                check_schema(engine)
    finally:
        engine.dispose()


def test_sqlite_connections_use_wal_foreign_keys_and_a_busy_timeout(sqlite_db_url: str) -> None:
    engine = create_db_engine(sqlite_db_url)
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30000
    finally:
        engine.dispose()
