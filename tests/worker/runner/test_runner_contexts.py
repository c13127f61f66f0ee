"""Contexts at run time, the default environment, the event file and the job token (issue #16).

The real runner against the real runner API (see conftest): what a step sees, and what the job
token may and may not do.
"""

from __future__ import annotations

import io
import json
import secrets
import tarfile

import pytest

from forge_ci import protocol
from forge_ci.protocol import (
    CompleteRequest,
    HeartbeatRequest,
    LogRequest,
    StartRequest,
    StepRequest,
    request_body,
)
from tests.worker.runner.conftest import CI, REPOSITORY, Forge, workflow
from worker.runner.client import UnixHTTPConnection

EXECUTION = "ab" * 16


def test_every_context_is_there_at_run_time(forge: Forge) -> None:
    lines = [
        "os=${{ runner.os }} temp=${{ endsWith(runner.temp, '/.tmp') }}",
        "name=${{ runner.name != '' }} debug=[${{ runner.debug }}]",
        "job=${{ job.status }} ${{ toJSON(job.container) }} ${{ toJSON(job.services) }}",
        "env=${{ env.ADDED }} ${{ env.STEP_VALUE }} ${{ env.WORKFLOW_VALUE }}",
        "steps=${{ steps.first.outputs.x }} ${{ toJSON(inputs) }} ${{ toJSON(vars) }}",
        "action=${{ github.action }} ${{ github.workspace != '' }}",
        "ref=${{ github.ref }} ${{ github.ref_name }} ${{ github.ref_type }}",
        "protected=${{ github.ref_protected }}",
        "who=${{ github.actor }} ${{ github.triggering_actor }} ${{ github.repository_owner }}",
        "workflow=${{ github.workflow }} ${{ github.workflow_ref }}",
        "event=${{ github.event_name }} ${{ github.event.workflow }}",
        "sender=${{ github.event.sender.login }}",
        "server=${{ github.server_url }} ${{ github.api_url }}",
        "ids=${{ github.run_id != '' }} ${{ github.run_attempt }}",
        "repository_id=${{ github.repository_id != '' }}",
        # Accepted as on GitHub: a name no shell can expand, a default variable the workflow
        # tried to set, a step id no earlier step has, the whole github context (token masked).
        "dash=$(printenv ruby-version) sha_kept=$(test $GITHUB_SHA != overridden && echo yes)",
        "missing=[${{ steps.nope.outputs.x }}]",
        "whole=${{ contains(toJSON(github), '\"token\": \"***\"') }} ${{ github.token != '***' }}",
    ]
    script = "".join(f'          echo "{line}"\n' for line in lines)
    steps = (
        "      - id: first\n"
        '        run: echo "x=out-1" >> "$GITHUB_OUTPUT"; echo "ADDED=a1" >> "$GITHUB_ENV"\n'
        "      - id: show\n"
        "        name: show ${{ runner.os }} ${{ github.job }}\n"
        "        working-directory: ${{ github.workspace }}/sub\n"
        "        env:\n          STEP_VALUE: step-${{ github.run_number }}\n"
        "          ruby-version: '3.3'\n          GITHUB_SHA: overridden\n"
        f"        run: |\n{script}          pwd\n"
        "      - id: defaulted\n        run: pwd\n"
    )
    extra = (
        "    env:\n      WORKFLOW_VALUE: job-level\n"
        "    defaults:\n      run:\n        working-directory: ${{ github.workspace }}/sub/\n"
    )
    claimed, finished = forge.run_job(workflow(steps, extra=extra), {"sub/keep": "x"})
    assert finished.returncode == 0, finished
    log = forge.log(claimed.attempt_id, "show", "stdout")
    origin = forge.settings.public_url.rstrip("/")
    for expected in [
        "os=Linux temp=true",
        "name=true debug=[]",
        "job=success {} {}",
        "env=a1 step-1 job-level",
        "steps=out-1 {} {}",
        "action=show true",
        "ref=refs/heads/main main branch",
        "protected=false",
        "who=alice alice alice",
        "workflow=CI alice/demo/.github/workflows/ci.yml@refs/heads/main",
        "event=workflow_dispatch .github/workflows/ci.yml",
        "sender=alice",
        f"server={origin} {origin}{protocol.API_PREFIX}",
        "ids=true 1",
        "repository_id=true",
        "dash=3.3 sha_kept=yes",
        "missing=[]",
        "whole=true true",
    ]:
        assert expected + "\n" in log, (expected, log)
    assert log.rstrip().endswith("/sub")
    assert forge.log(claimed.attempt_id, "defaulted", "stdout").rstrip().endswith("/sub")


EVENT_SCRIPT = (
    "import json, os\n"
    "e = json.load(open(os.environ['GITHUB_EVENT_PATH']))\n"
    "print('payload', e['ref'], e['workflow'], e['inputs'], e['repository']['full_name'])\n"
)


def test_the_default_environment_and_the_event_file(forge: Forge) -> None:
    steps = """\
      - id: env
        run: |
          env | sort
          python3 tools/event.py
"""
    claimed, finished = forge.run_job(workflow(steps), {"tools/event.py": EVENT_SCRIPT})
    assert finished.returncode == 0, finished
    log = forge.log(claimed.attempt_id, "env", "stdout")
    env = dict(line.split("=", 1) for line in log.splitlines() if "=" in line)
    sha = claimed.assignment["contexts"]["github"]["sha"]
    expected = {
        "GITHUB_ACTIONS": "true",
        "CI": "true",
        "GITHUB_EVENT_NAME": "workflow_dispatch",
        "GITHUB_REPOSITORY": "alice/demo",
        "GITHUB_REPOSITORY_OWNER": "alice",
        "GITHUB_SHA": sha,
        "GITHUB_REF": "refs/heads/main",
        "GITHUB_REF_NAME": "main",
        "GITHUB_REF_TYPE": "branch",
        "GITHUB_RUN_ATTEMPT": "1",
        "GITHUB_JOB": "build",
        "GITHUB_ACTOR": "alice",
        "GITHUB_SERVER_URL": forge.settings.public_url.rstrip("/"),
        "RUNNER_OS": "Linux",
    }
    assert {name: env.get(name) for name in expected} == expected
    for name in ("GITHUB_WORKSPACE", "GITHUB_EVENT_PATH", "GITHUB_RUN_ID", "GITHUB_RUN_NUMBER"):
        assert env.get(name), name
    assert env["RUNNER_ARCH"] in ("X64", "ARM64") and env["RUNNER_NAME"].startswith("forge-ci-")
    assert env["RUNNER_TEMP"].endswith("/.tmp")
    # The event file lies outside the workspace; the job token is not in the environment.
    assert not env["GITHUB_EVENT_PATH"].startswith(env["GITHUB_WORKSPACE"])
    assert "GITHUB_TOKEN" not in env
    assert "payload refs/heads/main .github/workflows/ci.yml {} alice/demo" in log


def _dispatch_with_inputs(forge: Forge, text: str, inputs: dict[str, str | bool]) -> None:
    """A workflow_dispatch run with ``inputs`` as the dispatch form stores them: typed in the
    ``inputs`` context, text in the payload (CONTEXTS-SEAM.md)."""
    from forge_ci.authz import Role
    from forge_ci.repos import find_repository
    from forge_ci.runs.create import creating_runs
    from forge_ci.runs.definition import define_run
    from forge_ci.runs.event_payload import EventFacts, RepositoryFacts, build_event_payload
    from forge_ci.workflow import parse_workflow

    sha = forge.commit({CI: text})
    with forge.database.session() as session:
        repository = find_repository(session, forge.alice, REPOSITORY, Role.READ)
        facts = EventFacts(
            RepositoryFacts.of(repository),
            "refs/heads/main",
            sha,
            "alice",
            inputs={k: str(v).lower() if isinstance(v, bool) else v for k, v in inputs.items()},
            workflow_path=CI,
        )
        definition = define_run(
            parse_workflow(text.encode(), CI),
            text.encode(),
            repository=REPOSITORY,
            sha=sha,
            ref="refs/heads/main",
            event_name="workflow_dispatch",
            event=build_event_payload("workflow_dispatch", facts),
            inputs=inputs,
        )
        with creating_runs(session, forge.settings, repository) as creation:
            creation.create(forge.alice, definition)


HOSTILE = '"; rm -rf / # $(id) `id`'


def test_untrusted_values_reach_the_script_as_data(forge: Forge) -> None:
    steps = """\
      - id: inject
        run: |
          echo "input=[${{ inputs.message }}]" "flag=${{ inputs.flag }}"
          echo "payload=[${{ github.event.inputs.message }}]" "${{ github.event.inputs.flag }}"
          echo "typed=${{ inputs.flag == true }} ${{ github.event.inputs.flag == 'true' }}"
          printf 'quoted=[%s]\\n' '${{ inputs.message }}'
          echo "sha=${{ github.sha }}"
"""
    _dispatch_with_inputs(forge, workflow(steps), {"message": HOSTILE, "flag": True})
    claimed = forge.claim()
    assert claimed.assignment["contexts"]["inputs"] == {"message": HOSTILE, "flag": True}
    finished = forge.finish(forge.start_runner(forge.envelope(claimed, forge.workspace())))
    assert finished.returncode == 0, finished
    log = forge.log(claimed.attempt_id, "inject", "stdout")
    assert f"input=[{HOSTILE}] flag=true" in log  # data: no command ran, nothing was cut
    assert f"payload=[{HOSTILE}] true" in log
    assert "typed=true true" in log
    assert "inputs" not in claimed.assignment["contexts"]["github"]
    assert "uid=" not in log
    # The one visible difference: single quotes do not expand the generated variable.
    assert "quoted=[${_FORGE_CI_EXPR_1}]" in log
    assert f"sha={claimed.assignment['contexts']['github']['sha']}" in log


# -- the job token -----------------------------------------------------------------------------


def _source(forge: Forge, attempt_id: int, token: str) -> tuple[int, bytes, dict[str, str]]:
    connection = UnixHTTPConnection(forge.socket_path, 10)
    try:
        connection.request(
            "POST",
            f"{protocol.API_PREFIX}/attempts/{attempt_id}/source.tar",
            body=json.dumps({"version": 1, "execution_id": secrets.token_hex(16)}).encode(),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        response = connection.getresponse()
        return response.status, response.read(), dict(response.getheaders())
    finally:
        connection.close()


def _start(forge: Forge, attempt_id: int, token: str) -> None:
    status, answer = forge.post(
        f"/attempts/{attempt_id}/start", {"version": 1, "execution_id": EXECUTION}, token
    )
    assert status == 200, answer


TWO_JOBS = (
    "name: CI\non: workflow_dispatch\njobs:\n"
    "  a:\n    runs-on: self-hosted\n    steps:\n      - run: echo a\n"
    "  b:\n    runs-on: self-hosted\n    steps:\n      - run: echo b\n"
)


@pytest.mark.parametrize("db_kind", ["sqlite", "postgres"])
def test_the_job_token_reads_its_own_source_while_the_attempt_runs(forge: Forge) -> None:
    forge.dispatch(TWO_JOBS, {"README.md": "hello\n"})
    first, second = forge.claim(), forge.claim()
    token = first.assignment["contexts"]["github"]["token"]
    assert len(token) == 64 and token != first.token
    assert token != second.assignment["contexts"]["github"]["token"]
    # Not yet started: refused.
    status, body, _ = _source(forge, first.attempt_id, token)
    assert status == 409, body
    _start(forge, first.attempt_id, first.token)
    _start(forge, second.attempt_id, second.token)
    status, body, headers = _source(forge, first.attempt_id, token)
    assert status == 200, body
    assert headers["X-Forge-CI-Commit"] == first.assignment["contexts"]["github"]["sha"]
    names = tarfile.open(fileobj=io.BytesIO(body)).getnames()
    assert "README.md" in names
    # Another attempt (so another run or repository too): refused as an unknown credential.
    status, body, _ = _source(forge, second.attempt_id, token)
    assert status == 401, body
    # Every write, and claims: refused.
    for endpoint, request in [
        ("start", StartRequest(EXECUTION)),
        ("heartbeat", HeartbeatRequest(EXECUTION)),
        ("steps", StepRequest(EXECUTION, "step_1", "running", "", -1, False)),
        ("logs", LogRequest(EXECUTION, 1, "step_1", "stdout", "x")),
        ("complete", CompleteRequest(EXECUTION, "success", 0)),
    ]:
        path = f"/attempts/{first.attempt_id}/{endpoint}"
        status, answer = forge.post(path, request_body(request), token)
        assert status == 401, (endpoint, status, answer)
        assert answer["error"]["code"] == "unauthenticated", answer
    status, answer = forge.post(
        "/claims",
        {
            "version": 1,
            "request_id": secrets.token_hex(16),
            "attempt_token": secrets.token_hex(32),
            "wait_seconds": 0,
        },
        token,
    )
    assert status == 401, answer
    # The attempt ends: the token is dead.
    status, answer = forge.post(
        f"/attempts/{first.attempt_id}/complete",
        request_body(CompleteRequest(EXECUTION, "success", 0)),
        first.token,
    )
    assert status == 200, answer
    status, body, _ = _source(forge, first.attempt_id, token)
    assert status == 409 and b"has ended" in body, body


def test_the_job_token_is_masked_and_given_only_when_named(forge: Forge) -> None:
    steps = """\
      - id: show
        env:
          FROM_SECRETS: ${{ secrets.GITHUB_TOKEN }}
        run: |
          echo "token=${{ github.token }}"
          echo "secret=$FROM_SECRETS"
          test "${{ github.token }}" = "$FROM_SECRETS" && echo same
"""
    claimed, finished = forge.run_job(workflow(steps))
    assert finished.returncode == 0, finished
    token = claimed.assignment["contexts"]["github"]["token"]
    log = forge.log(claimed.attempt_id, "show", "stdout")
    assert token not in log
    assert "token=***" in log and "secret=***" in log and "same" in log
