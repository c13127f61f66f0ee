"""Change counters for what a run page shows: ``revision`` on runs, jobs, attempts and steps.

A flush that changes a shown column of one of these rows adds one to its ``revision`` in the
same UPDATE (``revision = revision + 1``: concurrent writers never lose a count, and no other row
is locked); an insert starts at 1. The sum of a run's revisions and row counts therefore grows
with every change a reader could see, which makes a cheap change token
(:func:`forge_ci.runs.changes.change_token`). Columns that change while nothing shown
changes (lease renewals, log counters) are *quiet*: a heartbeat or a log chunk does not make
every viewer reload the run.

Bulk ``update()`` statements bypass the ORM and this counter: code that writes these tables
that way must set ``revision=Model.revision + 1`` itself.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import event
from sqlalchemy import inspect as inspect_instance
from sqlalchemy.orm import Mapper


def count_changes(model: Any, quiet: frozenset[str] = frozenset()) -> None:
    """Bump ``model.revision`` on every UPDATE that changes a column not in ``quiet``.

    Called from the model's ``__declare_last__`` (once, when the mappers are configured).
    """
    watched = [
        attribute.key
        for attribute in inspect_instance(model).column_attrs
        if attribute.key not in quiet and attribute.key != "revision"
    ]

    def bump(mapper: Mapper[Any], connection: Any, target: Any) -> None:
        state = inspect_instance(target)
        if any(state.attrs[key].history.has_changes() for key in watched):
            target.revision = model.revision + 1

    event.listen(model, "before_update", bump)
