"""Starting the serialized write transactions that run use cases need.

SQLite allows one writer at a time, and a transaction that read before it writes can be refused
when another writer committed in between; ``BEGIN IMMEDIATE`` (:func:`forge_ci.db.begin_write`)
takes the write lock up front instead. Run use cases first read (look up and authorize), then
call :func:`begin_serialized`, which ends that read-only transaction and starts a writer; they
recheck what they read inside it.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from forge_ci.db import begin_write


def begin_serialized(session: Session) -> None:
    """End the session's current transaction (committing it) and begin a serialized writer.

    Raises RuntimeError when the session holds changes it has not flushed: a use case must not
    commit somebody else's half-made changes by surprise.
    """
    if session.new or session.dirty or session.deleted:
        raise RuntimeError("the session has unflushed changes; commit or roll them back first")
    if session.in_transaction():
        session.commit()
    begin_write(session)
