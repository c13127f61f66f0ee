"""Plain-text and JSON renderings shared by the operator CLI and the SSH-side commands.

Both front doors print the same ``--json`` documents and the same tables, so a script written
against ``forge-ci run list --json`` reads ``ssh git@HOST run list --json`` unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any


def json_text(value: Any) -> str:
    """``value`` as indented JSON with a stable key order, ending in a newline."""
    return json.dumps(value, indent=2, sort_keys=True, default=str) + "\n"


def table_lines(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> list[str]:
    """Rows as aligned text columns under an upper-case header; ``(none)`` for no rows."""
    if not rows:
        return ["(none)"]
    widths = {c: max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in columns}
    lines = ["  ".join(c.upper().ljust(widths[c]) for c in columns).rstrip()]
    for row in rows:
        lines.append("  ".join(str(row.get(c, "")).ljust(widths[c]) for c in columns).rstrip())
    return lines
