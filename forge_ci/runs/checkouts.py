"""The checkout's ``ref``, resolved and pinned at run creation (never at execution time).

The plan's checkout step carries ``with.ref`` as written (``""``: the run's commit). When a run
is created it becomes the commit SHA it names now, and the step gains ``checkout_ref`` (the full
ref it was read from, or ``""`` for the run's own commit), so that::

    ""                         -> the run's commit
    <the run's own full SHA>   -> the run's commit
    main, refs/heads/main      -> the branch's commit now  (refs/heads/<name> first, as
    v1, refs/tags/v1           -> the tag's commit now      actions/checkout does, then tags)
    anything else              -> run creation fails: only this repository's branches and tags

A ref with expressions (``${{ github.ref }}``, ``${{ matrix.branch }}``,
``${{ github.event.pull_request.head.sha }}``) is evaluated first, from the run's snapshot
(github, inputs, vars) and the job's matrix and strategy; an empty result is the run's commit.

Every commit other than the run's own is pinned under ``<run pin>-checkout-<sha>`` (same
namespace and lifetime as the run pin, see :mod:`forge_ci.runs.pins`), so moving or deleting
the branch or tag, force-pushes and ``git gc`` never change what the job checks out. A rerun
copies the plan, so it checks out the same SHA and pins it again; nothing is resolved twice.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pygit2

from forge_ci.errors import InvalidInput, NotFound
from forge_ci.protocol import CHECKOUT
from forge_ci.runs.definition import RunDefinition
from forge_ci.runs.pins import PIN_PREFIX

#: Plan key of a checkout step once its ref has been resolved.
RESOLVED_KEY = "checkout_ref"


def checkout_pin_name(run_pin: str, sha: str) -> str:
    """The pin that keeps a checkout's commit ``sha`` alive for the run pinned by ``run_pin``."""
    return f"{run_pin}-checkout-{sha}"


def checkout_steps(plan: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """``(job key, step)`` of every checkout step of the plan."""
    found = []
    for job in plan.get("jobs", []):
        for step in job.get("steps", []):
            if step.get("uses") == CHECKOUT:
                found.append((str(job.get("key")), step))
    return found


def resolve_checkouts(
    git: pygit2.Repository, definition: RunDefinition, repository: str
) -> RunDefinition:
    """``definition`` with every checkout's ``with.ref`` resolved to a SHA (reruns: unchanged)."""
    steps = checkout_steps(definition.plan)
    if not steps or all(RESOLVED_KEY in step for _, step in steps):
        return definition
    plan = copy.deepcopy(definition.plan)
    for job_key, step in checkout_steps(plan):
        if RESOLVED_KEY in step:
            continue
        inputs = step.setdefault("with", {})
        written = str(inputs.get("ref") or "")
        if "${{" in written:
            written = _evaluated(written, definition, plan, job_key, str(step["id"]))
        sha, full = _resolve(git, written, definition.sha, repository, job_key, str(step["id"]))
        inputs["ref"] = sha
        step[RESOLVED_KEY] = full
    from forge_ci.workflow import plan_digest

    return dataclasses.replace(definition, plan=plan, plan_digest=plan_digest(plan))


def _evaluated(
    written: str, definition: RunDefinition, plan: dict[str, Any], job_key: str, step: str
) -> str:
    """A ``with.ref`` template's text now, from the run's snapshot and the job's matrix."""
    from forge_ci.runs.event_payload import queue_contexts
    from forge_ci.workflow.expressions import ExpressionError, render_template, split_template

    jobs: list[dict[str, Any]] = plan.get("jobs", [])
    job: dict[str, Any] = next((j for j in jobs if str(j.get("key")) == job_key), {})
    contexts = {
        **queue_contexts(definition.context),
        "matrix": job.get("matrix") or {},
        "strategy": job.get("strategy") or {},
    }
    try:
        return render_template(split_template(written), contexts).strip()
    except ExpressionError as exc:
        raise InvalidInput(
            f"{definition_where(job_key, step)}: with.ref {written!r} cannot be evaluated: "
            f"{exc.message}"
        ) from None


def _resolve(
    git: pygit2.Repository, written: str, run_sha: str, repository: str, job: str, step: str
) -> tuple[str, str]:
    where = f"{definition_where(job, step)}: with.ref {written!r}"
    if not written or written == run_sha:
        return run_sha, ""
    if written.startswith("refs/"):
        candidates = [written] if written.startswith(("refs/heads/", "refs/tags/")) else []
    else:
        candidates = [f"refs/heads/{written}", f"refs/tags/{written}"]
    if written.startswith(PIN_PREFIX) or written.startswith("refs/forge-ci/"):
        candidates = []
    for name in candidates:
        try:
            reference = git.references[name]
        except (KeyError, ValueError, pygit2.InvalidSpecError):
            continue
        target = reference.peel(pygit2.Commit)
        return str(target.id), name
    if len(written) == 40 and all(char in "0123456789abcdef" for char in written):
        raise InvalidInput(
            f"{where} is a commit other than the run's; the checkout takes only the run's own "
            f"commit ({run_sha[:12]}) or a branch or tag of {repository}"
        )
    looked = " and ".join(candidates) if candidates else "nothing (not a branch or tag ref)"
    raise InvalidInput(
        f"{where} is neither a branch nor a tag of {repository} (looked for {looked}); the "
        "checkout reads only this repository"
    )


def definition_where(job: str, step: str) -> str:
    return f"job {job!r}, step {step!r}"


def pin_checkouts(git: pygit2.Repository, definition: RunDefinition, run_pin: str) -> list[str]:
    """Pin every checkout commit that is not the run's own; return the pins made."""
    made: list[str] = []
    for _, step in checkout_steps(definition.plan):
        sha = str((step.get("with") or {}).get("ref") or "")
        if not sha or sha == definition.sha:
            continue
        name = checkout_pin_name(run_pin, sha)
        if name in made:
            continue
        try:
            commit = git[sha]
        except (KeyError, ValueError):
            raise NotFound(f"the checkout's commit {sha} is no longer in the repository") from None
        if not isinstance(commit, pygit2.Commit):
            raise NotFound(f"the checkout's {sha} is not a commit")
        git.references.create(name, commit.id, force=True)
        made.append(name)
    return made


def checkout_commit(plan_job: dict[str, Any], run_sha: str) -> tuple[str, dict[str, str]]:
    """The commit the job's checkout step reads and its inputs (run's commit when none)."""
    for step in plan_job.get("steps", []):
        if step.get("uses") == CHECKOUT:
            # Text inputs only: a with.path template is the runner's (it does not change the
            # commit or what the bundle holds).
            given = (step.get("with") or {}).items()
            inputs = {str(k): str(v) for k, v in given if not isinstance(v, dict)}
            inputs.setdefault("ref", "")
            inputs["checkout_ref"] = str(step.get(RESOLVED_KEY) or "")
            return inputs["ref"] or run_sha, inputs
    return run_sha, {"ref": "", "checkout_ref": ""}
