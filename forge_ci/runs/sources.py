"""Reading what a run needs from git: branches, workflow files at a commit, changed paths.

Everything here reads the bare repository through pygit2 and never executes anything from it.
Workflow files are read from an exact commit, never from a branch that may have moved since.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pygit2
from pygit2.enums import FileMode, ObjectType

from forge_ci.errors import InvalidInput, NotFound
from forge_ci.gitstore import INTERNAL_REF_PREFIX, open_repository, repository_path
from forge_ci.models import Repository
from forge_ci.refs import is_zero
from forge_ci.settings import Settings

WORKFLOW_DIR = ".github/workflows"
#: At most this many workflow files are inspected for one event (seed: Automatic Push Workflows).
MAX_WORKFLOW_FILES = 64
#: The workflow loader's input limit; larger blobs are refused without being read.
MAX_WORKFLOW_BYTES = 64 * 1024
#: Beyond this many changed paths a push counts as "changed paths unknown" (path filters match).
MAX_CHANGED_PATHS = 10_000

_WORKFLOW_NAME = re.compile(r"[A-Za-z0-9_][\x21-\x7e]*\.(yml|yaml)\Z")


def git_repository(settings: Settings, repository: Repository) -> pygit2.Repository:
    """The bare repository of ``repository``."""
    return open_repository(
        repository_path(settings.repositories_dir, repository.owner.name, repository.name)
    )


def workflow_path_problem(path: str) -> str | None:
    """Why ``path`` cannot name a workflow file, or None.

    Workflow files live directly under ``.github/workflows/``, end in ``.yml`` or ``.yaml`` and
    have a printable ASCII name starting with a letter, digit or underscore.
    """
    directory, _, name = path.rpartition("/")
    if directory != WORKFLOW_DIR:
        return f"workflow files live directly under {WORKFLOW_DIR}/, not {path!r}"
    if not _WORKFLOW_NAME.match(name):
        return (
            f"{path!r} is not a workflow file name: use ASCII letters, digits and punctuation, "
            "starting with a letter, digit or underscore, ending in .yml or .yaml"
        )
    return None


def resolve_branch(git: pygit2.Repository, branch: str) -> str:
    """The commit an existing local branch points at, resolved exactly once.

    Only plain branch names are accepted: no ``refs/...`` names (so no tags or hidden
    ``refs/forge-ci/*`` pins), no revision expressions (``main~1``, ``HEAD``, ``@{u}``).
    """
    if not branch or branch.startswith("refs/") or branch == "HEAD":
        raise InvalidInput(f"give a branch name such as main, not {branch!r}")
    ref_name = f"refs/heads/{branch}"
    if not pygit2.reference_is_valid_name(ref_name) or branch.startswith("-"):
        raise InvalidInput(f"{branch!r} is not a valid branch name")
    if ref_name.startswith(INTERNAL_REF_PREFIX):
        raise InvalidInput(f"{branch!r} is not a branch")
    try:
        reference = git.references[ref_name]
    except KeyError:
        raise NotFound(f"branch {branch} does not exist") from None
    target = reference.resolve().target
    try:
        commit = git[target]
    except KeyError:
        raise NotFound(f"branch {branch} points at a missing commit") from None
    if commit.type != ObjectType.COMMIT:
        raise InvalidInput(f"branch {branch} does not point at a commit")
    return str(commit.id)


def _commit(git: pygit2.Repository, sha: str) -> pygit2.Commit:
    try:
        obj = git[sha]
    except (KeyError, ValueError):
        raise NotFound(f"commit {sha} is not in the repository") from None
    if not isinstance(obj, pygit2.Commit):
        raise NotFound(f"{sha} is not a commit")
    return obj


def _workflow_tree(git: pygit2.Repository, sha: str) -> pygit2.Tree | None:
    tree = _commit(git, sha).tree
    for part in WORKFLOW_DIR.split("/"):
        try:
            entry = tree[part]
        except KeyError:
            return None
        if entry.filemode != FileMode.TREE:
            return None
        child = git[entry.id]
        assert isinstance(child, pygit2.Tree)
        tree = child
    return tree


@dataclass(frozen=True)
class WorkflowFiles:
    """The workflow files of a commit, in name order, and how many were not inspected."""

    paths: tuple[str, ...]
    omitted: tuple[str, ...]


def list_workflow_files(git: pygit2.Repository, sha: str) -> WorkflowFiles:
    """Regular files with a workflow name directly under ``.github/workflows`` at ``sha``.

    Symlinks, submodules, directories and badly named files are not workflow files. Only the
    first 64 (by name) are returned; the rest are named in ``omitted``.
    """
    tree = _workflow_tree(git, sha)
    if tree is None:
        return WorkflowFiles((), ())
    names = sorted(
        entry.name
        for entry in tree
        if entry.name is not None
        and entry.filemode in (FileMode.BLOB, FileMode.BLOB_EXECUTABLE)
        and workflow_path_problem(f"{WORKFLOW_DIR}/{entry.name}") is None
    )
    paths = tuple(f"{WORKFLOW_DIR}/{name}" for name in names)
    return WorkflowFiles(paths[:MAX_WORKFLOW_FILES], paths[MAX_WORKFLOW_FILES:])


@dataclass(frozen=True)
class WorkflowBlob:
    """One workflow file read at a commit; ``data`` is None when it is over the size limit."""

    path: str
    size: int
    data: bytes | None


def read_workflow_file(git: pygit2.Repository, sha: str, path: str) -> WorkflowBlob:
    """The workflow file ``path`` exactly as stored in ``sha``; NotFound when it is absent."""
    problem = workflow_path_problem(path)
    if problem:
        raise InvalidInput(problem)
    tree = _workflow_tree(git, sha)
    name = path.rpartition("/")[2]
    entry = None
    if tree is not None:
        try:
            entry = tree[name]
        except KeyError:
            entry = None
    if entry is None or entry.filemode not in (FileMode.BLOB, FileMode.BLOB_EXECUTABLE):
        raise NotFound(f"{path} does not exist at commit {sha[:12]}")
    blob = git[entry.id]
    assert isinstance(blob, pygit2.Blob)
    if blob.size > MAX_WORKFLOW_BYTES:
        return WorkflowBlob(path, blob.size, None)
    return WorkflowBlob(path, blob.size, bytes(blob.data))


def changed_paths(
    git: pygit2.Repository, ref: str, old: str, new: str, default_branch: str | None
) -> list[str] | None:
    """The paths that differ between ``old`` and ``new`` of ``ref``, sorted; None when unknown.

    For a new branch (``old`` is all zeros) the comparison is against where the branch left the
    default branch (their merge base). The first push of the default branch itself, a missing
    default branch, no common ancestor or a new branch without commits of its own make the
    changes unknown, and path filters then match
    (running too often is recoverable, silently not running a check is not). Very large diffs
    also count as unknown.
    """
    new_commit = _commit(git, new)
    if is_zero(old):
        if default_branch is None or ref == f"refs/heads/{default_branch}":
            return None
        try:
            base_tip = git.references[f"refs/heads/{default_branch}"].resolve().target
        except KeyError:
            return None
        base = git.merge_base(base_tip, new_commit.id)
        if base is None or str(base) == new:
            # No common history, or no commit of its own yet (the branch starts at a commit of
            # the default branch, its tip or an older one): nothing to compare, so unknown.
            return None
        old_tree = _commit(git, str(base)).tree
    else:
        try:
            old_tree = _commit(git, old).tree
        except NotFound:
            return None
    diff = old_tree.diff_to_tree(new_commit.tree)
    paths: set[str] = set()
    for delta in diff.deltas:
        for file in (delta.old_file, delta.new_file):
            if file.path:
                paths.add(file.path)
        if len(paths) > MAX_CHANGED_PATHS:
            return None
    return sorted(paths)
