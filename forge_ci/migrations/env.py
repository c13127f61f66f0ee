"""Alembic environment: runs migrations on the engine handed over by forge_ci.migrations."""

from __future__ import annotations

from alembic import context

from forge_ci.models import Base

engine = context.config.attributes["engine"]
with engine.begin() as connection:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=True,  # SQLite needs batch mode to alter tables
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()
