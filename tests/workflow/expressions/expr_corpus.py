"""Access to the external corpora (``shared/corpus``) for the expression tests.

The corpora live in the folder ``shared`` beside the repository checkout (or wherever
``FORGE_CI_SHARED_DIR`` points) and are never copied into the project. When they are missing a
test skips and says why; with ``FORGE_CI_REQUIRE_ALL=1`` (CI) the missing corpus is a failure.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest


def shared_dir() -> Path:
    """The ``shared`` folder: $FORGE_CI_SHARED_DIR, else the one beside the repository root."""
    configured = os.environ.get("FORGE_CI_SHARED_DIR")
    if configured:
        return Path(configured)
    return Path(__file__).resolve().parents[3] / ".." / "shared"


def corpus_path(relative: str) -> Path:
    """A path inside ``shared/corpus``."""
    return shared_dir() / "corpus" / relative


def load_corpus(relative: str) -> Any | None:
    """The parsed JSON file at ``shared/corpus/<relative>``, None when it is not there."""
    path = corpus_path(relative)
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def require_corpus(relative: str) -> Any:
    """Like :func:`load_corpus`, but skip the test (fail under FORGE_CI_REQUIRE_ALL) if absent."""
    data = load_corpus(relative)
    if data is None:
        reason = f"external corpus {corpus_path(relative)} is missing (set FORGE_CI_SHARED_DIR)"
        if os.environ.get("FORGE_CI_REQUIRE_ALL") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return data
