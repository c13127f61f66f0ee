"""The dependency graph's layout and escaping."""

from __future__ import annotations

from datetime import UTC, datetime

from forge_ci.runs.details import JobDetail
from web.graph import NODE_WIDTH, _columns, dependency_graph

NOW = datetime(2030, 1, 1, tzinfo=UTC)


def job(job_id: int, name: str, needs: tuple[int, ...] = (), state: str = "queued") -> JobDetail:
    return JobDetail(
        id=job_id,
        key=name,
        job_id=name,
        name=name,
        state=state,
        conclusion=None,
        status_reason=None,
        needs=needs,
        runs_on=("self-hosted", "linux"),
        cancel_requested=False,
        reused=False,
        created_at=NOW,
        queued_at=None,
        started_at=None,
        completed_at=None,
        attempts=(),
        planned_steps=(),
    )


def test_columns_follow_the_longest_chain_of_needs() -> None:
    jobs = [job(1, "lint"), job(2, "build"), job(3, "test", (2,)), job(4, "deploy", (3, 1))]
    columns = [[j.name for j in column] for column in _columns(jobs)]
    # lint is needed only by deploy: it sits just before it, beside test.
    assert columns == [["build"], ["test", "lint"], ["deploy"]]


def test_independent_jobs_stay_in_the_first_column() -> None:
    jobs = [job(1, "a"), job(2, "b"), job(3, "c", (1,))]
    columns = [[j.name for j in column] for column in _columns(jobs)]
    assert columns == [["a", "b"], ["c"]]


def test_every_edge_points_right_and_names_are_escaped() -> None:
    jobs = [job(1, "<b>&build</b>"), job(2, "test", (1,))]
    svg = str(dependency_graph(jobs, lambda j: f"/x?job={j.id}&a=<1>"))
    assert "&lt;b&gt;&amp;build&lt;/b&gt;" in svg and "<b>" not in svg
    assert 'href="/x?job=1&amp;a=&lt;1&gt;"' in svg
    assert f"M{8 + NODE_WIDTH}," in svg  # the edge leaves build's right side
    assert svg.count('class="edge"') == 1


def test_long_names_are_shortened_but_kept_whole_in_the_title() -> None:
    name = "a-very-long-job-name-that-does-not-fit"
    svg = str(dependency_graph([job(1, name)], lambda j: "#"))
    assert f"<title>{name}: queued</title>" in svg
    assert "a-very-long-job-name…" in svg


def test_no_jobs_no_graph() -> None:
    assert str(dependency_graph([], lambda j: "#")) == ""
