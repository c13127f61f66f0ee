"""The expression contexts of a step, as the runner completes them at run time.

The assignment brings ``github`` (queue- and claim-time fields, the event payload and the job
token), ``matrix``, ``strategy``, ``needs``, ``inputs`` and ``vars``. The runner adds what only
it knows::

    github.workspace    the workspace directory
    github.action       the running step's id; github.action_path "" for run steps
    runner              os, arch, name, temp, tool_cache, debug
    job                 status (success/failure so far), container and services ({})
    env                 the step's environment as the workflow set it: GITHUB_ENV additions
                        of earlier steps, then workflow < job < step env (secrets and the
                        generated _FORGE_CI_EXPR_ variables left out)
    steps               outputs, outcome and conclusion of earlier steps

The event payload is also written to ``GITHUB_EVENT_PATH`` (``event.json`` in the runner's
directory, outside the workspace), once per job.
"""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Mapping
from typing import Any

#: platform.machine() -> runner.arch / RUNNER_ARCH, spelt as GitHub spells them.
_ARCHES = {"x86_64": "X64", "amd64": "X64", "aarch64": "ARM64", "arm64": "ARM64", "i686": "X86"}
GENERATED_PREFIX = "_FORGE_CI_EXPR_"
#: Holders of secrets that a step's expressions read (forge_ci.workflow.injection): given to
#: the expressions as ``secrets.NAME``, never to the step's process.
SECRET_HOLDER_PREFIX = GENERATED_PREFIX + "SECRET_"


def runner_arch() -> str:
    machine = platform.machine().lower()
    return _ARCHES.get(machine, machine.upper() or "X64")


def runner_context(job_env: Mapping[str, str]) -> dict[str, str]:
    """The ``runner`` context, from the job's fixed environment."""
    return {
        "os": job_env.get("RUNNER_OS", "Linux"),
        "arch": job_env.get("RUNNER_ARCH", runner_arch()),
        "name": job_env.get("RUNNER_NAME", ""),
        "temp": job_env.get("RUNNER_TEMP", ""),
        "tool_cache": job_env.get("RUNNER_TOOL_CACHE", ""),
        "debug": "",
    }


def job_context(failed: bool) -> dict[str, Any]:
    """The ``job`` context: forge-ci runs no job containers or service containers."""
    return {"status": "failure" if failed else "success", "container": {}, "services": {}}


def env_context(added_env: Mapping[str, str], step_env: Mapping[str, str]) -> dict[str, str]:
    """The ``env`` context of a step (see the module docstring)."""
    env = dict(added_env)
    env.update(
        (name, value) for name, value in step_env.items() if not name.startswith(GENERATED_PREFIX)
    )
    return env


def step_contexts(
    assigned: Mapping[str, Any],
    *,
    workspace: str,
    step_id: str,
    runner: Mapping[str, str],
    failed: bool,
    env: Mapping[str, str],
    steps: Mapping[str, Any],
) -> dict[str, Any]:
    """Every context an expression of step ``step_id`` may read."""
    github = dict(assigned["github"])
    github.update({"workspace": workspace, "action": step_id, "action_path": ""})
    return {
        "github": github,
        "matrix": assigned.get("matrix") or {},
        "strategy": assigned.get("strategy") or {},
        "needs": assigned.get("needs") or {},
        "inputs": assigned.get("inputs") or {},
        "vars": assigned.get("vars") or {},
        "runner": dict(runner),
        "job": job_context(failed),
        "env": dict(env),
        "steps": steps,
    }


def write_event(directory: str, event: Any) -> str:
    """Write the event payload as ``event.json`` in ``directory``; return its path."""
    path = os.path.join(directory, "event.json")
    data = json.dumps(event if isinstance(event, dict) else {}, ensure_ascii=False)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(data)
    return path
