"""``on: schedule``: GitHub's five-field cron expressions, parsed and matched against minutes.

One expression is five fields separated by spaces, always read in UTC::

    ┌───────── minute        0-59
    │ ┌─────── hour          0-23
    │ │ ┌───── day of month  1-31
    │ │ │ ┌─── month         1-12 or JAN-DEC
    │ │ │ │ ┌─ day of week   0-6 (0 is Sunday) or SUN-SAT
    * * * * *

Each field is a comma-separated list of items; an item is ``*``, a value, a range ``a-b``, any of
those with a step (``*/15``, ``1-30/5``), or a value with a step (``3/5``, from 3 to the field's
end). Names are case-insensitive and allowed wherever a value is. As cron (Vixie cron, cronie)
does, when both day fields are restricted (neither starts with ``*``) a day matches when EITHER
matches; otherwise both must.

:func:`parse_cron` raises :class:`CronError` with the 0-based offset of the offending text, so
the trigger parser can point at the exact column in the workflow file.
"""

from __future__ import annotations

from datetime import datetime

from forge_ci.records import record
from forge_ci.workflow.diagnostics import Problems
from forge_ci.workflow.nodes import Mapping, Node, Scalar, Sequence, describe, is_null

MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")


@record(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()
    #: The value the first name stands for (months count from 1, days from 0).
    names_from: int = 0


_FIELDS = (
    _Field("minute", 0, 59),
    _Field("hour", 0, 23),
    _Field("day of month", 1, 31),
    _Field("month", 1, 12, MONTHS, 1),
    _Field("day of week", 0, 6, DAYS, 0),
)
#: An expression longer than this is refused before it is looked at.
MAX_CRON_LENGTH = 255


class CronError(ValueError):
    """A cron expression is malformed; ``offset`` is where in the text (0-based)."""

    def __init__(self, message: str, offset: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset


@record(frozen=True)
class CronSchedule:
    """A parsed cron expression: the set of values each field allows."""

    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days_of_month: frozenset[int]
    months: frozenset[int]
    days_of_week: frozenset[int]
    #: False when the field starts with ``*`` (cron's rule for combining the two day fields).
    day_of_month_restricted: bool
    day_of_week_restricted: bool

    def matches(self, when: datetime) -> bool:
        """Whether the minute ``when`` (read as UTC wall time) is one the expression names."""
        if when.minute not in self.minutes or when.hour not in self.hours:
            return False
        if when.month not in self.months:
            return False
        dom = when.day in self.days_of_month
        dow = (when.weekday() + 1) % 7 in self.days_of_week
        if self.day_of_month_restricted and self.day_of_week_restricted:
            return dom or dow
        return dom and dow


def parse_cron(text: str) -> CronSchedule:
    """Parse one expression (see the module docstring); raise :class:`CronError` if invalid."""
    if len(text) > MAX_CRON_LENGTH:
        raise CronError(f"the cron expression is longer than {MAX_CRON_LENGTH} characters")
    fields: list[tuple[int, str]] = []
    position = 0
    for part in text.split(" "):
        if part:
            fields.append((position, part))
        position += len(part) + 1
    if "\t" in text or "\n" in text:
        raise CronError("separate the cron fields with spaces", _first_of(text, "\t\n"))
    if len(fields) != 5:
        hint = " (forge-ci, like GitHub, has no seconds or years field)" if len(fields) > 5 else ""
        raise CronError(
            f"a cron expression has 5 fields (minute hour day-of-month month day-of-week), "
            f"not {len(fields)}{hint}",
            fields[5][0] if len(fields) > 5 else 0,
        )
    sets = [
        _parse_field(spec, offset, part)
        for spec, (offset, part) in zip(_FIELDS, fields, strict=True)
    ]
    return CronSchedule(
        text=text,
        minutes=sets[0],
        hours=sets[1],
        days_of_month=sets[2],
        months=sets[3],
        days_of_week=sets[4],
        day_of_month_restricted=not fields[2][1].startswith("*"),
        day_of_week_restricted=not fields[4][1].startswith("*"),
    )


def _first_of(text: str, characters: str) -> int:
    return min(text.index(c) for c in characters if c in text)


def _parse_field(spec: _Field, offset: int, text: str) -> frozenset[int]:
    values: set[int] = set()
    position = offset
    for item in text.split(","):
        if not item:
            raise CronError(f"an empty item in the {spec.name} field", position)
        values.update(_parse_item(spec, position, item))
        position += len(item) + 1
    return frozenset(values)


def _parse_item(spec: _Field, offset: int, item: str) -> range:
    body, slash, step_text = item.partition("/")
    step = 1
    if slash:
        step_offset = offset + len(body) + 1
        if not step_text.isdigit() or not step_text.isascii():
            raise CronError(
                f"the step after '/' in the {spec.name} field must be a number, not {step_text!r}",
                step_offset,
            )
        step = int(step_text)
        if step < 1 or step > spec.high - spec.low + 1:
            raise CronError(
                f"the step {step_text} in the {spec.name} field is out of range "
                f"(1-{spec.high - spec.low + 1})",
                step_offset,
            )
    if body == "*":
        return range(spec.low, spec.high + 1, step)
    low_text, dash, high_text = body.partition("-")
    low = _value(spec, offset, low_text)
    if dash:
        high = _value(spec, offset + len(low_text) + 1, high_text)
        if high < low:
            raise CronError(f"the range {body} in the {spec.name} field runs backwards", offset)
    elif slash:
        high = spec.high  # "3/5": from 3 to the end of the field, every 5
    else:
        high = low
    return range(low, high + 1, step)


def _value(spec: _Field, offset: int, text: str) -> int:
    if text.isascii() and text.isdigit():
        value = int(text)
        if spec.low <= value <= spec.high:
            return value
        hint = "; use 0 for Sunday" if spec.names == DAYS and value == 7 else ""
        raise CronError(
            f"{text} is out of range for the {spec.name} field ({spec.low}-{spec.high}){hint}",
            offset,
        )
    lowered = text.lower()
    if spec.names and lowered in spec.names:
        return spec.names.index(lowered) + spec.names_from
    if not text:
        raise CronError(f"a value is missing in the {spec.name} field", offset)
    allowed = (
        f"a number {spec.low}-{spec.high} or a name ({spec.names[0].upper()}-"
        f"{spec.names[-1].upper()})"
        if spec.names
        else f"a number {spec.low}-{spec.high}"
    )
    raise CronError(f"{text!r} is not valid in the {spec.name} field; use {allowed}", offset)


def parse_schedule(node: Node, problems: Problems) -> tuple[CronSchedule, ...]:
    """Check the value of ``on.schedule`` (a list of ``- cron: '...'``) and return its entries."""
    if not isinstance(node, Sequence) or not node.items:
        problems.at(
            node,
            f"schedule takes a list of cron entries (- cron: '30 5 * * 1'), not {describe(node)}",
        )
        return ()
    schedules: list[CronSchedule] = []
    for item in node.items:
        if not isinstance(item, Mapping):
            problems.at(item, f"a schedule entry is a mapping with cron, not {describe(item)}")
            continue
        cron: Node | None = None
        for key, value in item.items:
            if key.value == "cron":
                cron = value
            elif key.value == "timezone":
                problems.at(
                    key,
                    "schedule timezone is not supported: forge-ci reads every cron "
                    "expression in UTC; convert the times and remove timezone",
                )
            else:
                problems.at(key, f"'{key.value}' is not a schedule key (use cron)")
        if cron is None:
            problems.at(item, "a schedule entry needs cron: a five-field cron expression")
            continue
        if not isinstance(cron, Scalar) or is_null(cron):
            problems.at(cron, f"cron must be a string, not {describe(cron)}")
            continue
        if "${{" in cron.value:
            problems.at(cron, "expressions are not allowed in cron")
            continue
        try:
            schedules.append(parse_cron(cron.value))
        except CronError as exc:
            line, column = _located(cron, exc.offset)
            problems.add(line, column, f"invalid cron '{cron.value}': {exc.message}")
    return tuple(schedules)


def _located(node: Scalar, offset: int) -> tuple[int, int]:
    """Where ``offset`` of a scalar's text is in the file: exact for one-line plain or quoted
    scalars (the common case), the scalar's own position otherwise."""
    quote = 1 if node.style in ("'", '"') else 0
    if node.style in ("", "'", '"') and node.end_index - node.index == len(node.value) + 2 * quote:
        return node.line, node.column + quote + offset
    return node.line, node.column
