"""Resolving ``uses:`` actions at run creation, and the run's action snapshot.

Every action reference of a workflow (and, transitively, of its composite actions) is resolved
exactly once, when the run is created, never when a job runs::

    ./PATH             the run's own commit (already pinned by the run)
    OWNER/REPO@REF     1. the forge repository OWNER/REPO, when the requester may read it
                       2. each configured action source in order (``action_sources``):
                          ``<source>/OWNER/REPO`` fetched with git into the action cache
       REF: a tag, then a branch, or a full commit SHA
    the commit found is pinned under refs/forge-ci/actions/<commit> where it was found
    ──► action.yml (or action.yaml) read at PATH of that commit, checked (action_metadata)
    ──► its tree checked: no submodules, no .git, no link leaving the action's folder
    ──► composite: nested references resolved the same way (depth and count bounded)
    ──► with keys checked against the action's inputs ("did you mean")

A reference that cannot be resolved, and every bad action, refuses the run request with located
diagnostics naming the reference and every place looked (``WorkflowInvalid``: HTTP 400 / exit 2
for dispatch, a diagnostic on the push event for a push). The result is stored in the run's
immutable snapshot (``runs.actions``); a rerun copies it and resolves nothing::

    {"version": 1,
     "references": {"actions/setup-python@v5": "<commit>:<path>", ...},
     "actions": {"<commit>:<path>": {"reference", "repository", "commit", "path", "pin_ref",
                                     "source": {"kind": "forge", "repository_id": N}
                                             | {"kind": "upstream", "url": URL, "cache": DIR}
                                             | {"kind": "run"},
                                     "action_yml": TEXT, "metadata": {...}}}}
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pygit2
from pygit2.enums import FileMode, ObjectType
from sqlalchemy import select
from sqlalchemy.orm import Session

from forge_ci.authz import Actor, role_in
from forge_ci.gitstore import open_repository, repository_path
from forge_ci.models import Repository, User
from forge_ci.protocol import ActionMetadata, ProtocolError
from forge_ci.runs.action_cache import fetch_action, peel_commit, pin_action
from forge_ci.settings import Settings

if TYPE_CHECKING:
    from forge_ci.workflow import Workflow

SNAPSHOT_VERSION = 1
#: Actions one run may use, nested ones included, and how deep composite actions may nest.
MAX_RUN_ACTIONS = 64
MAX_NESTING = 8
MAX_ACTION_FILES = 10_000
MAX_ACTION_TREE_BYTES = 64 * 1024 * 1024
METADATA_FILES = ("action.yml", "action.yaml")


class ActionProblem(Exception):
    """Why one reference cannot be used (the caller locates it)."""


@dataclass(frozen=True)
class _Found:
    git: pygit2.Repository
    commit: str
    pin_ref: str
    repository: str
    source: dict[str, Any]


@dataclass(frozen=True)
class _Use:
    text: str
    line: int
    column: int
    depth: int
    inputs: tuple[tuple[str, int, int], ...] = ()


def action_uses(workflow: Workflow) -> list[_Use]:
    """The workflow's action steps, with the positions of ``uses`` and of each ``with`` key."""
    from forge_ci.workflow.nodes import Mapping

    uses = []
    for job in workflow.jobs:
        for step in job.steps:
            if step.action is None:
                continue
            node = step.node.get("uses") or step.node
            with_node = step.node.get("with")
            keys = tuple(
                (key.value, key.line, key.column)
                for key, _ in (with_node.items if isinstance(with_node, Mapping) else [])
            )
            uses.append(_Use(step.action, node.line, node.column, 0, keys))
    return uses


class Resolver:
    """Resolves the actions of one run request (see the module doc)."""

    def __init__(
        self,
        session: Session,
        settings: Settings,
        actor: Actor,
        git: pygit2.Repository,
        sha: str,
    ) -> None:
        self.session = session
        self.settings = settings
        self.actor = actor
        self.git = git
        self.sha = sha
        self.references: dict[str, str] = {}
        self.actions: dict[str, dict[str, Any]] = {}
        self.first_seen: dict[str, tuple[int, int]] = {}

    def resolve(self, path: str, uses: list[_Use]) -> dict[str, Any]:
        """The snapshot for ``uses`` (an empty one when there are none); WorkflowInvalid."""
        from forge_ci.workflow import Diagnostic, WorkflowInvalid
        from forge_ci.workflow.action_metadata import ActionInvalid
        from forge_ci.workflow.actions import input_problems

        problems: list[Diagnostic] = []
        queue = list(uses)
        while queue:
            use = queue.pop(0)
            if use.text in self.references:
                key = self.references[use.text]
            else:
                try:
                    key, nested = self._resolve_one(use.text)
                except (ActionProblem, ActionInvalid) as exc:
                    problems.append(Diagnostic(use.line, use.column, str(exc)))
                    continue
                self.first_seen.setdefault(key, (use.line, use.column))
                if nested and use.depth + 1 > MAX_NESTING:
                    problems.append(
                        Diagnostic(
                            use.line,
                            use.column,
                            f"uses: {use.text}: composite actions nest more than {MAX_NESTING} "
                            "levels deep",
                        )
                    )
                    continue
                queue.extend(_Use(text, use.line, use.column, use.depth + 1) for text in nested)
                if len(self.actions) > MAX_RUN_ACTIONS:
                    problems.append(
                        Diagnostic(
                            use.line,
                            use.column,
                            f"the run would use more than {MAX_RUN_ACTIONS} actions (nested "
                            "ones included)",
                        )
                    )
                    break
            inputs = list(self.actions[key]["metadata"]["inputs"])
            given = [name for name, _, _ in use.inputs]
            positions = {name: (line, column) for name, line, column in use.inputs}
            for name, message in input_problems(use.text, inputs, given):
                line, column = positions[name]
                problems.append(Diagnostic(line, column, message))
        if problems:
            raise WorkflowInvalid(path, problems)
        for entry in self.actions.values():
            for step in entry["metadata"]["runs"]["steps"]:
                if step["uses"]:
                    step["action"] = self.references[step["uses"]]
        for key, entry in self.actions.items():
            try:
                # What the runner will be sent must parse: refused here, never at claim time.
                ActionMetadata.from_json(entry["metadata"], "metadata")
            except ProtocolError as exc:
                line, column = self.first_seen[key]
                message = f"action {entry['reference']}: its metadata cannot be sent: {exc}"
                problems.append(Diagnostic(line, column, message))
        if problems:
            raise WorkflowInvalid(path, problems)
        if not self.actions:
            return {}
        return {
            "version": SNAPSHOT_VERSION,
            "references": dict(self.references),
            "actions": self.actions,
        }

    # -- one reference ------------------------------------------------------------------------

    def _resolve_one(self, text: str) -> tuple[str, list[str]]:
        from forge_ci.workflow.action_metadata import parse_action_metadata
        from forge_ci.workflow.actions import ReferenceInvalid, parse_reference

        try:
            reference = parse_reference(text)
        except ReferenceInvalid as exc:
            raise ActionProblem(str(exc)) from None
        if reference.local:
            # Kept alive by the run's own pin (runs.pin_ref), made when the run is created.
            found = _Found(self.git, self.sha, "", "", {"kind": "run"})
        else:
            found = self._find(reference.owner, reference.repo, reference.ref, text)
        key = f"{found.commit}:{reference.path}"
        self.references[text] = key
        if key in self.actions:
            return key, []
        where = f"{reference.path}/" if reference.path else ""
        tree = _folder(found.git, found.commit, reference.path, text)
        name, data = _metadata_file(found.git, tree, text, where)
        check_action_tree(found.git, tree, text)
        parsed = parse_action_metadata(data, text, where + name)
        self.actions[key] = {
            "reference": text,
            "repository": found.repository,
            "commit": found.commit,
            "path": reference.path,
            "pin_ref": found.pin_ref,
            "source": found.source,
            "action_yml": data.decode("utf-8"),
            "metadata": parsed.metadata,
        }
        return key, parsed.nested

    def _find(self, owner: str, repo: str, ref: str, text: str) -> _Found:
        looked: list[str] = []
        repository = self._forge_repository(owner, repo)
        if repository is None:
            looked.append(f"the forge repository {owner}/{repo} (not found or not readable)")
        else:
            git = open_repository(
                repository_path(self.settings.repositories_dir, owner, repository.name)
            )
            commit = resolve_ref(git, ref)
            if commit is not None:
                source = {"kind": "forge", "repository_id": repository.id}
                return _Found(git, commit, pin_action(git, commit), f"{owner}/{repo}", source)
            looked.append(f"the forge repository {owner}/{repo} (no tag, branch or commit {ref})")
        for base in self.settings.action_sources:
            url = f"{base}/{owner}/{repo}"
            fetched = fetch_action(self.settings.action_cache_dir, url, ref)
            if isinstance(fetched, str):
                looked.append(f"{url} ({fetched})")
                continue
            git = pygit2.Repository(str(fetched.cache))
            source = {"kind": "upstream", "url": url, "cache": fetched.cache.name}
            return _Found(git, fetched.commit, fetched.pin_ref, f"{owner}/{repo}", source)
        if not self.settings.action_sources:
            looked.append("no upstream action source (action_sources is none)")
        raise ActionProblem(f"uses: {text} cannot be resolved; looked in: " + "; ".join(looked))

    def _forge_repository(self, owner: str, repo: str) -> Repository | None:
        found = self.session.scalar(
            select(Repository)
            .join(User, Repository.owner_id == User.id)
            .where(User.name == owner, Repository.name == repo)
        )
        if found is None:
            return None
        # An operator's mirror serves every run creator; any other repository only those who
        # may read it (a private repository's code never runs in someone else's job).
        if found.mirror_url is None and role_in(self.session, self.actor, found) is None:
            return None
        return found


def resolve_ref(git: pygit2.Repository, ref: str) -> str | None:
    """The commit of tag ``ref``, else branch ``ref``, else ``ref`` as a full commit SHA."""
    for name in (f"refs/tags/{ref}", f"refs/heads/{ref}"):
        try:
            target = git.references[name].target
        except (KeyError, pygit2.InvalidSpecError, ValueError):
            continue
        commit = peel_commit(git, target)
        if commit is not None:
            return commit
    if len(ref) == 40:
        return peel_commit(git, ref)
    return None


def _folder(git: pygit2.Repository, commit: str, path: str, text: str) -> pygit2.Tree:
    tree = git[commit].peel(pygit2.Tree)
    for part in path.split("/") if path else []:
        try:
            entry = tree[part]
        except KeyError:
            raise ActionProblem(
                f"uses: {text}: commit {commit[:12]} has no folder {path!r}"
            ) from None
        if entry.filemode != FileMode.TREE:
            raise ActionProblem(f"uses: {text}: {path!r} is not a folder at {commit[:12]}")
        tree = git[entry.id].peel(pygit2.Tree)
    return tree


def _metadata_file(
    git: pygit2.Repository, tree: pygit2.Tree, text: str, where: str
) -> tuple[str, bytes]:
    from forge_ci.workflow.action_metadata import MAX_ACTION_BYTES

    for name in METADATA_FILES:
        try:
            entry = tree[name]
        except KeyError:
            continue
        if entry.filemode not in (FileMode.BLOB, FileMode.BLOB_EXECUTABLE):
            raise ActionProblem(f"action {text}: {where}{name} is not a regular file")
        kind, size = git.odb.read_header(entry.id)
        if kind != ObjectType.BLOB or size > MAX_ACTION_BYTES:
            raise ActionProblem(
                f"action {text}: {where}{name} is {size} bytes; the limit is {MAX_ACTION_BYTES}"
            )
        return name, bytes(git[entry.id].peel(pygit2.Blob).data)
    raise ActionProblem(f"action {text}: there is no {where}action.yml (or action.yaml)")


#: The longest target of a symbolic link in an action (the runner's path limit).
MAX_LINK_TARGET_BYTES = 4096


def link_target(git: pygit2.Repository, blob: pygit2.Oid, text: str, path: str) -> str:
    """The target of the link ``path`` of action ``text``; ActionProblem if the runner could not
    make it (empty, NUL, not UTF-8, longer than 4096 bytes)."""
    data = bytes(git[blob].peel(pygit2.Blob).data)
    try:
        target = data.decode("utf-8")
    except UnicodeDecodeError:
        target = ""
    if not target or "\x00" in target or len(data) > MAX_LINK_TARGET_BYTES:
        raise ActionProblem(
            f"action {text}: the symbolic link {path!r} needs a UTF-8 target of 1 to "
            f"{MAX_LINK_TARGET_BYTES} bytes without NUL"
        )
    return target


def check_action_tree(git: pygit2.Repository, tree: pygit2.Tree, text: str) -> None:
    """Refuse a tree the runner could not unpack safely.

    Symbolic links are delivered as links with their committed target, wherever it points: the
    runner makes them last in the job's container (never writing through one), where they reach
    nothing the job could not read anyway. A submodule or a ``.git`` entry refuse the action.
    """
    files = 0
    total = 0
    stack: list[tuple[str, pygit2.Tree]] = [("", tree)]
    while stack:
        prefix, current = stack.pop()
        for entry in current:
            name = entry.name or ""
            path = prefix + name
            if name.lower() == ".git":
                raise ActionProblem(f"action {text}: its tree holds {path!r}; .git is reserved")
            if name in ("", ".", "..") or "/" in name or "\\" in name or "\x00" in name:
                raise ActionProblem(f"action {text}: its tree holds the path {path!r}")
            mode = entry.filemode
            if mode == FileMode.TREE:
                stack.append((path + "/", git[entry.id].peel(pygit2.Tree)))
            elif mode == FileMode.LINK:
                link_target(git, entry.id, text, path)
            elif mode == FileMode.COMMIT:
                raise ActionProblem(
                    f"action {text}: its tree holds the submodule {path!r}; submodules are not "
                    "supported"
                )
            elif mode in (FileMode.BLOB, FileMode.BLOB_EXECUTABLE):
                files += 1
                total += git.odb.read_header(entry.id)[1]
                if files > MAX_ACTION_FILES or total > MAX_ACTION_TREE_BYTES:
                    raise ActionProblem(
                        f"action {text}: its tree has more than {MAX_ACTION_FILES} files or "
                        f"{MAX_ACTION_TREE_BYTES} bytes"
                    )
            else:
                raise ActionProblem(f"action {text}: {path!r} has an unknown type")


def action_repository(
    session: Session, settings: Settings, run_git_dir: Path, entry: dict[str, Any]
) -> Path | None:
    """The bare repository holding a snapshot entry's commit (None when it no longer exists)."""
    source = entry.get("source") or {}
    kind = source.get("kind")
    if kind == "run":
        return run_git_dir
    if kind == "forge":
        repository = session.get(Repository, int(source["repository_id"]))
        if repository is None:
            return None
        return repository_path(settings.repositories_dir, repository.owner.name, repository.name)
    if kind == "upstream":
        name = str(source.get("cache", ""))
        if not name.endswith(".git") or "/" in name:
            return None
        return settings.action_cache_dir / name
    return None


def job_action_keys(snapshot: dict[str, Any], steps: list[dict[str, Any]]) -> list[str]:
    """Every action key ``steps`` may run (nested composite ones included), in first-use order."""
    references = snapshot.get("references") or {}
    actions = snapshot.get("actions") or {}
    keys: list[str] = []
    pending = [references[s["uses"]] for s in steps if s.get("uses") in references]
    while pending:
        key = pending.pop(0)
        if key in keys or key not in actions:
            continue
        keys.append(key)
        pending.extend(
            step["action"] for step in actions[key]["metadata"]["runs"]["steps"] if step["action"]
        )
    return keys
