"""Which refs a push may create, move or delete.

Only branches and tags are pushed; forge-ci's own namespace ``refs/forge-ci/`` (run and event
pins) is never writable from outside. Everything else (notes, ``refs/pull/*``, stray top-level
refs) is refused rather than silently accepted, because nothing in forge-ci would act on it.
A branch or tag named ``HEAD`` is refused too (as Gitea does): ``git push HEAD:HEAD`` would
create ``refs/heads/HEAD``, which git then confuses with the symbolic ref ``HEAD``.
"""

from __future__ import annotations

from collections.abc import Iterable

from forge_ci.errors import PermissionDenied
from forge_ci.models.push_events import MAX_REF_LENGTH
from forge_ci.refs import INTERNAL_REF_PREFIX, Update

PUSHABLE_PREFIXES = ("refs/heads/", "refs/tags/")


def refusal_reason(ref: str) -> str | None:
    """Why a push may not update ``ref``, or None when it may."""
    if ref.startswith(INTERNAL_REF_PREFIX):
        return f"{ref}: {INTERNAL_REF_PREFIX} is reserved for forge-ci and cannot be pushed to"
    if not ref.startswith(PUSHABLE_PREFIXES) or ref in PUSHABLE_PREFIXES:
        return f"{ref}: only branches (refs/heads/...) and tags (refs/tags/...) can be pushed"
    if ref.rsplit("/", 1)[-1] == "HEAD" and ref.count("/") == 2:
        return f"{ref}: a branch or tag cannot be named HEAD (git reads that as the symbolic ref)"
    if len(ref.encode()) > MAX_REF_LENGTH:
        return f"{ref[:60]}...: ref names longer than {MAX_REF_LENGTH} bytes are refused"
    return None


def check_ref_updates(updates: Iterable[Update]) -> None:
    """Raise PermissionDenied naming every refused ref and why; the whole push is refused."""
    reasons = [reason for u in updates if (reason := refusal_reason(u.ref)) is not None]
    if reasons:
        raise PermissionDenied("push refused:\n" + "\n".join(f"  {r}" for r in reasons))
