"""Migration 0003_runs goes down and up again cleanly on both databases, trigger included."""

from __future__ import annotations

from sqlalchemy import inspect

from forge_ci.db import create_db_engine
from forge_ci.migrations import current_revision, upgrade

RUN_TABLES = {
    "run_sequences",
    "runs",
    "jobs",
    "job_dependencies",
    "job_outputs",
    "push_event_results",
    "push_event_workflows",
}


def test_down_to_push_events_and_up_again(empty_db_url: str) -> None:
    from alembic import command

    from forge_ci.migrations import _config

    engine = create_db_engine(empty_db_url)
    try:
        upgrade(engine)
        assert RUN_TABLES <= set(inspect(engine).get_table_names())
        command.downgrade(_config(engine), "0002_push_events")
        assert current_revision(engine) == "0002_push_events"
        inspector = inspect(engine)
        assert not RUN_TABLES & set(inspector.get_table_names())
        columns = {c["name"] for c in inspector.get_columns("repositories")}
        assert "push_workflows_enabled_at" not in columns
        upgrade(engine)
        assert RUN_TABLES <= set(inspect(engine).get_table_names())
    finally:
        engine.dispose()
