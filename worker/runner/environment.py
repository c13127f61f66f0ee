"""The environment of a step, built from scratch: nothing is inherited from the runner.

Layers, later ones win::

    fixed       PATH (GITHUB_PATH additions first), HOME=<workspace>/.home,
                TMPDIR=RUNNER_TEMP=<workspace>/.tmp, LANG=C.UTF-8, CI=true, FORGE_CI=true,
                GITHUB_ACTIONS=true, RUNNER_OS=Linux, RUNNER_ARCH, RUNNER_NAME,
                RUNNER_TOOL_CACHE=/opt/hostedtoolcache (the image's tool cache),
                GITHUB_EVENT_PATH (the event payload)
    run         GITHUB_* and FORGE_CI_* facts of the run, job, attempt and step, and the
                GITHUB_ENV / GITHUB_PATH / GITHUB_OUTPUT files of this step
    job         what earlier steps wrote to GITHUB_ENV
    step        the plan's env of the step (workflow < job < step, merged when planned)
    secrets     values delivered for this step only, for its ``{"secret": NAME}`` entries
                (not the ``_FORGE_CI_EXPR_SECRET_*`` holders: those are for its expressions)

The attempt credential, the API socket and the provider's settings are never in it. A reserved
name in the plan's env is refused, as the workflow engine refuses it.
"""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from forge_ci.protocol import RunnerInput
from worker.runner.contexts import SECRET_HOLDER_PREFIX, runner_arch
from worker.runner.filecommands import CommandFiles, reserved_env_name

BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: GitHub's tool cache layout, read-only in the image (deploy/runner.Dockerfile).
TOOL_CACHE = "/opt/hostedtoolcache"
#: github context key -> environment variable.
_GITHUB_VARIABLES = {
    "repository": "GITHUB_REPOSITORY",
    "repository_owner": "GITHUB_REPOSITORY_OWNER",
    "sha": "GITHUB_SHA",
    "ref": "GITHUB_REF",
    "event_name": "GITHUB_EVENT_NAME",
    "head_ref": "GITHUB_HEAD_REF",
    "base_ref": "GITHUB_BASE_REF",
    "run_id": "GITHUB_RUN_ID",
    "run_number": "GITHUB_RUN_NUMBER",
    "run_attempt": "GITHUB_RUN_ATTEMPT",
    "job": "GITHUB_JOB",
    "workflow": "GITHUB_WORKFLOW",
    "actor": "GITHUB_ACTOR",
    "repository_id": "GITHUB_REPOSITORY_ID",
    "triggering_actor": "GITHUB_TRIGGERING_ACTOR",
    "workflow_ref": "GITHUB_WORKFLOW_REF",
    "workflow_sha": "GITHUB_WORKFLOW_SHA",
    "server_url": "GITHUB_SERVER_URL",
    "api_url": "GITHUB_API_URL",
    "retention_days": "GITHUB_RETENTION_DAYS",
    "ref_protected": "GITHUB_REF_PROTECTED",
}


class StepEnvironmentError(Exception):
    """The step's environment cannot be built; the message says why."""


@dataclass(frozen=True)
class Layout:
    """The job's directories.

    ::

        <workspace>/            GITHUB_WORKSPACE: the source, shared by the job's steps
          .home/                HOME (0700)
          .tmp/                 TMPDIR, RUNNER_TEMP (0700)
        <runner dir>/           outside the workspace: step scripts and file-command files
    """

    workspace: str
    home: str
    tmp: str
    runner_dir: str


def _runner_name() -> str:
    """RUNNER_NAME / runner.name: the job container's host name (one container per job)."""
    return "forge-ci-" + (socket.gethostname() or "runner")


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def job_environment(
    github: Mapping[str, Any], layout: Layout, job_key: str, event_path: str = ""
) -> dict[str, str]:
    """The fixed and run layers, shared by every step of the job.

    ``event_path``: the event payload's file (GITHUB_EVENT_PATH). The job token is not here:
    a step gets it only by naming it (``${{ github.token }}`` / ``${{ secrets.GITHUB_TOKEN }}``),
    as on GitHub.
    """
    env = {
        "HOME": layout.home,
        "TMPDIR": layout.tmp,
        "RUNNER_TEMP": layout.tmp,
        "RUNNER_OS": "Linux",
        "RUNNER_TOOL_CACHE": TOOL_CACHE,
        "RUNNER_ARCH": runner_arch(),
        "RUNNER_NAME": _runner_name(),
        "LANG": "C.UTF-8",
        "CI": "true",
        "FORGE_CI": "true",
        "GITHUB_ACTIONS": "true",
        "GITHUB_WORKSPACE": layout.workspace,
        "FORGE_CI_JOB_KEY": job_key,
    }
    if event_path:
        env["GITHUB_EVENT_PATH"] = event_path
    for key, name in _GITHUB_VARIABLES.items():
        value = _text(github.get(key))
        if value is not None:
            env[name] = value
    ref = str(github.get("ref") or "")
    for prefix, kind in (("refs/heads/", "branch"), ("refs/tags/", "tag")):
        if ref.startswith(prefix):
            env["GITHUB_REF_NAME"] = ref[len(prefix) :]
            env["GITHUB_REF_TYPE"] = kind
    run_number = _text(github.get("run_number"))
    if run_number is not None:
        env["FORGE_CI_RUN_NUMBER"] = run_number
    attempt = _text(github.get("run_attempt"))
    if attempt is not None:
        env["FORGE_CI_ATTEMPT_NUMBER"] = attempt
    return env


def step_environment(
    job_env: Mapping[str, str],
    path_entries: list[str],
    added_env: Mapping[str, str],
    step_env: Mapping[str, str],
    secrets: Mapping[str, str],
    files: CommandFiles,
    step_id: str,
) -> dict[str, str]:
    """The complete environment of one step (see the module docstring for the layers)."""
    env = dict(job_env)
    env["PATH"] = ":".join([*reversed(path_entries), BASE_PATH])
    env["GITHUB_ENV"] = files.env
    env["GITHUB_PATH"] = files.path
    env["GITHUB_OUTPUT"] = files.output
    env["GITHUB_STATE"] = files.state
    env["GITHUB_STEP_SUMMARY"] = files.summary
    env["FORGE_CI_STEP_ID"] = step_id
    env.update(added_env)
    for layer in (step_env, secrets):
        for name, value in layer.items():
            if name.startswith(SECRET_HOLDER_PREFIX):
                continue  # for the step's expressions only
            if reserved_env_name(name):
                raise StepEnvironmentError(f"env {name} is reserved for the runner")
            env[name] = value
    for name, value in env.items():
        if "\x00" in value or "\x00" in name or "=" in name:
            raise StepEnvironmentError(f"env {name[:80]!r} contains a NUL character or '='")
    return env


class ConfigurationError(Exception):
    """The runner's input or surroundings are unusable; nothing was started."""


def check_surroundings(runner_input: RunnerInput) -> Layout:
    """The workspace must be an empty directory and the API socket a socket."""
    try:
        mode = os.stat(runner_input.api_socket).st_mode
    except OSError as exc:
        raise ConfigurationError(
            f"the runner API socket {runner_input.api_socket} is missing: {exc.strerror}"
        ) from None
    if not stat.S_ISSOCK(mode):
        raise ConfigurationError(f"{runner_input.api_socket} is not a socket")
    workspace = runner_input.workspace
    try:
        entries = os.listdir(workspace)
    except OSError as exc:
        raise ConfigurationError(f"the workspace {workspace} is unusable: {exc.strerror}") from None
    if entries:
        raise ConfigurationError(
            f"the workspace {workspace} must be empty; it holds {len(entries)} entries"
        )
    workspace = os.path.realpath(workspace)
    return Layout(
        workspace=workspace,
        home=os.path.join(workspace, ".home"),
        tmp=os.path.join(workspace, ".tmp"),
        runner_dir="",
    )
