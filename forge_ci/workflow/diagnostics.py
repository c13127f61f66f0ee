"""Located workflow problems and the error that carries them.

Every check in this package reports into one :class:`Problems` collector instead of raising, so
that a person fixing a workflow sees every problem of the file at once. ``parse_workflow`` raises
:class:`WorkflowInvalid` at the end when the collector is not empty.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from forge_ci.errors import InvalidInput
from forge_ci.records import record

#: Beyond this many problems the rest are summarised in one line: the input is bounded (64 KiB),
#: but a file of 8,000 bad keys should not produce a response of 8,000 lines.
MAX_DIAGNOSTICS = 200


@record(frozen=True, order=True, slots=True)
class Diagnostic:
    """One problem in a workflow file, at a 1-based line and column of the source text."""

    line: int
    column: int
    message: str

    def as_dict(self) -> dict[str, int | str]:
        """The JSON shape used by the CLI and the web front door."""
        return {"line": self.line, "column": self.column, "message": self.message}


class WorkflowInvalid(InvalidInput):
    """A workflow file is outside the supported subset or malformed; see ``diagnostics``."""

    code = "workflow_invalid"

    def __init__(
        self,
        path: str,
        diagnostics: list[Diagnostic],
        notices: tuple[Diagnostic, ...] = (),
    ) -> None:
        self.path = path
        self.diagnostics = sorted(diagnostics)
        #: The notices found before the file was refused (what it would be accepted with).
        self.notices = notices
        first = self.diagnostics[0] if self.diagnostics else Diagnostic(1, 1, "invalid workflow")
        count = len(self.diagnostics)
        more = f" (and {count - 1} more)" if count > 1 else ""
        super().__init__(f"{path}:{first.line}:{first.column}: {first.message}{more}")


class Located(Protocol):
    """Anything with a 1-based source position: YAML nodes and diagnostics alike."""

    @property
    def line(self) -> int: ...

    @property
    def column(self) -> int: ...


class Problems:
    """Collects diagnostics for one file; the checks of every module report here.

    Besides problems it keeps *notices*: what the file asks for that forge-ci accepts but does
    not do (an event that never fires, a permission no token carries). Notices never make a
    file invalid; they are listed wherever the file's outcome is shown, so nothing is silent.
    """

    def __init__(self) -> None:
        self._items: list[Diagnostic] = []
        self._seen: set[Diagnostic] = set()
        self._dropped = 0
        self._notices: dict[str, Diagnostic] = {}

    def add(self, line: int, column: int, message: str) -> None:
        """Record a problem at an explicit position (used for text-level problems)."""
        item = Diagnostic(max(line, 1), max(column, 1), message)
        if item in self._seen:
            return
        if len(self._items) >= MAX_DIAGNOSTICS:
            self._dropped += 1
            return
        self._seen.add(item)
        self._items.append(item)

    def at(self, where: Located, message: str) -> None:
        """Record a problem at the position of a YAML node."""
        self.add(where.line, where.column, message)

    def notice(self, where: Located, message: str) -> None:
        """Record a notice; the same message is kept once, at its first position."""
        if message not in self._notices and len(self._notices) < MAX_DIAGNOSTICS:
            self._notices[message] = Diagnostic(max(where.line, 1), max(where.column, 1), message)

    def notices(self) -> tuple[Diagnostic, ...]:
        """Every notice, ordered by position."""
        return tuple(sorted(self._notices.values()))

    def hint(self, word: str, choices: Iterable[str]) -> str:
        """:func:`did_you_mean`, skipped once no more problems will be kept (it is not free)."""
        if len(self._items) >= MAX_DIAGNOSTICS:
            return ""
        return did_you_mean(word, choices)

    def __bool__(self) -> bool:
        return bool(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def sorted(self) -> list[Diagnostic]:
        """Every problem, ordered by position, with a last line when some were dropped."""
        items = sorted(self._items)
        if self._dropped:
            last = items[-1]
            items.append(
                Diagnostic(last.line, last.column, f"{self._dropped} more problems not shown")
            )
        return items

    def raise_if_any(self, path: str) -> None:
        """End the parse: raise ``WorkflowInvalid`` when anything was recorded."""
        if self._items:
            raise WorkflowInvalid(path, self.sorted(), self.notices())


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """A `` did you mean "x"?`` suffix when ``word`` is an obvious typo of one of ``choices``."""
    options = list(choices)
    lowered = {choice.lower(): choice for choice in options}
    if word.lower() in lowered and lowered[word.lower()] != word:
        return f'; did you mean "{lowered[word.lower()]}"?'
    normalised = word.replace("_", "-").lower()
    if normalised in lowered and lowered[normalised] != word:
        return f'; did you mean "{lowered[normalised]}"?'
    import difflib  # only a file with a typo pays for it (and heapq), not every validation

    close = difflib.get_close_matches(word, options, n=1, cutoff=0.75)
    if close:
        return f'; did you mean "{close[0]}"?'
    return ""


def quote_list(items: Iterable[str]) -> str:
    """``[a, b]`` as written in messages about lists of patterns, labels or keys."""
    return "[" + ", ".join(items) + "]"
