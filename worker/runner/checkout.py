"""The built-in checkout: download the pinned commit's ``tar`` and extract it into the workspace.

It runs for a job without a checkout step, before the first step as job setup, and as a
checkout step of a plan made before checkout inputs existed (a checkout step with inputs runs
:mod:`worker.runner.gitcheckout` instead, which makes a real ``.git``). It creates no
``.git``, fetches no history, submodules or LFS objects, and needs an empty workspace (only
the runner's ``.home`` and ``.tmp``): files left by earlier steps make it fail rather than mix
with the source.

The download is bounded to 30 s and 64 MiB; the archive is checked completely before anything
is written (:mod:`worker.runner.archive`). The server refuses it for a job with
``permissions: {contents: none}``, for an attempt being cancelled, and for a commit whose tree
holds links, submodules, reserved paths or too much.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from forge_ci import protocol
from forge_ci.protocol import SourceRequest, request_body
from worker.runner.archive import MAX_ARCHIVE_BYTES, ArchiveRefused, Extracted, extract_archive
from worker.runner.client import ApiClient, NoAnswer, Refused
from worker.runner.clock import now
from worker.runner.watchdog import Watchdog

SOURCE_SECONDS = 30.0
RUNNER_NAMES = frozenset({".home", ".tmp"})


class CheckoutError(Exception):
    """The source could not be checked out; the message says why."""


class Interrupted(Exception):
    """A download stopped because the job is being stopped (cancel, deadline, lost lease)."""


def download_source(
    client: ApiClient,
    path: str,
    execution_id: str,
    watchdog: Watchdog,
    interrupted: Callable[[], bool],
    what: str = "the source",
) -> bytes:
    """The archive at ``path`` (at most 64 MiB, within 30 s); ``what`` names it in errors."""
    buffer = bytearray()

    def sink(data: bytes) -> None:
        if interrupted():
            raise Interrupted
        buffer.extend(data)

    payload = protocol.dumps(request_body(SourceRequest(execution_id)))
    sent_at = now()
    try:
        client.post(
            path,
            payload,
            until=min(sent_at + SOURCE_SECONDS, watchdog.safe_until()),
            give_up=interrupted,
            sink=sink,
            limit=MAX_ARCHIVE_BYTES,
            restart=buffer.clear,
        )
    except Interrupted:
        raise CheckoutError(f"the download of {what} was interrupted") from None
    except NoAnswer as exc:
        raise CheckoutError(f"{what} could not be downloaded: {exc}") from None
    except Refused as refused:
        if refused.attempt is not None:
            watchdog.observe(refused.attempt, sent_at)
        raise CheckoutError(f"the server refused {what}: {refused.message}") from None
    return bytes(buffer)


def check_out(
    client: ApiClient,
    path: str,
    execution_id: str,
    workspace: str,
    watchdog: Watchdog,
    interrupted: Callable[[], bool],
) -> Extracted:
    """Download and extract the source into ``workspace``; CheckoutError when it cannot."""
    if not path:
        raise CheckoutError("this job may not read the source (permissions: contents: none)")
    left = sorted(set(os.listdir(workspace)) - RUNNER_NAMES)
    if left:
        shown = ", ".join(repr(name) for name in left[:5])
        more = f" and {len(left) - 5} more" if len(left) > 5 else ""
        raise CheckoutError(
            f"the workspace must be empty before the checkout, but earlier steps left {shown}{more}"
        )
    data = download_source(client, path, execution_id, watchdog, interrupted)
    try:
        return extract_archive(data, workspace, interrupted)
    except ArchiveRefused as exc:
        raise CheckoutError(f"the source archive was refused: {exc}") from None
