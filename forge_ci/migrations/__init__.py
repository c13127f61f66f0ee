"""Alembic migrations owned by the core, run with ``forge-ci db upgrade``.

Revisions live in ``versions/``; every schema change is a new revision (never edit a released
one). :func:`check_schema` is what each process calls at start to refuse an unmigrated or newer
database with the command that fixes it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from sqlalchemy import Engine, inspect, text

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


#: ``revision = "..."`` and ``down_revision = ...`` as each file in ``versions/`` writes them.
_REVISION_LINE = re.compile(r"^(revision|down_revision)\s*(?::[^=\n]*)?=\s*(.+?)\s*$", re.MULTILINE)


def _head_from_files() -> str | None:
    """The one head of ``versions/``, read from the files' text; ``None`` when unsure.

    Importing alembic (and the revision files, which it loads as modules) is most of the
    start-up of a command that reads the database (0.2 s of ``forge-ci user list``), only to
    find that the database is current, as it nearly always is.
    """
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in (HERE / "versions").glob("*.py"):
        found = dict(_REVISION_LINE.findall(path.read_text(encoding="utf-8")))
        try:
            revision = ast.literal_eval(found["revision"])
            down = ast.literal_eval(found["down_revision"])
        except (KeyError, ValueError, SyntaxError):
            return None
        if not isinstance(revision, str):
            return None
        revisions.add(revision)
        parents.update(down if isinstance(down, tuple | list) else [down] if down else [])
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None


def _stamped_at(engine: Engine, head: str) -> bool:
    """Whether the database's one stamped revision is ``head`` (plain SQL, no alembic)."""
    with engine.connect() as conn:
        if not inspect(conn).has_table("alembic_version"):
            return False
        rows = conn.execute(text("SELECT version_num FROM alembic_version")).all()
    return [row[0] for row in rows] == [head]


def check_schema(engine: Engine) -> None:
    """Raise SchemaNotCurrent unless the database is at the head revision.

    A current database is recognised without alembic (:func:`_head_from_files`); anything
    else takes alembic's own reading, which words the refusal.
    """
    head = _head_from_files()
    if head is not None and _stamped_at(engine, head):
        return
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
