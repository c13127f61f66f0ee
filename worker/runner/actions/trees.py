"""Action trees: downloaded through the attempt's API once per job and unpacked outside the
workspace, at ``<runner dir>/_actions/<commit>/<path or _root>``.

The archive is the action's folder at its pinned commit, served like the source archive (the
same 64 MiB / 30 s bounds) and checked completely by :mod:`worker.runner.archive` before a byte
is written: a hard link, a traversal path or a device refuses the whole action, and nothing of
it runs. The action's symbolic links are kept (made last, never written through; their targets
resolve in the job's container).

Every action of the job is fetched ahead, in the order of first use, by one background thread
started with the job (:meth:`ActionTrees.prefetch`), so that downloading and unpacking overlap
the checkout and the steps before the action: a step waits only for what is not there yet. A
tree the thread could not make is fetched again by the step itself, which then reports why.
Once a node action's tree is unpacked, its ``post`` script is compiled (never run) into the
job's node compile cache (:mod:`worker.runner.actions.codecache`).
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable, Iterable

from forge_ci.protocol import Action
from worker.runner.actions.codecache import CompileCache
from worker.runner.archive import ArchiveRefused, extract_archive
from worker.runner.checkout import CheckoutError, download_source
from worker.runner.client import ApiClient
from worker.runner.watchdog import Watchdog


class ActionUnavailable(Exception):
    """An action's tree could not be fetched or was refused; the message names the action."""


class ActionTrees:
    """The job's unpacked actions, by key."""

    def __init__(
        self,
        client: ApiClient,
        execution_id: str,
        runner_dir: str,
        watchdog: Watchdog,
        interrupted: Callable[[], bool],
    ) -> None:
        self.client = client
        self.execution_id = execution_id
        self.root = os.path.join(runner_dir, "_actions")
        self.watchdog = watchdog
        self.interrupted = interrupted
        self._ready: dict[str, str] = {}
        self._lock = threading.Lock()
        #: Keys the prefetch thread has yet to finish (set when it is done with each).
        self._pending: dict[str, threading.Event] = {}
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        self.compile_cache = CompileCache(runner_dir)
        #: Keys of actions not to compile ahead (codecache.opted_out).
        self.cold: set[str] = set()

    def prefetch(self, actions: Iterable[Action]) -> None:
        """Fetch and unpack ``actions`` ahead, in order, in a background thread."""
        queue = [action for action in actions if action.key not in self._pending]
        if not queue:
            return
        for action in queue:
            self._pending[action.key] = threading.Event()
        self._thread = threading.Thread(
            target=self._prefetch, args=(queue,), name="action-trees", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        """Stop the prefetch thread (before the runner's folder is removed)."""
        self._closed.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.compile_cache.close()

    def _stopping(self) -> bool:
        return self._closed.is_set() or self.watchdog.halted()

    def _prefetch(self, queue: list[Action]) -> None:
        for action in queue:
            done = self._pending[action.key]
            try:
                if not self._stopping():
                    self._make(action, self._stopping)
            except ActionUnavailable:
                # Left for the step, which fetches it again and reports why it failed.
                shutil.rmtree(self._target(action), ignore_errors=True)
            finally:
                done.set()

    def _target(self, action: Action) -> str:
        return os.path.join(self.root, action.commit, action.path or "_root")

    def directory(self, action: Action) -> str:
        """The folder of ``action``'s tree, waiting for the prefetch or fetching it now."""
        pending = self._pending.get(action.key)
        if pending is not None:
            while not pending.wait(0.05):
                if self.interrupted():
                    break
        with self._lock:
            known = self._ready.get(action.key)
        if known is not None:
            return known
        return self._make(action, self.interrupted)

    def _make(self, action: Action, interrupted: Callable[[], bool]) -> str:
        with self._lock:
            known = self._ready.get(action.key)
        if known is not None:
            return known
        what = f"the action {action.reference} ({action.commit[:12]})"
        try:
            data = download_source(
                self.client,
                action.archive_path,
                self.execution_id,
                self.watchdog,
                interrupted,
                what=what,
            )
        except CheckoutError as exc:
            raise ActionUnavailable(str(exc)) from None
        target = self._target(action)
        os.makedirs(target, 0o755, exist_ok=True)
        if os.listdir(target):
            raise ActionUnavailable(f"{what}: {target} is not empty")
        try:
            extract_archive(data, target, interrupted, links=True)
        except ArchiveRefused as exc:
            raise ActionUnavailable(f"{what} was refused: {exc}") from None
        with self._lock:
            self._ready[action.key] = target
        runs = action.metadata.runs
        if runs.post and action.key not in self.cold and not interrupted():
            self.compile_cache.warm([os.path.join(target, runs.post)])
        return target
