"""Every corpus file's diagnostics as a JSON-ready mapping, the record ``test_corpus_errors`` reads.

``corpus_errors_before.json`` beside this module was written by running this module on main at
commit 513e5a4 (before errors were reported in one pass), so that the test can show that no error
the parser reported then is lost now, and which errors were hidden then::

    .venv/bin/python tests/workflow/corpus_errors.py ../shared/corpus tests/workflow/data/x.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from forge_ci.workflow import WorkflowInvalid, parse_workflow

#: The corpus folders whose workflow files are compared (those test_corpus walks).
FOLDERS = (
    "actionlint-realworld/workflows",
    "starter-workflows",
    "actionlint/testdata",
    "schemastore-github-workflow/src",
    "actions-languageservices/derived/reader-workflows",
)


def corpus_errors(root: Path) -> dict[str, list[str]]:
    """``{path relative to root: ["line:column: message", ...]}``; ``[]`` for accepted files."""
    return {path: errors for path, (errors, _) in corpus_diagnostics(root).items()}


def corpus_diagnostics(root: Path) -> dict[str, tuple[list[str], list[str]]]:
    """Each file's errors and notices (notices are found for refused files too)."""
    found: dict[str, tuple[list[str], list[str]]] = {}
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*")):
            if path.suffix not in (".yml", ".yaml"):
                continue
            try:
                workflow = parse_workflow(path.read_bytes(), path.name)
            except WorkflowInvalid as exc:
                errors = [f"{d.line}:{d.column}: {d.message}" for d in exc.diagnostics]
                notices = exc.notices
            else:
                errors = []
                notices = workflow.notices
            listed = [f"{d.line}:{d.column}: {d.message}" for d in notices]
            found[path.relative_to(root).as_posix()] = (errors, listed)
    return found


if __name__ == "__main__":
    corpus, target = Path(sys.argv[1]), Path(sys.argv[2])
    record = corpus_errors(corpus)
    target.write_text(json.dumps(record, indent=1, ensure_ascii=False, sort_keys=True) + "\n")
    print(f"{len(record)} files, {sum(len(v) for v in record.values())} errors -> {target}")
