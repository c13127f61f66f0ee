"""After a lost job, the page says its output was lost (issue #14, finding 13).

Before: the log showed what had arrived as if it were all, and nothing said the rest was gone.
"""

from __future__ import annotations

from datetime import timedelta

from forge_ci.coordinator.sweeper import sweep
from forge_ci.db import Database
from forge_ci.models import utcnow
from tests.web.scenario import StandardRun
from web.views.runs import LOST_OUTPUT

RUN = "/olivia/app/pipelines/1"


def test_a_lost_attempt_says_its_output_was_lost(
    as_person,
    database: Database,
    standard: StandardRun,  # type: ignore[no-untyped-def]
) -> None:
    rita = as_person("rita")
    lint = f"{RUN}/jobs/{standard.jobs['lint']}"
    assert LOST_OUTPUT not in rita.get(lint).get_data(as_text=True)  # still running
    with database.session() as session:  # its provider stops answering: the lease runs out
        sweep(session, utcnow() + timedelta(hours=1))
        session.commit()
    body = rita.get(lint).get_data(as_text=True)
    assert LOST_OUTPUT in body
    assert "error: line too long" in body  # what did arrive is still shown
    # A job that completed says no such thing.
    build = rita.get(f"{RUN}/jobs/{standard.jobs['build']}").get_data(as_text=True)
    assert LOST_OUTPUT not in build
