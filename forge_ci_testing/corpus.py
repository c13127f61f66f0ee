"""Where the third-party workflow corpus is: ``shared/corpus`` (see its README.md)."""

from __future__ import annotations

import os
from pathlib import Path


def corpus_root() -> Path | None:
    """``shared/corpus`` beside the checkout, or under ``$FORGE_CI_SHARED_DIR``; None if neither."""
    candidates = [Path(__file__).resolve().parents[1].parent / "shared" / "corpus"]
    shared = os.environ.get("FORGE_CI_SHARED_DIR")
    if shared:
        candidates.append(Path(shared) / "corpus")
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    return None
