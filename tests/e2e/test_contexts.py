"""Contexts and injection-safe scripts end to end: a real SSH push of a hostile branch name and
commit message, the job in a Docker container, the values arriving as data (issue #16)."""

from __future__ import annotations

import pytest

from forge_ci_testing.forge import LINUX, Forge, workflow

pytestmark = [pytest.mark.docker, pytest.mark.slow]

BRANCH = 'x";$(id);rm-rf;#'
MESSAGE = 'fix "; rm -rf / # and $(id) and `id`'
CHECK_EVENT = (
    "import json, os\n"
    "e = json.load(open(os.environ['GITHUB_EVENT_PATH']))\n"
    "same = e['head_commit']['message'].strip() == os.environ['MESSAGE'].strip()\n"
    "print('event-message-ok', same)\n"
    "print('event-created', e['created'], e['forced'], len(e['commits']), e['pusher']['name'])\n"
)
INJECT = workflow(
    f"""\
  inject:
    runs-on: {LINUX}
    steps:
      - id: show
        env:
          MESSAGE: ${{{{ github.event.head_commit.message }}}}
        run: |
          echo "branch=[${{{{ github.ref_name }}}}]"
          echo "message=[${{{{ github.event.head_commit.message }}}}]"
          printf 'quoted=[%s]\\n' '${{{{ github.ref_name }}}}'
          echo "defaults=$GITHUB_ACTIONS $CI $GITHUB_EVENT_NAME $GITHUB_REF_TYPE $RUNNER_OS"
          echo "ref-env=[$GITHUB_REF_NAME]"
          echo "server=$GITHUB_SERVER_URL"
          echo "token=${{{{ github.token }}}}"
          python3 check_event.py
"""
)


def test_a_hostile_branch_and_commit_message_are_data(live: Forge) -> None:
    repository = live.repository("inject")
    sha = live.push(
        repository,
        {".github/workflows/ci.yml": INJECT, "check_event.py": CHECK_EVENT},
        branch=BRANCH,
        message=MESSAGE,
    )
    view = live.wait_run(repository)
    assert view.conclusion == "success", live.diagnose(repository, 1)
    log = live.logs(repository)["inject"]
    assert f"Checked out {sha}" in log
    assert f"branch=[{BRANCH}]" in log
    assert f"message=[{MESSAGE}" in log
    assert "uid=" not in log  # neither $(id) nor `id` ran
    # The one visible difference: single quotes do not expand the generated variable.
    assert "quoted=[${_FORGE_CI_EXPR_1}]" in log
    assert "defaults=true true push branch Linux" in log
    assert f"ref-env=[{BRANCH}]" in log
    assert f"server={live.settings.public_url.rstrip('/')}" in log
    assert "token=***" in log  # the job token is masked like every secret
    assert "event-message-ok True" in log
    assert "event-created True False 1 alice" in log
