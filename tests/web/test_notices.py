"""Notices on the pages: what a workflow asks for that forge-ci accepts and does not do.

The pipelines page lists a file's notices with its push outcome (an inert file says so in one
line), and the run page lists the run's notices, each job's environment with "protection rules
are not enforced", and that no provider runs a Windows job while its Linux leg runs.
"""

from __future__ import annotations

from tests.web.scenario import CI, Pipelines

PAGE = "/olivia/app/pipelines"
MIXED = """\
name: Mixed
on: [push, workflow_dispatch, release]
permissions:
  id-token: write
jobs:
  test:
    strategy:
      matrix:
        os: [ubuntu-latest, windows-latest]
    runs-on: ${{ matrix.os }}
    environment:
      name: staging
      url: javascript:alert(1)
    steps:
      - run: make test
"""
INERT = "on:\n  release:\njobs:\n  a:\n    runs-on: [self-hosted]\n    steps:\n      - run: x\n"


def test_the_pipelines_page_lists_notices_and_inert_files(
    as_person,  # type: ignore[no-untyped-def]
    pipelines: Pipelines,
) -> None:
    as_person("olivia").post(PAGE + "/push-workflows", {"enabled": "on"})
    pipelines.push({CI: MIXED, ".github/workflows/inert.yml": INERT})
    body = as_person("rita").get(PAGE).get_data(as_text=True)
    assert "inert: release never fires on forge-ci" in body
    assert 'class="diagnostics notices"' in body
    assert '<span class="kind">notice</span> <span class="where">line 2:' in body
    assert "this workflow asked for id-token: write; forge-ci grants no such token" in body
    # An invalid file's problems are not labelled as notices.
    broken = "on: push\njobs:\n  a:\n    runs-on: [self-hosted, linux]\n    stepz: []\n"
    pipelines.push({".github/workflows/inert.yml": broken, CI: MIXED, "x": "1"})
    body = as_person("rita").get(PAGE).get_data(as_text=True)
    assert 'class="diagnostics"' in body and "outcome-invalid" in body


def test_the_run_page_shows_notices_environments_and_the_missing_windows_provider(
    as_person,  # type: ignore[no-untyped-def]
    pipelines: Pipelines,
) -> None:
    pipelines.add_provider()
    number = pipelines.dispatch(MIXED)
    body = as_person("rita").get(f"{PAGE}/{number}").get_data(as_text=True)
    assert 'class="diagnostics notices run-notices"' in body
    assert "release never fires on forge-ci" in body
    assert "this workflow asked for id-token: write; forge-ci grants no such token" in body
    assert "environment <code>staging</code>" in body
    assert body.count("protection rules are not enforced") >= 2  # each job, and the notice
    # A url that is not http(s) is shown as text, never as a link.
    assert 'href="javascript:' not in body and "<code>javascript:alert(1)</code>" in body
    assert "No provider with the labels windows-latest exists" in body
    assert "selects Windows or macOS" in body
