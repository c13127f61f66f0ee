"""Helpers shared by the workflow engine tests (fixtures live in conftest.py)."""

from __future__ import annotations

import os
from pathlib import Path

from forge_ci.workflow import Diagnostic

#: The smallest valid workflow; tests change one thing in it.
MINIMAL = """\
on: push
jobs:
  build:
    runs-on: self-hosted
    steps:
      - run: echo hi
"""


def corpus_root() -> Path | None:
    """``shared/corpus`` beside the checkout, or under ``$FORGE_CI_SHARED_DIR``."""
    candidates = [Path(__file__).resolve().parents[2].parent / "shared" / "corpus"]
    shared = os.environ.get("FORGE_CI_SHARED_DIR")
    if shared:
        candidates.append(Path(shared) / "corpus")
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    return None


def messages(diagnostics: list[Diagnostic]) -> str:
    """All diagnostics, one a line, for ``in`` assertions with readable failures."""
    return "\n".join(f"{d.line}:{d.column}: {d.message}" for d in diagnostics)
