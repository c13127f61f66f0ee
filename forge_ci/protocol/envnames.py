"""Environment names the executor owns: the one rule the workflow parser and the runner share.

GitHub lets a workflow set any ``GITHUB_*`` name except the default variables the runner sets
(``GITHUB_SHA``, ``GITHUB_ENV``...); ``GITHUB_TOKEN`` and ``GITHUB_CONTEXT`` are common in real
files. forge-ci does the same: the names below are refused, every other ``GITHUB_`` name is an
ordinary variable. ``FORGE_CI_`` and ``RUNNER_`` names stay reserved as a whole, and the
variables that make a shell or the dynamic loader run other code first can never be set.

Names are otherwise free, as on GitHub (``ruby-version``, ``a.b``, ``1A``); only what no
process environment can hold (``=``, NUL), other control characters (they would forge log
lines) and names over 255 characters are refused, in workflow ``env`` and ``$GITHUB_ENV`` alike.
"""

from __future__ import annotations

import re

MAX_NAME = 255
_UNFIT = re.compile("[=\x00-\x1f\x7f]")

RESERVED_PREFIXES = ("FORGE_CI_", "RUNNER_")
INJECTION_NAMES = frozenset({"BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "NODE_OPTIONS"})
INJECTION_PREFIXES = ("LD_", "DYLD_")
#: GitHub's default variables ("Variables reference": every one the runner may set), reserved
#: whether or not forge-ci sets it today, so that a file never starts to collide later.
RUNNER_GITHUB_VARIABLES = frozenset(
    """GITHUB_ACTION GITHUB_ACTION_PATH GITHUB_ACTION_REPOSITORY GITHUB_ACTIONS GITHUB_ACTOR
    GITHUB_ACTOR_ID GITHUB_API_URL GITHUB_BASE_REF GITHUB_ENV GITHUB_EVENT_NAME
    GITHUB_EVENT_PATH GITHUB_GRAPHQL_URL GITHUB_HEAD_REF GITHUB_JOB GITHUB_OUTPUT GITHUB_PATH
    GITHUB_REF GITHUB_REF_NAME GITHUB_REF_PROTECTED GITHUB_REF_TYPE GITHUB_REPOSITORY
    GITHUB_REPOSITORY_ID GITHUB_REPOSITORY_OWNER GITHUB_REPOSITORY_OWNER_ID
    GITHUB_RETENTION_DAYS GITHUB_RUN_ATTEMPT GITHUB_RUN_ID GITHUB_RUN_NUMBER GITHUB_SERVER_URL
    GITHUB_SHA GITHUB_STATE GITHUB_STEP_SUMMARY GITHUB_TRIGGERING_ACTOR GITHUB_WORKFLOW
    GITHUB_WORKFLOW_REF GITHUB_WORKFLOW_SHA GITHUB_WORKSPACE""".split()
)


def reserved_reason(name: str) -> str | None:
    """Why a workflow may not set ``name`` (compared without regard to case), or ``None``."""
    upper = name.upper()
    for prefix in RESERVED_PREFIXES:
        if upper.startswith(prefix):
            return f"env names starting with {prefix} are reserved for the executor ({name})"
    if upper in RUNNER_GITHUB_VARIABLES:
        return f"{name} is set by the runner; a workflow cannot override it"
    if upper in INJECTION_NAMES or upper.startswith(INJECTION_PREFIXES):
        return f"{name} would let the shell or the loader run other code; it cannot be set"
    return None


def unfit_reason(name: str) -> str | None:
    """Why ``name`` cannot be an environment variable's name at all, or ``None``."""
    if len(name) > MAX_NAME:
        return f"the env name {name[:20]}... is longer than {MAX_NAME} characters"
    if not name:
        return "an env name must not be empty"
    unfit = _UNFIT.search(name)
    if unfit:
        what = "'='" if unfit.group() == "=" else "a control character"
        return f"the env name {name[:40]!r} contains {what}, which no process environment can hold"
    return None
