"""Helpers shared by the workflow engine tests (fixtures live in conftest.py)."""

from __future__ import annotations

from collections.abc import Callable

from forge_ci.workflow import Diagnostic, Workflow

Accept = Callable[[str], Workflow]
Refuse = Callable[[str | bytes], list[Diagnostic]]

#: One job, for tests that vary only ``on``.
JOBS = """
jobs:
  build:
    runs-on: self-hosted
    steps:
      - run: echo hi
"""

#: The smallest valid workflow; tests change one thing in it.
MINIMAL = """\
on: push
jobs:
  build:
    runs-on: self-hosted
    steps:
      - run: echo hi
"""


def messages(diagnostics: list[Diagnostic]) -> str:
    """All diagnostics, one a line, for ``in`` assertions with readable failures."""
    return "\n".join(f"{d.line}:{d.column}: {d.message}" for d in diagnostics)
