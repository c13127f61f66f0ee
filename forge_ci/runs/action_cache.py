"""The local action cache: actions fetched with git from the configured upstream sources.

One bare repository per action URL under ``<data dir>/action-cache/`` (named by the URL's
SHA-256), filled by the worker at run creation and never by a job. A reference is fetched as a
tag first, then as a branch (a full commit SHA is fetched as itself), into a temporary ref;
the commit it names is pinned under ``refs/forge-ci/actions/<commit>`` in the cache, so a later
force-push upstream or a ``git gc`` of the cache never takes a run's action away. git runs
without user or system configuration, without prompts, within a time limit, and one fetch per
cache repository at a time (a file lock).
"""

from __future__ import annotations

import fcntl
import hashlib
import re
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pygit2

from forge_ci.gitstore import INTERNAL_REF_PREFIX, clean_git_environment

ACTION_PIN_PREFIX = INTERNAL_REF_PREFIX + "actions/"
FETCH_SECONDS = 120.0
_SHA = re.compile(r"[0-9a-f]{40}\Z")
_FETCHED = INTERNAL_REF_PREFIX + "fetched"


@dataclass(frozen=True)
class Fetched:
    """A reference found upstream: the cache holding it and the commit, pinned there."""

    url: str
    cache: Path
    commit: str
    pin_ref: str


def cache_path(cache_dir: Path, url: str) -> Path:
    return cache_dir / (hashlib.sha256(url.encode("utf-8")).hexdigest()[:32] + ".git")


def pin_action(git: pygit2.Repository, commit: str) -> str:
    """Pin ``commit`` under ``refs/forge-ci/actions/<commit>`` (idempotent; never deleted)."""
    name = ACTION_PIN_PREFIX + commit
    git.references.create(name, pygit2.Oid(hex=commit), force=True)
    return name


def peel_commit(git: pygit2.Repository, oid: pygit2.Oid | str) -> str | None:
    """The commit ``oid`` is or (through annotated tags) points at; None when it is not one."""
    try:
        obj = git[oid]
        commit = obj.peel(pygit2.Commit)
    except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError):
        return None
    return str(commit.id)


def _environment(home: str) -> dict[str, str]:
    environment = clean_git_environment(home)
    environment.update({"GIT_ASKPASS": "/bin/false", "GIT_SSH_COMMAND": "ssh -o BatchMode=yes"})
    return environment


@contextmanager
def cache_lock(cache: Path) -> Iterator[None]:
    """Hold the cache repository's lock (fetches and pins; backups copy its refs under it)."""
    cache.parent.mkdir(parents=True, exist_ok=True)
    with open(cache.parent / (cache.name + ".lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def git_reachable(url: str, seconds: float) -> str | None:
    """None when ``git ls-remote`` can read ``url``, else why not (nothing is written)."""
    return _run_git("ls-remote", ["--heads", "--", url], seconds)


def git_fetch(
    git_dir: Path,
    url: str,
    refspecs: list[str],
    seconds: float,
    *,
    extra_config: list[str] | None = None,
    options: list[str] | None = None,
) -> str | None:
    """Run ``git fetch``; None on success, else the last line of why it failed."""
    config = [item for setting in extra_config or [] for item in ("-c", setting)]
    arguments = ["--quiet", "--no-tags", "--no-write-fetch-head", *(options or [])]
    return _run_git(
        "fetch",
        [*arguments, "--", url, *refspecs],
        seconds,
        prefix=[f"--git-dir={git_dir}", "-c", "fetch.fsckObjects=true", *config],
    )


def _run_git(
    verb: str, arguments: list[str], seconds: float, prefix: list[str] | None = None
) -> str | None:
    command = ["git", *(prefix or []), "-c", "protocol.file.allow=always", verb, *arguments]
    with tempfile.TemporaryDirectory(prefix="forge-ci-git-") as home:
        try:
            done = subprocess.run(
                command,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                env=_environment(home),
                cwd=home,
                timeout=seconds,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return f"git {verb} took longer than {seconds:g} seconds"
    if done.returncode == 0:
        return None
    lines = [
        line.strip() for line in done.stderr.decode("utf-8", "replace").splitlines() if line.strip()
    ]
    return (lines[-1] if lines else f"git {verb} failed with status {done.returncode}")[:300]


def fetch_action(
    cache_dir: Path, url: str, ref: str, *, seconds: float = FETCH_SECONDS
) -> Fetched | str:
    """Find ``ref`` (tag, branch or full SHA) at ``url`` and pin it in the cache, or say why not."""
    cache = cache_path(cache_dir, url)
    with cache_lock(cache):
        if not (cache / "HEAD").exists():
            pygit2.init_repository(str(cache), bare=True)
        git = pygit2.Repository(str(cache))
        if _SHA.match(ref):
            commit = peel_commit(git, ref)
            if commit is None:
                problem = git_fetch(cache, url, [ref], seconds)
                commit = peel_commit(git, ref)
                if commit is None:
                    return problem or f"commit {ref} is not there"
            return Fetched(url, cache, commit, pin_action(git, commit))
        problems = []
        for kind in ("tags", "heads"):
            temporary = f"{_FETCHED}/{kind}"
            problem = git_fetch(cache, url, [f"+refs/{kind}/{ref}:{temporary}"], seconds)
            if problem is None:
                commit = peel_commit(git, git.references[temporary].target)
                git.references.delete(temporary)
                if commit is not None:
                    return Fetched(url, cache, commit, pin_action(git, commit))
                problem = f"refs/{kind}/{ref} does not point at a commit"
            problems.append(problem)
        if all("couldn't find remote ref" in problem for problem in problems):
            return f"no tag or branch {ref}"
        return problems[-1]
