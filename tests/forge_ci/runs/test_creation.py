"""Run creation under concurrency, and failures between the pin and the commit."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from sqlalchemy import func, select

from forge_ci.models import Job, JobDependency, Run, RunSequence
from forge_ci.runs import create
from forge_ci.runs.dispatch import dispatch_run
from forge_ci.runs.pins import PIN_PREFIX
from tests.forge_ci.runs.conftest import CI, Forge, job, workflow

PIPELINE = workflow(job("build") + job("test", needs="build"))


def _pins(forge: Forge) -> list[str]:
    return [name for name in forge.git().references if name.startswith(PIN_PREFIX)]


def test_twenty_concurrent_creations_get_numbers_1_to_20(forge: Forge) -> None:
    forge.commit({CI: PIPELINE})
    numbers: list[int] = []
    errors: list[BaseException] = []
    start = threading.Barrier(20)

    def dispatch_one() -> None:
        session = forge.database.sessions()
        try:
            start.wait()
            run = dispatch_run(session, forge.settings, forge.alice, "alice/demo", "main", CI)
            numbers.append(run.number)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)
        finally:
            session.close()

    threads = [threading.Thread(target=dispatch_one) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    assert sorted(numbers) == list(range(1, 21))
    stored = forge.session.scalars(select(Run.number).order_by(Run.number)).all()
    assert stored == list(range(1, 21))
    assert len(set(forge.session.scalars(select(Run.pin_ref)))) == 20
    assert len(_pins(forge)) == 20
    assert forge.session.scalar(select(RunSequence.last_number)) == 20


@pytest.mark.parametrize("where", ["insert_jobs", "admit_run", "commit"])
def test_a_failure_after_the_pin_leaves_no_rows_and_no_pin_unless_the_commit_failed(
    forge: Forge, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """A failing COMMIT may have committed (its answer was lost), so it keeps the pin: an
    orphan pin is harmless, a committed run whose pin is gone could lose its commit."""
    forge.commit({CI: PIPELINE})
    pins_seen: list[list[str]] = []

    def explode(*args: Any, **kwargs: Any) -> None:
        pins_seen.append(_pins(forge))
        raise RuntimeError(f"injected failure in {where}")

    if where == "commit":
        session_class = type(forge.session)
        real_commit = session_class.commit

        def commit_fails_once_pinned(self: Any) -> None:
            if _pins(forge):
                explode()
            real_commit(self)

        monkeypatch.setattr(session_class, "commit", commit_fails_once_pinned)
    else:
        monkeypatch.setattr(create, where, explode)
    with pytest.raises(RuntimeError, match="injected failure"):
        forge.dispatch()
    monkeypatch.undo()
    # The pin existed when the failure struck; every row is gone.
    assert len(pins_seen[0]) == 1
    orphans = pins_seen[0] if where == "commit" else []
    assert _pins(forge) == orphans
    for model in (Run, Job, JobDependency):
        assert forge.session.scalar(select(func.count()).select_from(model)) == 0
    # The number was given back: the next run is #1.
    run = forge.dispatch()
    assert run.number == 1
    assert sorted(_pins(forge)) == sorted([run.pin_ref, *orphans])
