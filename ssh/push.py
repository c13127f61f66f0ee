"""A push: ``git receive-pack`` under the repository lock, with the hooks' requests answered here.

In the order of ARCHITECTURE.md, "A push, step by step"::

    hooks ready? (fail closed)
    take the repository lock -----------------------------------------------+
      settle: recover what a crash left open (NeedsInspection refuses)      |
      re-assert core.hooksPath and transfer.hideRefs                        |  lock held, and
      open this push's hook listener (loopback TCP)                         |  inherited by
      git receive-pack <-> client     pre-receive -> listener -> answer     |  receive-pack
        bounded by ssh.pump.PUSH; never "idle" while the hook is answered   |
        pre-receive (once, every update, before any ref moves):             |
          ref policy, record the intents, commit, answer "ok"               |
        git moves the refs (or refuses some or all of them)                 |
      settle this push: the refs say what git did: pin + confirm, or abort  |
    release the lock -------------------------------------------------------+
    enqueue the confirmed events (after their commit)
    wait briefly (read-only) for the worker's decisions on this push's events, and print
      one "remote: forge-ci: ..." line per run created (forge_ci.runs.announcements)
    exit status to the client (its events are confirmed and pinned)

The hook holds no database connection: ``answer_hook`` records the intents on its behalf, in this
process, and commits before answering (see ``forge_ci.hookwire``). There is no
``reference-transaction`` hook: git 2.39 starts it twice per ref of a push without ``--atomic``,
which alone cost 7.5 s per 1,000 refs, while the lock held across the push already makes the refs
an exact record of what git did (docs/ssh.md, "The hooks").
"""

from __future__ import annotations

import logging
import secrets
import subprocess
from collections.abc import Callable
from contextlib import ExitStack

import paramiko

from forge_ci import hookwire
from forge_ci.authz import Actor
from forge_ci.db import unavailable_on_failure
from forge_ci.errors import ForgeCIError, Unavailable
from forge_ci.gitstore import ensure_configured, repository_path
from forge_ci.hookchecks import require_hooks
from forge_ci.locks import repository_lock
from forge_ci.models import Repository
from forge_ci.pushes.events import still_offered
from forge_ci.pushes.intents import PushContext, moves_git_will_try, record_intents
from forge_ci.pushes.refpolicy import check_ref_updates
from forge_ci.pushes.settling import needs_inspection, settle_push, settle_repository
from forge_ci.refs import INTERNAL_REF_PREFIX, events_in
from forge_ci.runs.announcements import announcement_lines, await_decisions
from ssh import faults
from ssh.auth import Pusher
from ssh.context import ServerContext
from ssh.hookserver import HookListener
from ssh.pump import pump, push_watch

log = logging.getLogger(__name__)

_OK = hookwire.Answer(True)


def run_receive_pack(
    ctx: ServerContext,
    channel: paramiko.Channel,
    pusher: Pusher,
    repository_id: int,
    full_name: str,
    git_protocol: str | None,
    finish: Callable[[int], None],
) -> None:
    """Serve one push on ``channel``; ``finish(status)`` ends the client's side of it.

    Raises ForgeCIError when the push is refused before git starts (the caller tells the client).
    """
    settings = ctx.settings
    hooked = full_name not in ctx.unhooked  # always, unless the push benchmark built this server
    if hooked:
        require_hooks(settings.hooks_dir)
    owner, name = full_name.split("/", 1)
    path = repository_path(settings.repositories_dir, owner, name)
    with repository_lock(
        settings.locks_dir, repository_id, full_name, settings.repo_lock_timeout
    ) as lock_fd:
        ready = _settle(ctx, repository_id)
        ensure_configured(path, settings.hooks_dir)
        push = PushContext(repository_id, pusher.user_id, secrets.token_hex(16), full_name)
        env = ctx.git_environment(
            **{hookwire.ENV_PUSHER: pusher.name, hookwire.ENV_REPOSITORY: full_name}
        )
        if git_protocol:
            env["GIT_PROTOCOL"] = git_protocol
        # Passed on the command line as well: whatever a repository's config says, these win.
        command = ["git", "-c", f"transfer.hideRefs={INTERNAL_REF_PREFIX.rstrip('/')}"]
        if hooked:
            command += ["-c", f"core.hooksPath={settings.hooks_dir}"]
        else:
            empty = settings.run_dir / "no-hooks"
            empty.mkdir(parents=True, exist_ok=True)
            command += ["-c", f"core.hooksPath={empty}"]
        command += ["receive-pack", str(path)]

        recorded: set[int] = set()  # the ids of the intents the hook recorded
        watch = push_watch()

        def answer(request: hookwire.Request) -> hookwire.Answer:
            # The server works, the client waits: never "idle" (issue #14, finding 5).
            with watch.working():
                return answer_hook(ctx, push, request, recorded)

        with ExitStack() as stack:
            if hooked:
                listener = stack.enter_context(HookListener(push.session_id, answer))
                env.update(listener.environment())
            process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                pass_fds=(lock_fd,),  # see forge_ci.locks: the lock outlives a killed server
            )
            status = pump(channel, process, watch)
        mine: list[int] = []
        if recorded:
            faults.pause_at(ctx.settings, "pause-before-confirm")
            mine = _settle_push(ctx, channel, push)
    # The lock is released: the worker needs it to create this push's runs.
    ready += mine
    if not (mine and _expects_runs(ctx, repository_id)):
        finish(status)  # nothing to tell: the client need not wait for the enqueue
        if ready:
            ctx.queue.enqueue_push_events(ready, still_offered(ctx.database))
        return
    enqueued = ctx.queue.enqueue_push_events(ready, still_offered(ctx.database))
    _announce(ctx, channel, pusher, full_name, mine, wait=enqueued)
    finish(status)


def _expects_runs(ctx: ServerContext, repository_id: int) -> bool:
    """Whether push workflows are on (when off, the worker only records "disabled")."""
    try:
        with ctx.database.session(read_only=True) as session:
            repository = session.get(Repository, repository_id)
            return repository is not None and repository.push_workflows_enabled
    except Exception:  # the push succeeded; a database hiccup only costs the announcement
        log.warning("cannot tell whether push workflows are on", exc_info=True)
        return False


def _announce(
    ctx: ServerContext,
    channel: paramiko.Channel,
    pusher: Pusher,
    full_name: str,
    event_ids: list[int],
    *,
    wait: bool,
) -> None:
    """Tell the pusher which runs this push started (forge_ci.runs.announcements).

    Waits (reading only, at most the ``push_report_wait`` setting's seconds) only when the events
    reached the queue: without Redis the worker finds them at its next scan, so waiting could
    only make the push slower.
    Nothing here may fail the push: its refs and events are already committed.
    """
    actor = Actor(user_id=pusher.user_id, name=pusher.name)
    try:
        timeout = ctx.settings.push_report_wait
        waits = wait and timeout > 0
        decided = await_decisions(ctx.database.session, event_ids, timeout) if waits else set()
        lines = announcement_lines(
            ctx.database.session, actor, full_name, ctx.settings.public_url, event_ids, decided
        )
    except Exception:  # the push is over and succeeded; this is only news about it
        log.exception("telling %s about the runs of a push to %s failed", pusher.name, full_name)
        return
    # git prints the remote's own messages as "remote: ..."; these come after its protocol has
    # ended (on the SSH stderr channel), so they carry the same prefix themselves.
    _tell(channel, "".join(f"remote: {line}\n" for line in lines))


def _settle(ctx: ServerContext, repository_id: int) -> list[int]:
    with unavailable_on_failure(), ctx.database.session() as session:
        return settle_repository(session, ctx.settings, repository_id).confirmed


def _settle_push(ctx: ServerContext, channel: paramiko.Channel, push: PushContext) -> list[int]:
    """Confirm what git moved in ``push`` (see settle_push); the ids confirmed, to enqueue.

    The push itself is over and git's status stands whatever happens here: what cannot be
    settled now is settled before the next write (or by the worker's scan), and the pusher is
    told so.
    """
    try:
        with unavailable_on_failure(), ctx.database.session() as session:
            settled = settle_push(session, ctx.settings, push)
    except ForgeCIError as exc:
        log.warning("settling %s after a push failed: %s", push.full_name, exc)
        _tell(channel, f"forge-ci: warning: {exc.message}\n")
        return []
    except Exception:  # a bug, or the disk (pins): the refs moved all the same
        log.exception("settling %s after a push failed", push.full_name)
        _tell(
            channel,
            "forge-ci: warning: this push's events could not be confirmed yet (an internal "
            "error, logged); they are settled before the next write to the repository\n",
        )
        return []
    if settled.problems:
        _tell(
            channel,
            f"forge-ci: warning: {needs_inspection(push.full_name, settled.problems).message}\n",
        )
    return settled.confirmed


def answer_hook(
    ctx: ServerContext, push: PushContext, request: hookwire.Request, recorded: set[int]
) -> hookwire.Answer:
    """Decide the hook request of ``push``; every failure becomes a refusal with the reason.

    The ids of the intents recorded (settled after receive-pack) go into ``recorded``.
    """
    try:
        if request.hook != "pre-receive":
            return hookwire.Answer(False, f"forge-ci: unknown hook {request.hook!r}")
        check_ref_updates(request.updates)
        faults.pause_at(ctx.settings, "pause-before-record")
        # What git will really try (the client's old values are checked only later, by git):
        # before the event filter, since a deletion "0000 -> 0000" still deletes.
        moves = moves_git_will_try(push.open_git(ctx.settings.repositories_dir), request.updates)
        try:
            with unavailable_on_failure(), ctx.database.session() as session:
                ids = record_intents(session, push, events_in(moves))
        except Unavailable:
            return hookwire.Answer(
                False,
                "forge-ci: this push cannot be recorded because the database is "
                "unavailable; no ref was changed. Try again later.",
            )
        recorded.update(ids)
        faults.pause_at(ctx.settings, "pause-before-answer")
        return _OK
    except ForgeCIError as exc:
        return hookwire.Answer(False, f"forge-ci: {exc.message}")


def _tell(channel: paramiko.Channel, text: str) -> None:
    try:
        channel.sendall_stderr(text.encode())
    except (OSError, EOFError, paramiko.SSHException):
        pass
