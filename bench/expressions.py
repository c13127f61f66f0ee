"""Time the expression package on real workflows: python bench/expressions.py [SHARED_DIR].

Extracts every ``${{ ... }}`` template from the 1,503 real-world workflow files of
``shared/corpus/actionlint-realworld`` (by line, which is close enough for timing) and reports
the cost of splitting and parsing them, plus parsing actionlint's 1,858 real expressions. The
workflow parser has 5 s for all 1,503 files; this shows the expressions' share of it.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from forge_ci.workflow.expressions import ExpressionError, parse_expression, split_template


def _timed(label: str, count: int, run: Callable[[], None], repeat: int = 5) -> None:
    """Print the best of ``repeat`` runs, per call."""
    best = min(_duration(run) for _ in range(repeat))
    each = best / max(count, 1) * 1e6
    print(f"{label}: {count} in {best * 1000:.1f} ms ({each:.1f} us each)")


def _duration(run: Callable[[], None]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def main() -> None:
    shared = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parents[1] / ".." / "shared"
    corpus = shared / "corpus"
    lines = [
        line.strip()
        for path in sorted((corpus / "actionlint-realworld" / "workflows").glob("*.y*ml"))
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines()
        if "${{" in line
    ]
    expressions = json.loads(
        (corpus / "actionlint" / "derived" / "realworld-expressions.json").read_text()
    )

    def split_all() -> None:
        for line in lines:
            try:
                split_template(line)
            except ExpressionError:
                pass

    def parse_all() -> None:
        for text in expressions:
            try:
                parse_expression(text)
            except ExpressionError:
                pass

    _timed("split_template over workflow lines", len(lines), split_all)
    _timed("parse_expression over real expressions", len(expressions), parse_all)


if __name__ == "__main__":
    main()
