"""Secrets read by expressions (issue #16): ``with:`` inputs, env values with text around a secret
and run expressions, evaluated by the real runner from the values delivered to the running step;
masked in the stored log, never in the step's process but where the workflow put them."""

from __future__ import annotations

import hashlib

import pytest

from forge_ci.secrets.policy import SecretRefused
from tests.worker.runner.actions_world import ActionSpec, declare, install, node
from tests.worker.runner.conftest import Forge, workflow

SHOW = """\
const e = process.env;
const digest = (v) => require('crypto').createHash('sha256').update(v || '').digest('hex');
console.log(`token=${e.INPUT_TOKEN} key=${digest(e.INPUT_KEY)}`);
console.log(`holders=${Object.keys(e).filter((k) => k.startsWith('_FORGE_CI_')).join(',')}`);
"""


def test_with_env_and_run_expressions_read_delivered_secrets(
    forge: Forge, monkeypatch: pytest.MonkeyPatch
) -> None:
    pat, key = "pat-value-0a1b2c3d4e", "api-key-value-9f8e7d"
    forge.use_secrets({"PAT": pat, "API_KEY": key})
    install(
        forge,
        monkeypatch,
        {
            "show": ActionSpec(
                files={"main.js": SHOW},
                runs=node("main.js"),
                inputs={"token": declare(), "key": declare()},
            )
        },
        {
            "act": (
                "show",
                {
                    "token": "${{ secrets.PAT || secrets.GITHUB_TOKEN }}",
                    "key": "k-${{ secrets.API_KEY }}",
                },
            )
        },
    )
    # The placeholder's expressions make the plan hold the two secrets for this step.
    steps = """\
      - id: act
        env:
          USE: ${{ secrets.PAT }}-${{ secrets.API_KEY }}
        run: placeholder
      - id: script
        env:
          AUTH: Bearer ${{ secrets.API_KEY }}
        run: |
          printf '%s' "$AUTH" | sha256sum | cut -c1-64
          echo "fallback=${{ secrets.PAT && 'set' || 'unset' }}"
          env | grep -c '^_FORGE_CI_EXPR_SECRET_' || true
"""
    claimed, finished = forge.run_job(workflow(steps))
    attempt = claimed.attempt_id
    assert finished.returncode == 0, forge.log(attempt)
    shown = forge.log(attempt, "act", "stdout")
    expected_key = hashlib.sha256(f"k-{key}".encode()).hexdigest()
    assert f"token=*** key={expected_key}\n" in shown  # the value, masked when stored
    assert "holders=\n" in shown  # the holders never reach the process
    script = forge.log(attempt, "script", "stdout").splitlines()
    assert script == [hashlib.sha256(f"Bearer {key}".encode()).hexdigest(), "fallback=set", "0"]
    log = forge.log(attempt)
    assert pat not in log and key not in log


def test_a_run_reading_a_secret_it_may_not_have_is_refused_at_creation(forge: Forge) -> None:
    forge.use_secrets({"PAT": "x"})
    with pytest.raises(SecretRefused, match="secret NOPE does not exist"):
        forge.dispatch(workflow("      - run: echo ${{ secrets.PAT && secrets.NOPE || 'x' }}\n"))
