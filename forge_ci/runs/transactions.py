"""Starting the serialized write transactions that run use cases need.

SQLite allows one writer at a time, and a transaction that read before it writes can be refused
when another writer committed in between; ``BEGIN IMMEDIATE`` (:func:`forge_ci.db.begin_write`)
takes the write lock up front instead. Run use cases first read (look up and authorize), then
call :func:`begin_serialized`, which ends that transaction and starts a writer; they recheck what
they read inside it.

Lock order: the repository lock (:mod:`forge_ci.locks`) before the database's write lock, never
the other way round. A push holds its repository lock while its hooks write to the database, so
a transaction that held the write lock while it waited for the repository lock would stall both
until a timeout. Use cases that take the repository lock call :func:`end_transaction` first.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from forge_ci.db import begin_read, begin_write


def end_transaction(session: Session) -> None:
    """End the session's current transaction (committing it), if it has one.

    Raises RuntimeError when the session holds changes it has not flushed: a use case must not
    commit somebody else's half-made changes by surprise.
    """
    if session.new or session.dirty or session.deleted:
        raise RuntimeError("the session has unflushed changes; commit or roll them back first")
    if session.in_transaction():
        session.commit()


def begin_reading(session: Session) -> None:
    """End the session's current transaction (see :func:`end_transaction`), begin a reader."""
    end_transaction(session)
    begin_read(session)


def begin_serialized(session: Session) -> None:
    """End the session's current transaction (see :func:`end_transaction`), begin a writer."""
    end_transaction(session)
    begin_write(session)
