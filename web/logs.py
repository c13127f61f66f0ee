"""Job logs for pages: the first pages of an attempt's log, cut into lines.

Records are chunks of output (a line may span chunks, a chunk may hold many lines). Lines are
formed the same way here and in ``static/pipelines.js``: text is joined in cursor order until a
newline; a change of step ends a line. The last line stays *open* when its record did not end
with a newline, so the script continues it with the next page. Text is only ever escaped by
Jinja or set with ``textContent``: a log is never HTML.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from forge_ci.coordinator.logs import PAGE_SIZE, LogLine, read_log_page_in
from forge_ci.repos import RepositoryAccess

#: Pages (of at most 100 records) rendered into the page; the script drains the rest.
INITIAL_PAGES = 5
#: Records asked for first. A fast job's records hold hundreds of lines each (32 KiB), so a few
#: reach INITIAL_LINES; reading 100 of them would move 3 MB to show a tenth of it.
FIRST_RECORDS = 16
#: Lines rendered into the page at most; more arrive through the script (or log.txt). No record
#: is taken once this many lines are formed, so the page ends at most one record beyond it.
INITIAL_LINES = 5000


@dataclass
class Line:
    step_id: str
    stream: str
    text: str


@dataclass
class Lines:
    """Lines being formed from records; ``open`` is True while the last line may continue."""

    lines: list[Line] = field(default_factory=list)
    open: bool = False

    def add(self, record: LogLine) -> None:
        pieces = record.text.split("\n")
        for index, piece in enumerate(pieces):
            piece = piece.removesuffix("\r")
            last = index == len(pieces) - 1
            if index == 0 and self.open and self.lines[-1].step_id == record.step_id:
                self.lines[-1].text += piece
            elif index > 0 and last and piece == "":
                self.open = False
                continue
            elif piece or not last:
                self.lines.append(Line(record.step_id, record.stream, piece))
            else:
                continue
            self.open = last


@dataclass
class LogSnapshot:
    """What the page shows of one attempt's log before any script runs."""

    lines: list[Line]
    open: bool
    next_cursor: int
    has_more: bool
    complete: bool


def log_snapshot(
    session: Session, access: RepositoryAccess, run_number: int, attempt_id: int
) -> LogSnapshot:
    lines = Lines()
    cursor = 0
    has_more = True
    complete = False
    remaining = INITIAL_PAGES * PAGE_SIZE
    limit = FIRST_RECORDS
    while True:
        page = read_log_page_in(session, access, run_number, attempt_id, cursor, limit)
        for record in page.records:
            if len(lines.lines) >= INITIAL_LINES:
                # Records of a fast job hold hundreds of lines each: stop inside the page and
                # let the script continue after the last record shown.
                return LogSnapshot(lines.lines, lines.open, cursor, True, False)
            lines.add(record)
            cursor = record.cursor
        cursor = page.next_cursor
        has_more = page.has_more
        complete = page.complete
        remaining -= limit
        if not has_more or len(lines.lines) >= INITIAL_LINES or remaining <= 0:
            break
        limit = min(PAGE_SIZE, remaining)
    return LogSnapshot(lines.lines, lines.open, cursor, has_more, complete)
