"""Alembic migrations owned by the core, run with ``forge-ci db upgrade``.

Revisions live in ``versions/``; every schema change is a new revision (never edit a released
one). :func:`check_schema` is what each process calls at start to refuse an unmigrated or newer
database with the command that fixes it.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine

from forge_ci.errors import SchemaNotCurrent

HERE = Path(__file__).resolve().parent


def _config(engine: Engine | None = None):  # type: ignore[no-untyped-def]
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(HERE))
    if engine is not None:
        config.attributes["engine"] = engine
    return config


def head_revision() -> str:
    from alembic.script import ScriptDirectory

    heads = ScriptDirectory.from_config(_config()).get_heads()
    assert len(heads) == 1, f"migrations have {len(heads)} heads; merge them"
    return str(heads[0])


def known_revision(revision: str) -> bool:
    """Whether ``revision`` is one of this version's migrations (older or equal to the head)."""
    from alembic.script import ScriptDirectory

    try:
        return ScriptDirectory.from_config(_config()).get_revision(revision) is not None
    except Exception:  # alembic's ResolutionError and friends: not one of ours
        return False


def current_revision(engine: Engine) -> str | None:
    """The revision stamped in the database, or None when it was never migrated."""
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        heads = MigrationContext.configure(conn).get_current_heads()
    return heads[0] if heads else None


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Migrate the database up to ``revision``."""
    from alembic import command

    command.upgrade(_config(engine), revision)


def check_schema(engine: Engine) -> None:
    """Raise SchemaNotCurrent unless the database is at the head revision."""
    from alembic.script import ScriptDirectory

    current = current_revision(engine)
    head = head_revision()
    if current == head:
        return
    if current is None:
        raise SchemaNotCurrent(
            "the database has no forge-ci schema yet; "
            "run `forge-ci db upgrade` (or `forge-ci init`)"
        )
    script = ScriptDirectory.from_config(_config())
    try:
        script.get_revision(current)
    except Exception:
        raise SchemaNotCurrent(
            f"the database schema ({current}) is newer than this forge-ci ({head}); "
            "upgrade forge-ci before starting it"
        ) from None
    raise SchemaNotCurrent(
        f"the database schema ({current}) is older than this forge-ci ({head}); "
        "run `forge-ci db upgrade`"
    )
