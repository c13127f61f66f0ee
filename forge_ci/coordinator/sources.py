"""Source archives: the pinned commit of an attempt's run as a ``tar``, for the runner's checkout.

Only a live, running attempt bound to the asking runner instance reads the source; its run's
requester must still be allowed to run code, and its job must read contents (a job with
``permissions: {contents: none}`` gets none). The tree is checked before ``git archive`` runs,
and the archive is bounded while it is made::

    attempt request (locked, reconciled): running, this execution, no cancellation requested
      ──► requester still authorized (else the attempt is cancelled, like on a heartbeat)
      ──► job may read contents ──► commit still pinned      (the transaction ends here)
    tree check (pygit2): no symlinks, no submodules, no .git anywhere, no .home or .tmp at the
      top, at most 10,000 regular files of at most 64 MiB together
      ──► git archive --format=tar <sha>: at most 30 s and 64 MiB, else refused

Executable files keep their mode (git archive writes 0755 / 0644); ``.gitattributes``
(``export-ignore``, ``export-subst``) applies as git applies it. ``git archive`` runs without
any user or system git configuration, so no filter or other command configured outside the
repository can run; a repository cannot configure commands of its own.
"""

from __future__ import annotations

import os
import selectors
import subprocess
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO

import pygit2
from pygit2.enums import FileMode, ObjectType
from sqlalchemy.orm import Session

from forge_ci.coordinator.assignments import reads_contents
from forge_ci.coordinator.attempts import running_job
from forge_ci.coordinator.errors import SourceNotPermitted, SourceRefused
from forge_ci.gitstore import clean_git_environment, repository_path
from forge_ci.models import Attempt, Repository
from forge_ci.protocol import SourceRequest
from forge_ci.runs.pins import pinned_commit

MAX_SOURCE_BYTES = 64 * 1024 * 1024
MAX_SOURCE_FILES = 10_000
SOURCE_SECONDS = 30.0
#: Names the runner owns in the workspace (``.git`` at any depth, in any letter case).
RESERVED_TOP_LEVEL = frozenset({b".home", b".tmp"})
_READ_SIZE = 256 * 1024
#: Archives up to this size stay in memory; larger ones spill to an unlinked temporary file.
_SPOOL_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class SourceTarget:
    """Which commit of which bare repository an attempt may read."""

    repository_dir: Path
    sha: str
    #: The run's ``refs/forge-ci/pipelines/<token>`` that keeps ``sha`` alive.
    pin_ref: str


@dataclass(frozen=True)
class SourceArchive:
    """A finished archive: ``file`` is positioned at 0 and the caller closes it."""

    file: IO[bytes]
    size: int
    sha: str


def locate_source(
    session: Session,
    repositories_dir: Path,
    attempt: Attempt,
    request: SourceRequest,
    now: datetime,
    *,
    job_token: bool = False,
) -> SourceTarget | str:
    """The commit ``attempt`` may read, or why its requester may no longer run code.

    The caller holds the attempt's lock and has reconciled it. A refusal string means the
    attempt was just cancelled (the caller commits that and refuses the request); other
    refusals raise. ``job_token``: the request presented the job token (``github.token``),
    which steps hold and which does not know the execution: it must still be running.
    """
    job = running_job(
        session, attempt, request.execution_id, now, "fetching the source", by_job_token=job_token
    )
    if isinstance(job, str):
        return job
    run = job.run
    if not reads_contents(job.definition()):
        raise SourceNotPermitted(
            f"job {job.key} has permissions contents: none, so it gets no source"
        )
    repository = session.get(Repository, run.repository_id)
    if repository is None:
        raise SourceRefused("the repository of this run no longer exists")
    directory = repository_path(repositories_dir, repository.owner.name, repository.name)
    return SourceTarget(directory, run.sha, run.pin_ref)


def check_tree(git: pygit2.Repository, sha: str) -> int:
    """Refuse a tree the runner would refuse; return its number of regular files."""
    commit = git.get(sha)
    if not isinstance(commit, pygit2.Commit):
        raise SourceRefused(f"commit {sha[:12]} is no longer in the repository")
    files = 0
    total = 0
    stack: list[tuple[bytes, pygit2.Tree]] = [(b"", commit.tree)]
    while stack:
        prefix, tree = stack.pop()
        for entry in tree:
            name = entry.raw_name
            path = prefix + name
            shown = path.decode("utf-8", "replace")
            if name.lower() == b".git":
                raise SourceRefused(f"the commit contains {shown!r}; .git is reserved")
            if not prefix and name in RESERVED_TOP_LEVEL:
                raise SourceRefused(
                    f"the commit contains {shown!r}; the runner keeps HOME in .home and TMPDIR "
                    "in .tmp, so these top-level names are reserved"
                )
            mode = entry.filemode
            if mode == FileMode.TREE:
                child = git[entry.id]
                assert isinstance(child, pygit2.Tree)
                stack.append((path + b"/", child))
            elif mode == FileMode.LINK:
                raise SourceRefused(f"the commit contains the symbolic link {shown!r}")
            elif mode == FileMode.COMMIT:
                raise SourceRefused(
                    f"the commit contains the submodule {shown!r}; submodules are not supported"
                )
            elif mode in (FileMode.BLOB, FileMode.BLOB_EXECUTABLE):
                files += 1
                if files > MAX_SOURCE_FILES:
                    raise SourceRefused(
                        f"the commit has more than {MAX_SOURCE_FILES} files, the checkout limit"
                    )
                kind, size = git.odb.read_header(entry.id)
                if kind != ObjectType.BLOB:
                    raise SourceRefused(f"{shown!r} is not a file")
                total += size
                if total > MAX_SOURCE_BYTES:
                    raise SourceRefused(
                        f"the files of the commit are larger than {MAX_SOURCE_BYTES} bytes "
                        "(64 MiB), the checkout limit"
                    )
            else:
                raise SourceRefused(f"the commit contains {shown!r} of unknown type")
    return files


def build_archive(
    target: SourceTarget,
    *,
    seconds: float = SOURCE_SECONDS,
    limit: int = MAX_SOURCE_BYTES,
) -> SourceArchive:
    """The ``tar`` of ``target`` made by ``git archive``, within ``seconds`` and ``limit`` bytes."""
    started = time.monotonic()
    try:
        git = pygit2.Repository(str(target.repository_dir))
    except pygit2.GitError:
        raise SourceRefused("the repository of this run cannot be opened") from None
    if pinned_commit(git, target.pin_ref) != target.sha:
        raise SourceRefused(
            f"commit {target.sha[:12]} is no longer pinned for this run; its source is gone"
        )
    check_tree(git, target.sha)
    spool: IO[bytes] = tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES)  # noqa: SIM115
    try:
        size = _run_git_archive(target, spool, started + seconds, seconds, limit)
    except BaseException:
        spool.close()
        raise
    spool.seek(0)
    return SourceArchive(spool, size, target.sha)


def _run_git_archive(
    target: SourceTarget, out: IO[bytes], deadline: float, seconds: float, limit: int
) -> int:
    command = [
        "git",
        f"--git-dir={target.repository_dir}",
        # 0644 / 0755 whatever the repository's configuration says.
        "-c",
        "tar.umask=0022",
        "archive",
        "--format=tar",
        target.sha,
    ]
    return stream_git(command, out, deadline, seconds, limit, "source archive")


def stream_git(
    command: list[str],
    out: IO[bytes],
    deadline: float,
    seconds: float,
    limit: int,
    what: str,
) -> int:
    """Run git ``command`` (no user or system configuration) and copy its output to ``out``.

    At most ``limit`` bytes, until ``deadline`` (monotonic); else SourceRefused naming ``what``.
    """
    with tempfile.TemporaryDirectory(prefix="forge-ci-git-") as home:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=clean_git_environment(home),
            cwd=home,
        )
        assert process.stdout is not None and process.stderr is not None
        size = 0
        errors = bytearray()
        refusal: SourceRefused | None = None
        selector = selectors.DefaultSelector()
        selector.register(process.stdout, selectors.EVENT_READ)
        selector.register(process.stderr, selectors.EVENT_READ)
        try:
            while selector.get_map():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    refusal = SourceRefused(
                        f"making the {what} took longer than {seconds:g} seconds"
                    )
                    break
                for key, _ in selector.select(remaining):
                    stream = key.fileobj
                    data = os.read(key.fd, _READ_SIZE)
                    if not data:
                        selector.unregister(stream)
                        continue
                    if stream is process.stderr:
                        if len(errors) < 4096:
                            errors += data[: 4096 - len(errors)]
                        continue
                    size += len(data)
                    if size > limit:
                        refusal = SourceRefused(
                            f"the {what} is larger than {limit} bytes ({limit // 2**20} MiB)"
                        )
                        break
                    out.write(data)
                if refusal is not None:
                    break
        finally:
            selector.close()
            if refusal is not None and process.poll() is None:
                process.kill()
            process.stdout.close()
            process.stderr.close()
            status = process.wait()
        if refusal is not None:
            raise refusal
        if status != 0:
            first = errors.decode("utf-8", "replace").strip().splitlines()[:1]
            detail = f": {first[0][:200]}" if first else ""
            raise SourceRefused(f"git ({what}) failed with status {status}{detail}")
        return size
