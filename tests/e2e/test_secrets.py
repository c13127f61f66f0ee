"""Secrets end to end: a secret set with the real CLI, a pushed workflow whose step prints it
whole, split across upload chunks, as JSON and line by line, in a real job container; only
masks are stored (the log records and the database file), and a push of another branch gets
no secret (its workflow is refused with a diagnostic, no run)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import select

from forge_ci.models import PushEventWorkflow
from forge_ci_testing.forge import LINUX, Forge, workflow

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TOKEN = "e2e-nested-token-7f3a9c21"
VALUE = json.dumps({"token": TOKEN, "user": "publisher-bot"}, indent=2)  # several lines
#: Where the step cuts the value in two uploads (0.2 s batches, 2 s apart): inside the token.
CUT = VALUE.index(TOKEN) + 8
PRINTS = workflow(
    f"""\
  publish:
    runs-on: {LINUX}
    steps:
      - name: Print the secret four ways
        env:
          CREDENTIALS: ${{{{ secrets.MOONCAKES_TOKEN }}}}
        run: |
          test -n "$CREDENTIALS"
          echo "whole: $CREDENTIALS"
          printf 'split: %s' "${{CREDENTIALS:0:{CUT}}}"
          sleep 2
          printf '%s\\n' "${{CREDENTIALS:{CUT}}}"
          python3 -c 'import json,os;print("json:",json.dumps({{"c":os.environ["CREDENTIALS"]}}))'
          printf '%s\\n' "$CREDENTIALS" | while IFS= read -r line; do echo "line: $line"; done
          printf '%s' "$CREDENTIALS" | sha256sum | cut -c1-16
          echo "argv: $(tr '\\0' ' ' < /proc/$$/cmdline)"
"""
)


def test_a_pushed_workflow_prints_a_secret_and_only_masks_are_stored(
    live: Forge, tmp_path: Path
) -> None:
    import hashlib

    repository = live.repository("secrets")
    live.push(repository, {"README.md": "first\n"})  # the branch must exist to be allowed
    body = tmp_path / "credentials.json"
    body.write_text(VALUE)
    live.forge_ci(
        "secret",
        "set",
        "MOONCAKES_TOKEN",
        "--repo",
        repository,
        "--branch",
        "main",
        "--workflow",
        ".github/workflows/publish.yml",
        "--body-file",
        str(body),
        "--version",
        "0",
    )
    live.push(repository, {".github/workflows/publish.yml": PRINTS, "README.md": "first\n"})
    view = live.wait_run(repository)
    assert view.conclusion == "success", live.diagnose(repository, 1)
    log = live.logs(repository)["publish"]
    assert "whole: " in log and "split: " in log and "json: " in log and "line: " in log
    assert hashlib.sha256(VALUE.encode()).hexdigest()[:16] in log  # the step had the value
    for piece in (TOKEN, TOKEN[:8], VALUE, json.dumps(VALUE)[1:-1], "publisher-bot"):
        assert piece not in log, piece
    assert "***" in log
    # The value was never on a command line (the script file, not argv, holds no value).
    argv_line = next(line for line in log.splitlines() if line.startswith("argv: "))
    assert "***" not in argv_line and "e2e-nested" not in argv_line
    database = Path(live.settings.data_dir / "forge-ci.db")
    stored = b"".join(p.read_bytes() for p in (database, Path(f"{database}-wal")) if p.exists())
    assert TOKEN.encode() not in stored and b"publisher-bot" not in stored

    # Another branch: its push event records the refusal; no second run is created.
    client = live.git_client
    work = client.home / repository.replace("/", "-")
    client.git("push", "-q", client.url(f"{repository}.git"), "main:dev", cwd=work)
    assert live.database is not None

    def refused() -> str | None:
        assert live.database is not None
        with live.database.session() as session:
            rows = session.scalars(
                select(PushEventWorkflow).where(PushEventWorkflow.outcome == "failed")
            ).all()
            return next((r.detail for r in rows if "branch main, not dev" in r.detail), None)

    from forge_ci_testing.forge import wait_for

    detail = wait_for("the dev push to be refused", refused, 60, 0.2)
    assert "secret MOONCAKES_TOKEN" in detail
    assert live.run(repository, 2) is None
