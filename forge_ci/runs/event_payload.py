"""The event payload of a run: ``github.event`` and the file at ``GITHUB_EVENT_PATH``.

Built once, at run creation, from facts forge-ci recorded (the push's old and new commit, the
dispatch's inputs, the schedule's cron text) and stored in the run's immutable snapshot
(``run.context["event"]``); reruns copy it. It is a bounded subset of GitHub's webhook payload
(docs/workflow-syntax.md, "Contexts"), with the same field names and JSON types::

    push               before, after, ref, base_ref (null), created, deleted, forced, compare (""),
                       head_commit, commits (the newest 20, oldest first), pusher
    workflow_dispatch  inputs ({} when none), ref, workflow
    schedule           schedule (the cron text as written)
    every event        repository, sender

Commit texts come from git and are attacker-controlled text: they are data wherever they go
(see "Injection-safe templates" in docs/workflow-syntax.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

import pygit2

from forge_ci.refs import is_zero

if TYPE_CHECKING:
    from forge_ci.models import Repository

PUSH = "push"
DISPATCH = "workflow_dispatch"
SCHEDULE = "schedule"
EVENT_NAMES = (PUSH, DISPATCH, SCHEDULE)
#: GitHub lists at most 20 commits in a push payload (the Events API limit); so does forge-ci.
MAX_COMMITS = 20
#: Per commit and per list (added/removed/modified): paths beyond this are left out.
MAX_COMMIT_PATHS = 300
#: A commit message longer than this is cut (marked with "..."): the snapshot stays bounded.
MAX_MESSAGE_CHARS = 16 * 1024
ZERO_SHA = "0" * 40


@dataclass(frozen=True)
class RepositoryFacts:
    """The repository as the payload names it."""

    full_name: str
    id: int
    default_branch: str

    @classmethod
    def of(cls, repository: Repository) -> RepositoryFacts:
        return cls(repository.full_name, int(repository.id), repository.default_branch)


@dataclass(frozen=True)
class CommitFacts:
    """One pushed commit."""

    id: str
    message: str
    timestamp: str
    author_name: str
    author_email: str
    committer_name: str
    committer_email: str
    tree_id: str = ""
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    modified: tuple[str, ...] = ()


@dataclass(frozen=True)
class PushFacts:
    """What a push changed: its two commits, its kind and the commits it brought."""

    before: str
    after: str
    created: bool
    deleted: bool
    forced: bool
    commits: tuple[CommitFacts, ...] = ()
    head_commit: CommitFacts | None = None


@dataclass(frozen=True)
class EventFacts:
    """The facts one event kind needs (see CONTEXTS-SEAM: the schedule and dispatch callers)."""

    repository: RepositoryFacts
    ref: str
    sha: str
    sender: str
    push: PushFacts | None = None
    inputs: Mapping[str, str | bool | int | float] | None = None
    workflow_path: str = ""
    schedule: str = ""


def build_event_payload(event_name: str, facts: EventFacts) -> dict[str, Any]:
    """The JSON payload of ``event_name`` (push, workflow_dispatch or schedule).

    Raises ValueError for another event name or facts that do not fit the event.
    """
    common = {"repository": _repository(facts.repository), "sender": _user(facts.sender)}
    if event_name == PUSH:
        push = facts.push
        if push is None:
            raise ValueError("a push payload needs PushFacts")
        payload: dict[str, Any] = {
            "after": push.after,
            "base_ref": None,
            "before": push.before,
            "commits": [_commit(commit) for commit in push.commits],
            "compare": "",
            "created": push.created,
            "deleted": push.deleted,
            "forced": push.forced,
            "head_commit": _commit(push.head_commit) if push.head_commit else None,
            "pusher": {"name": facts.sender, "email": None},
            "ref": facts.ref,
        }
    elif event_name == DISPATCH:
        inputs = dict(facts.inputs or {})
        for name, value in inputs.items():
            if not isinstance(value, str | bool | int | float):
                raise ValueError(f"dispatch input {name!r} must be text, a boolean or a number")
        payload = {"inputs": inputs, "ref": facts.ref, "workflow": facts.workflow_path}
    elif event_name == SCHEDULE:
        if not facts.schedule:
            raise ValueError("a schedule payload needs the cron text")
        payload = {"schedule": facts.schedule}
    else:
        raise ValueError(f"forge-ci builds no payload for the {event_name!r} event")
    payload.update(common)
    return payload


def minimal_payload(event_name: str, repository: str, ref: str, sender: str) -> dict[str, Any]:
    """A payload for runs whose creator passed no facts: repository and sender only."""
    payload: dict[str, Any] = {
        "repository": {"full_name": repository, "name": repository.partition("/")[2]},
        "sender": _user(sender),
    }
    if event_name == DISPATCH:
        payload.update({"inputs": {}, "ref": ref, "workflow": ""})
    return payload


def event_inputs(event_name: str, payload: Mapping[str, Any]) -> dict[str, Any]:
    """``github.event.inputs`` of a payload: a dispatch's inputs, ``{}`` for other events."""
    inputs = payload.get("inputs") if event_name == DISPATCH else None
    return dict(inputs) if isinstance(inputs, Mapping) else {}


def run_inputs(context: Mapping[str, Any]) -> dict[str, Any]:
    """The ``inputs`` context of a run, from its snapshot (``run.context``).

    ``context["inputs"]`` when the run creator stored it (typed as GitHub types the inputs
    context: booleans stay booleans, see CONTEXTS-SEAM.md), else the payload's inputs.
    """
    stored = context.get("inputs")
    if isinstance(stored, Mapping):
        return dict(stored)
    payload = context.get("event")
    return event_inputs(
        str(context.get("event_name", "")), payload if isinstance(payload, Mapping) else {}
    )


def queue_contexts(
    github: Mapping[str, Any], variables: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The contexts known when a run is queued: ``github`` (its snapshot), ``inputs``, ``vars``.

    ``variables``: the repository variables where the caller has them (the secrets issue's
    store); an empty ``vars`` otherwise.
    """
    context = {name: value for name, value in github.items() if name != "inputs"}
    return {"github": context, "inputs": run_inputs(github), "vars": dict(variables or {})}


def push_facts(
    git: pygit2.Repository, ref: str, before: str, after: str, default_branch: str | None
) -> PushFacts:
    """The facts of a push of ``ref`` from ``before`` to ``after`` (either may be all zeros).

    ``commits`` are the commits reachable from ``after`` and not from ``before`` (for a new
    branch: not from the default branch), newest 20, listed oldest first as GitHub does.
    ``forced``: ``before`` is not an ancestor of ``after``.
    """
    created, deleted = is_zero(before), is_zero(after)
    if deleted:
        return PushFacts(before, ZERO_SHA, created, True, False)
    head = git[after]
    if not isinstance(head, pygit2.Commit):
        raise ValueError(f"{after[:12]} is not a commit")
    forced = False
    hide: list[pygit2.Oid] = []
    if not created:
        try:
            old = git[before]
        except (KeyError, ValueError):
            old = None
        if isinstance(old, pygit2.Commit):
            hide.append(old.id)
            forced = old.id != head.id and not git.descendant_of(head.id, old.id)
    elif default_branch and ref != f"refs/heads/{default_branch}":
        try:
            hide.append(git.references[f"refs/heads/{default_branch}"].resolve().target)
        except KeyError:
            pass
    walker = git.walk(head.id, pygit2.enums.SortMode.TOPOLOGICAL)
    for oid in hide:
        walker.hide(oid)
    newest: list[pygit2.Commit] = []
    for commit in walker:
        newest.append(commit)
        if len(newest) >= MAX_COMMITS:
            break
    commits = tuple(_commit_facts(git, commit) for commit in reversed(newest))
    head_facts = commits[-1] if commits and commits[-1].id == str(head.id) else None
    if head_facts is None:
        head_facts = _commit_facts(git, head)
    return PushFacts(before, after, created, False, forced, commits, head_facts)


def _commit_facts(git: pygit2.Repository, commit: pygit2.Commit) -> CommitFacts:
    added: list[str] = []
    removed: list[str] = []
    modified: list[str] = []
    parent_tree = commit.parents[0].tree if commit.parents else None
    diff = (
        parent_tree.diff_to_tree(commit.tree)
        if parent_tree is not None
        else commit.tree.diff_to_tree(swap=True)
    )
    lists = {"A": added, "D": removed}
    for delta in diff.deltas:
        target = lists.get(delta.status_char(), modified)
        path = delta.new_file.path if target is not removed else delta.old_file.path
        if len(target) < MAX_COMMIT_PATHS:
            target.append(path)
    message = commit.message
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[: MAX_MESSAGE_CHARS - 3] + "..."
    return CommitFacts(
        id=str(commit.id),
        message=message,
        timestamp=_timestamp(commit.committer.time, commit.committer.offset),
        author_name=commit.author.name,
        author_email=commit.author.email,
        committer_name=commit.committer.name,
        committer_email=commit.committer.email,
        tree_id=str(commit.tree_id),
        added=tuple(sorted(added)),
        removed=tuple(sorted(removed)),
        modified=tuple(sorted(modified)),
    )


def _timestamp(seconds: int, offset_minutes: int) -> str:
    """ISO 8601 with the committer's offset, as GitHub writes it (2024-05-01T10:00:00+02:00)."""
    zone = timezone(timedelta(minutes=offset_minutes))
    return datetime.fromtimestamp(seconds, UTC).astimezone(zone).isoformat()


def _commit(commit: CommitFacts) -> dict[str, Any]:
    return {
        "added": list(commit.added),
        "author": {"email": commit.author_email, "name": commit.author_name, "username": None},
        "committer": {
            "email": commit.committer_email,
            "name": commit.committer_name,
            "username": None,
        },
        "distinct": True,
        "id": commit.id,
        "message": commit.message,
        "modified": list(commit.modified),
        "removed": list(commit.removed),
        "timestamp": commit.timestamp,
        "tree_id": commit.tree_id,
        "url": "",
    }


def _repository(repository: RepositoryFacts) -> dict[str, Any]:
    owner, _, name = repository.full_name.partition("/")
    return {
        "default_branch": repository.default_branch,
        "full_name": repository.full_name,
        "id": repository.id,
        "name": name,
        "owner": {"login": owner, "name": owner},
        "private": True,
    }


def _user(name: str) -> dict[str, Any]:
    return {"login": name, "type": "User"}
