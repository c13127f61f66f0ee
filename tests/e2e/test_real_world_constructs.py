"""Constructs real-world workflows use (issue #16), end to end in one Docker job: a checkout with
an ``if``, a ``ref`` expression and ``submodules`` (a notice), ``hashFiles()`` over the checked-out
files, a secret inside an env value and inside a run expression (masked), and GitHub's
``python`` shell and a ``bash ... {0}`` template."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from forge_ci_testing.forge import LINUX, Forge, workflow

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TOKEN = "e2e-real-world-token-5d2c"
CI = workflow(
    f"""\
  build:
    runs-on: {LINUX}
    steps:
      - uses: actions/checkout@v4
        if: github.event_name == 'push'
        with:
          ref: ${{{{ github.event.pull_request.head.sha || github.ref }}}}
          submodules: recursive
      - id: key
        env:
          KEY: deps-${{{{ hashFiles('**/requirements*.txt', '!vendor/**') }}}}
          AUTH: Bearer ${{{{ secrets.DEPLOY_TOKEN }}}}
        run: |
          echo "key=$KEY"
          echo "auth=$AUTH"
          printf '%s' "$AUTH" | sha256sum | cut -c1-64
          echo "set=${{{{ secrets.DEPLOY_TOKEN && 'yes' || 'no' }}}}"
      - shell: python
        run: |
          import pathlib
          print("python sees", pathlib.Path("requirements.txt").read_text().strip())
      - shell: bash --noprofile --norc -eo pipefail {{0}}
        run: echo "template shell ${{{{ runner.os }}}}"
"""
)


def test_real_world_constructs_work_in_a_docker_job(live: Forge, tmp_path: Path) -> None:
    repository = live.repository("real-world")
    files = {"README.md": "x\n", "requirements.txt": "flask\n", "vendor/requirements.txt": "rq\n"}
    live.push(repository, files)  # the branch must exist for the secret
    body = tmp_path / "token"
    body.write_text(TOKEN)
    live.forge_ci(
        "secret", "set", "DEPLOY_TOKEN", "--repo", repository, "--branch", "main",
        "--workflow", ".github/workflows/ci.yml", "--body-file", str(body), "--version", "0",
    )  # fmt: skip
    live.push(repository, {**files, ".github/workflows/ci.yml": CI})

    view = live.wait_run(repository)

    assert view.conclusion == "success", live.diagnose(repository, 1)
    log = live.logs(repository)["build"]
    digest = hashlib.sha256(hashlib.sha256(b"flask\n").digest()).hexdigest()
    assert f"key=deps-{digest}" in log  # vendor/ excluded
    assert "auth=Bearer ***" in log and TOKEN not in log
    assert hashlib.sha256(f"Bearer {TOKEN}".encode()).hexdigest() in log
    assert "set=yes" in log
    assert "python sees flask" in log
    assert "template shell Linux" in log
