"""Action trees: downloaded through the attempt's API once per job and unpacked outside the
workspace, at ``<runner dir>/_actions/<commit>/<path or _root>``.

The archive is the action's folder at its pinned commit, served like the source archive (the
same 64 MiB / 30 s bounds) and checked completely by :mod:`worker.runner.archive` before a byte
is written: a hard link, a traversal path or a device refuses the whole action, and nothing of
it runs. The action's symbolic links are kept (made last, never written through; their targets
resolve in the job's container).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from forge_ci.protocol import Action
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

    def directory(self, action: Action) -> str:
        """The folder of ``action``'s tree, downloading and unpacking it the first time."""
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
                self.interrupted,
                what=what,
            )
        except CheckoutError as exc:
            raise ActionUnavailable(str(exc)) from None
        target = os.path.join(self.root, action.commit, action.path or "_root")
        os.makedirs(target, 0o755, exist_ok=True)
        if os.listdir(target):
            raise ActionUnavailable(f"{what}: {target} is not empty")
        try:
            extract_archive(data, target, self.interrupted, links=True)
        except ArchiveRefused as exc:
            raise ActionUnavailable(f"{what} was refused: {exc}") from None
        self._ready[action.key] = target
        return target
