"""Answers about workflow files kept by blob id: a file's answer depends only on its bytes.

The dispatch form (which files can run by hand, with which inputs) and the scheduler (which files
have a schedule, every minute) would otherwise parse every workflow file again and again. Each
keeps a bounded, thread-safe least-recently-used table of its own.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from threading import Lock
from typing import Generic, TypeVar

import pygit2

from forge_ci.runs.sources import MAX_WORKFLOW_BYTES, read_workflow_file

T = TypeVar("T")


class BlobAnswers(Generic[T]):
    """``answer(git, sha, path)``: ``decide(data, path)`` for the file's bytes, computed once."""

    def __init__(self, decide: Callable[[bytes, str], T], size: int = 1024) -> None:
        self.decide = decide
        self.size = size
        self._answers: OrderedDict[str, T] = OrderedDict()
        self._lock = Lock()

    def answer(self, git: pygit2.Repository, sha: str, path: str) -> tuple[T, bytes] | None:
        """The answer for ``path`` at ``sha`` and the file's bytes; None for a file too large."""
        blob = read_workflow_file(git, sha, path)
        if blob.data is None or blob.size > MAX_WORKFLOW_BYTES:
            return None
        key = str(pygit2.hash(blob.data))
        with self._lock:
            if key in self._answers:
                self._answers.move_to_end(key)
                return self._answers[key], blob.data
        value = self.decide(blob.data, path)
        with self._lock:
            self._answers[key] = value
            while len(self._answers) > self.size:
                self._answers.popitem(last=False)
        return value, blob.data
