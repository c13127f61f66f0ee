"""The checkout step with a real ``.git``: fetch the attempt's source bundle and check it out.

The checkout step (``actions/checkout`` / ``forge-ci/checkout@v1``) receives its inputs in the
step's ``with``, already checked by the workflow engine and with ``ref`` pinned to a commit at
run creation (forge_ci/workflow/checkout.py). The runner::

    POST attempts/<id>/source.bundle   at most 128 MiB within 30 s, streamed to $RUNNER_TEMP
    target = <workspace>/<path>        clean: true empties it first (the workspace's .home and
                                       .tmp stay); clean: false needs it empty or an earlier
                                       checkout (untracked files stay)
    git init; .git/shallow  <- the bundle's refs/forge-ci/shallow/* (fetch-depth N)
    git fetch <bundle>       refs/heads/* -> refs/remotes/origin/*, refs/tags/* -> refs/tags/*
    git checkout             -B <branch> when the checked-out ref is a branch, else --detach

git runs with no system or user configuration and no prompt. The bundle is made by the server
from the run's snapshot, so nothing the job writes can ask for another commit.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Mapping
from typing import Any

from forge_ci import protocol
from forge_ci.protocol import SourceRequest, request_body
from worker.runner.checkout import RUNNER_NAMES, CheckoutError, Interrupted, check_out
from worker.runner.client import ApiClient, NoAnswer, Refused
from worker.runner.clock import now
from worker.runner.evaluation import render
from worker.runner.watchdog import Watchdog

MAX_BUNDLE_BYTES = 128 * 1024 * 1024
BUNDLE_SECONDS = 30.0
GIT_SECONDS = 120.0
COMMIT_REF = "refs/forge-ci/commit"
SHALLOW_PREFIX = "refs/forge-ci/shallow/"


def bundle_path(source_archive_path: str) -> str:
    """``.../attempts/<id>/source.bundle`` beside the assignment's ``source.tar`` path."""
    return source_archive_path.rpartition("/")[0] + "/source.bundle"


def rendered_inputs(
    step_id: str, inputs: Mapping[str, Any], contexts: Mapping[str, Any]
) -> dict[str, Any]:
    """The checkout's inputs with ``with.path`` evaluated now when it is a template
    (``${{ env.SRC }}``); :func:`target_directory` then checks it like a literal path."""
    rendered = dict(inputs)
    rendered["path"] = render(rendered.get("path") or "", contexts, f"step {step_id}: with.path")
    return rendered


def target_directory(workspace: str, relative: str) -> str:
    """``<workspace>/<relative>``, refusing what the workflow engine refuses (checked again).

    ``relative`` may come from an expression (``${{ github.workspace }}/src``): an absolute path
    inside the workspace is taken as the path under it, as actions/checkout does."""
    if "\x00" in relative or any(ord(char) < 32 for char in relative):
        raise CheckoutError(f"with.path {relative!r} contains a control character")
    root_text = os.path.normpath(workspace)
    if relative.startswith("/") and os.path.normpath(relative).startswith(root_text + os.sep):
        relative = os.path.normpath(relative)[len(root_text) + 1 :]
    elif os.path.normpath(relative) == root_text:
        relative = ""
    parts = [part for part in relative.split("/") if part not in ("", ".")]
    if relative.startswith("/") or any(part == ".." or part.lower() == ".git" for part in parts):
        raise CheckoutError(f"with.path {relative!r} must be a relative path in the workspace")
    if parts and parts[0] in RUNNER_NAMES:
        raise CheckoutError(f"with.path {relative!r} is reserved for the runner")
    target = os.path.join(workspace, *parts)
    resolved = os.path.realpath(target)
    root = os.path.realpath(workspace)
    if resolved != root and not resolved.startswith(root + os.sep):
        raise CheckoutError(f"with.path {relative!r} leads outside the workspace")
    return target


def _empty(target: str, workspace: str) -> None:
    keep = RUNNER_NAMES if os.path.realpath(target) == os.path.realpath(workspace) else set()
    for name in os.listdir(target):
        if name in keep:
            continue
        path = os.path.join(target, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)


def _prepare(target: str, workspace: str, clean: bool) -> bool:
    """Make ``target`` ready; True when it already holds a repository (clean: false)."""
    if not os.path.isdir(target):
        if os.path.lexists(target):
            raise CheckoutError(f"{target} exists and is not a directory")
        os.makedirs(target, exist_ok=True)
        return False
    if clean:
        _empty(target, workspace)
        return False
    if os.path.isdir(os.path.join(target, ".git")):
        return True
    left = sorted(set(os.listdir(target)) - RUNNER_NAMES)
    if left:
        shown = ", ".join(repr(name) for name in left[:5])
        raise CheckoutError(
            f"clean: false needs an empty directory or an earlier checkout, but {target} holds "
            f"{shown}"
        )
    return False


def _download(
    client: ApiClient,
    path: str,
    execution_id: str,
    destination: str,
    watchdog: Watchdog,
    interrupted: Callable[[], bool],
) -> int:
    with open(destination, "wb") as out:
        written = 0

        def sink(data: bytes) -> None:
            nonlocal written
            if interrupted():
                raise Interrupted
            out.write(data)
            written += len(data)

        def restart() -> None:
            nonlocal written
            out.seek(0)
            out.truncate()
            written = 0

        payload = protocol.dumps(request_body(SourceRequest(execution_id)))
        sent_at = now()
        try:
            client.post(
                path,
                payload,
                until=min(sent_at + BUNDLE_SECONDS, watchdog.safe_until()),
                give_up=interrupted,
                sink=sink,
                limit=MAX_BUNDLE_BYTES,
                restart=restart,
            )
        except Interrupted:
            raise CheckoutError("the download of the source was interrupted") from None
        except NoAnswer as exc:
            raise CheckoutError(f"the source could not be downloaded: {exc}") from None
        except Refused as refused:
            if refused.attempt is not None:
                watchdog.observe(refused.attempt, sent_at)
            raise CheckoutError(f"the server refused the source: {refused.message}") from None
        return written


def _git(env: Mapping[str, str], *args: str, cwd: str) -> str:
    command = ["git", "-c", "init.defaultBranch=main", "-c", "advice.detachedHead=false", *args]
    try:
        done = subprocess.run(
            command,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=GIT_SECONDS,
            check=False,
        )
    except FileNotFoundError:
        raise CheckoutError("git is not installed in the job image") from None
    except subprocess.TimeoutExpired:
        raise CheckoutError(f"git {args[0]} took longer than {GIT_SECONDS:g} seconds") from None
    if done.returncode != 0:
        detail = (done.stderr.strip().splitlines() or [""])[-1][:300]
        raise CheckoutError(f"git {args[0]} failed with status {done.returncode}: {detail}")
    return done.stdout


def git_environment(home: str, tmp: str) -> dict[str, str]:
    """No system or user configuration, no prompts, no pager."""
    return {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": home,
        "TMPDIR": tmp,
        "LANG": "C.UTF-8",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_PAGER": "cat",
    }


def git_check_out(
    client: ApiClient,
    source_archive_path: str,
    execution_id: str,
    workspace: str,
    env: Mapping[str, str],
    inputs: Mapping[str, object],
    watchdog: Watchdog,
    interrupted: Callable[[], bool],
) -> str:
    """Check the pinned commit out with history into ``with.path``; return the log line."""
    if not source_archive_path:
        raise CheckoutError("this job may not read the source (permissions: contents: none)")
    relative = str(inputs.get("path") or "")
    clean = str(inputs.get("clean", "true")) == "true"
    target = target_directory(workspace, relative)
    existing = _prepare(target, workspace, clean)
    tmp = env["TMPDIR"]
    bundle = os.path.join(tmp, "forge-ci-checkout.bundle")
    try:
        size = _download(
            client, bundle_path(source_archive_path), execution_id, bundle, watchdog, interrupted
        )
        heads = _git(env, "bundle", "list-heads", bundle, cwd=tmp)
        refs = dict(
            (name, sha)
            for sha, _, name in (line.partition(" ") for line in heads.splitlines())
            if name
        )
        sha = refs.get(COMMIT_REF)
        if sha is None:
            raise CheckoutError("the source bundle names no commit")
        if not existing:
            _git(env, "init", "-q", cwd=target)
        shallow = sorted(value for name, value in refs.items() if name.startswith(SHALLOW_PREFIX))
        git_dir = os.path.join(target, ".git")
        if shallow:
            with open(os.path.join(git_dir, "shallow"), "a", encoding="ascii") as out:
                out.write("".join(f"{commit}\n" for commit in shallow))
        _git(
            env, "fetch", "-q", "--no-tags", "--update-head-ok", bundle,
            f"+{COMMIT_REF}:{COMMIT_REF}", "+refs/heads/*:refs/remotes/origin/*",
            "+refs/tags/*:refs/tags/*", cwd=target,
        )  # fmt: skip
        branches = [name for name in refs if name.startswith("refs/heads/")]
        if branches:
            branch = branches[0].removeprefix("refs/heads/")
            _git(env, "checkout", "-q", "--force", "-B", branch, sha, cwd=target)
        else:
            _git(env, "checkout", "-q", "--force", "--detach", sha, cwd=target)
        _git(env, "update-ref", "-d", COMMIT_REF, cwd=target)
        commits = _git(env, "rev-list", "--count", "HEAD", cwd=target).strip()
    finally:
        if os.path.exists(bundle):
            os.unlink(bundle)
    tags = sum(1 for name in refs if name.startswith("refs/tags/"))
    where = relative or "the workspace"
    history = _count(int(commits), "commit") + (" (shallow)" if shallow else " (full history)")
    return f"Checked out {sha} into {where}: {history}, {_count(tags, 'tag')}, {size} bytes\n"


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


PERSIST_NOTICE = (
    "notice: persist-credentials is accepted and has no effect: the checkout uses no credentials "
    "and leaves none in .git\n"
)


def checkout_lines(
    client: ApiClient,
    source_archive_path: str,
    execution_id: str,
    directories: tuple[str, str, str],
    inputs: Mapping[str, object],
    sha: str,
    watchdog: Watchdog,
    interrupted: Callable[[], bool],
) -> list[str]:
    """Check out the job's source; what to say in the log. CheckoutError when it cannot.

    ``directories`` are the workspace, HOME and TMPDIR. Without inputs (the job's implicit
    checkout, plans before issue #15) the pinned tree is extracted from the archive; with
    inputs, a git checkout with history from the source bundle.
    """
    workspace, home, tmp = directories
    if not inputs:
        extracted = check_out(
            client, source_archive_path, execution_id, workspace, watchdog, interrupted
        )
        return [f"Checked out {sha}: {extracted.files} files, {extracted.bytes} bytes\n"]
    lines = [PERSIST_NOTICE] if "persist-credentials" in inputs else []
    environment = git_environment(home, tmp)
    lines.append(
        git_check_out(
            client,
            source_archive_path,
            execution_id,
            workspace,
            environment,
            inputs,
            watchdog,
            interrupted,
        )
    )
    return lines
