"""Annotations and step summaries on the run and job pages: masked, escaped, per job."""

from __future__ import annotations

from forge_ci.protocol import Annotation, LogRequest, StepRequest
from tests.web.scenario import Pipelines, StandardRun

RUN = "/olivia/app/pipelines/1"
SECRET = "sekrit-from-add-mask"


def _report(standard: StandardRun) -> str:
    """The lint job: a mask arrives with a log chunk, then its step ends with reports."""
    lint = standard.lint
    step = lint.assignment.steps[0].id
    lint.sequence += 1
    lint.coordinator.log(
        lint.token,
        lint.attempt_id,
        LogRequest(lint.execution_id, lint.sequence, step, "stdout", "masked now\n", [SECRET]),
    )
    annotations = [
        Annotation("error", f"bad <b>thing</b> {SECRET}", "src/app.py", "Lint", 12, 0, 4, 0),
        Annotation("notice", "just so you know"),
    ]
    lint.coordinator.step(
        lint.token,
        lint.attempt_id,
        StepRequest(
            lint.execution_id,
            step,
            "completed",
            "failure",
            1,
            False,
            annotations,
            f"## Result\n<script>alert(1)</script> {SECRET}\n",
        ),
    )
    return step


def test_the_run_page_shows_annotations_and_summaries_as_text(
    as_person,  # type: ignore[no-untyped-def]
    standard: StandardRun,
) -> None:
    _report(standard)
    body = as_person("rita").get(RUN).get_data(as_text=True)
    assert 'class="annotation level-error"' in body
    assert "<code>src/app.py:12:4</code>" in body and "Lint" in body
    assert "bad &lt;b&gt;thing&lt;/b&gt;" in body and "<b>thing" not in body
    assert "just so you know" in body
    assert "## Result\n&lt;script&gt;alert(1)&lt;/script&gt;" in body
    assert "<script>alert(1)" not in body
    assert SECRET not in body  # masked by the server before it was stored


def test_the_job_page_shows_only_its_own_reports(
    as_person,  # type: ignore[no-untyped-def]
    standard: StandardRun,
    pipelines: Pipelines,
) -> None:
    _report(standard)
    reader = as_person("rita")
    lint = reader.get(f"{RUN}/jobs/{standard.jobs['lint']}").get_data(as_text=True)
    assert "just so you know" in lint and "## Result" in lint
    build = reader.get(f"{RUN}/jobs/{standard.jobs['build']}").get_data(as_text=True)
    assert "just so you know" not in build and "## Result" not in build
    assert 'class="card annotations"' not in build


def test_a_run_without_reports_shows_no_report_sections(
    as_person,  # type: ignore[no-untyped-def]
    standard: StandardRun,
) -> None:
    body = as_person("rita").get(RUN).get_data(as_text=True)
    assert "Annotations" not in body and "Step summaries" not in body
