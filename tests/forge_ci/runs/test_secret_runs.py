"""Run creation and secrets: a run that may not receive a secret it references is refused (a
dispatch with 400, a push event with a diagnostic on that workflow while the others still run)."""

from __future__ import annotations

import pytest

from forge_ci.secrets.policy import SecretRefused
from forge_ci.secrets.store import set_secret
from tests.forge_ci.runs.conftest import Forge
from tests.forge_ci.runs.test_events import WF, _enable, _event, _outcomes, _process, _runs

USES = """\
on:
  push:
  workflow_dispatch:
jobs:
  publish:
    runs-on: [self-hosted, linux]
    steps:
      - env:
          TOKEN: ${{ secrets.Deploy_Token }}
        run: test -n "$TOKEN"
"""
VALUE = "run-creation-secret-value"
PLAIN = (
    "on: push\njobs:\n  build:\n    runs-on: [self-hosted, linux]\n    steps:\n      - run: make\n"
)


def _store(forge: Forge, branch: str = "main", workflow: str = WF + "uses.yml") -> None:
    set_secret(
        forge.session,
        forge.settings,
        forge.alice,
        "alice/demo",
        "DEPLOY_TOKEN",
        branch=branch,
        workflow_path=workflow,
        value="v",
        version="0",
    )
    forge.session.commit()


def test_a_push_records_the_refusal_on_that_workflow_and_runs_the_others(forge: Forge) -> None:
    _enable(forge)
    sha = forge.commit({WF + "uses.yml": USES, WF + "plain.yml": PLAIN})
    event = _event(forge, sha)
    _process(forge, event)
    outcomes = _outcomes(forge, event)
    assert outcomes["plain.yml"][0] == "run_created"
    assert outcomes["uses.yml"][:1] == ("failed",)
    assert "secret DEPLOY_TOKEN does not exist" in outcomes["uses.yml"][1]
    assert _runs(forge) == 1

    _store(forge, workflow=WF + "plain.yml")  # exists now, but for another workflow
    sha = forge.commit({"README": "again"})
    event = _event(forge, sha)
    _process(forge, event)
    assert (
        "may only be used by .github/workflows/plain.yml" in _outcomes(forge, event)["uses.yml"][1]
    )


def test_a_push_to_another_branch_gets_no_secret(forge: Forge) -> None:
    _enable(forge)
    main = forge.commit({WF + "uses.yml": USES})
    _store(forge)
    sha = forge.commit({"README": "dev"}, branch="dev", parent=main)
    event = _event(forge, sha, ref="refs/heads/dev")
    _process(forge, event)
    outcome = _outcomes(forge, event)["uses.yml"]
    assert outcome[0] == "failed" and "only be used on branch main, not dev" in outcome[1]
    sha = forge.commit({"README": "main"})
    event = _event(forge, sha)
    _process(forge, event)
    assert _outcomes(forge, event)["uses.yml"][0] == "run_created"


def test_a_dispatch_is_refused_with_400_naming_the_secret(forge: Forge) -> None:
    forge.commit({WF + "uses.yml": USES})
    with pytest.raises(SecretRefused, match="secret DEPLOY_TOKEN does not exist") as info:
        forge.dispatch(path=WF + "uses.yml")
    assert info.value.http_status == 400
    forge.session.rollback()
    _store(forge)
    run = forge.dispatch(path=WF + "uses.yml")
    assert run.plan["jobs"][0]["steps"][0]["env"]["TOKEN"] == {"secret": "DEPLOY_TOKEN"}
    assert VALUE not in str(run.plan) and VALUE not in str(run.context)  # names only


def test_a_rerun_uses_the_current_secrets(forge: Forge) -> None:
    from forge_ci.runs.cancel import cancel_run
    from forge_ci.runs.rerun import rerun_run
    from forge_ci.secrets.rules import SECRET
    from forge_ci.secrets.store import delete_entry

    forge.commit({WF + "uses.yml": USES})
    _store(forge)
    run = forge.dispatch(path=WF + "uses.yml")
    forge.session.commit()
    cancel_run(forge.session, forge.alice, "alice/demo", run.number)
    forge.session.commit()
    delete_entry(forge.session, forge.alice, SECRET, "alice/demo", "DEPLOY_TOKEN", "1")
    forge.session.commit()
    with pytest.raises(SecretRefused, match="secret DEPLOY_TOKEN does not exist"):
        rerun_run(forge.session, forge.settings, forge.alice, "alice/demo", run.number)
