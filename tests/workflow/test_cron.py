"""``on: schedule``: cron parsing, located refusals, and matching against a reference matcher."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from wf_support import JOBS, Accept, Refuse, messages

from forge_ci.workflow.cron import DAYS, MONTHS, CronError, parse_cron


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# -- the reference: every item of every field checked arithmetically, minute by minute ---------

_BOUNDS = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 6))


def _reference_value(text: str, field: int) -> int:
    names = MONTHS if field == 3 else DAYS if field == 4 else ()
    if text.lower() in names:
        return names.index(text.lower()) + (1 if field == 3 else 0)
    return int(text)


def _reference_field(text: str, field: int, value: int) -> bool:
    low, high = _BOUNDS[field]
    for item in text.split(","):
        body, _, step_text = item.partition("/")
        step = int(step_text) if step_text else 1
        if body == "*":
            start, end = low, high
        elif "-" in body:
            first, last = body.split("-")
            start, end = _reference_value(first, field), _reference_value(last, field)
        else:
            start = _reference_value(body, field)
            end = high if step_text else start
        if start <= value <= end and (value - start) % step == 0:
            return True
    return False


def reference_matches(text: str, when: datetime) -> bool:
    fields = text.split()
    dom, dow = fields[2], fields[4]
    values = (when.minute, when.hour, when.day, when.month, int(when.strftime("%w")))
    hits = [_reference_field(f, i, v) for i, (f, v) in enumerate(zip(fields, values, strict=True))]
    if not (hits[0] and hits[1] and hits[3]):
        return False
    if not dom.startswith("*") and not dow.startswith("*"):
        return hits[2] or hits[4]  # cron's rule: either day field
    return hits[2] and hits[4]


def _item(field: int) -> st.SearchStrategy[str]:
    low, high = _BOUNDS[field]
    names = MONTHS if field == 3 else DAYS if field == 4 else ()
    value = st.integers(low, high).map(str)
    if names:
        value = value | st.sampled_from(names).map(lambda n: n.upper() if len(n) % 2 else n)

    def ranged(pair: tuple[int, int]) -> str:
        return f"{min(pair)}-{max(pair)}"

    plain = st.one_of(
        st.just("*"),
        value,
        st.tuples(st.integers(low, high), st.integers(low, high)).map(ranged),
    )
    step = st.integers(1, high - low + 1).map(str)
    stepped = st.tuples(plain, step).map(lambda pair: f"{pair[0]}/{pair[1]}")
    return plain | stepped


def _field(field: int) -> st.SearchStrategy[str]:
    return st.lists(_item(field), min_size=1, max_size=3).map(",".join)


expressions = st.tuples(*(_field(i) for i in range(5))).map(" ".join)


@settings(max_examples=150, deadline=None)
@given(expressions, st.datetimes(datetime(2020, 1, 1), datetime(2030, 12, 31)))
def test_matching_agrees_with_the_reference_minute_by_minute(text: str, start: datetime) -> None:
    schedule = parse_cron(text)
    when = start.replace(second=0, microsecond=0, tzinfo=UTC)
    for _ in range(2 * 24 * 60):  # two whole days, every minute of them
        assert schedule.matches(when) == reference_matches(text, when), (text, when)
        when += timedelta(minutes=1)


@given(st.text(alphabet="0123456789*/-, abcdefjmnoprstuvwxyzJMSTWF?#L\t", max_size=30))
def test_any_text_parses_or_is_refused_with_a_position(text: str) -> None:
    try:
        parse_cron(text)
    except CronError as exc:
        assert exc.message and 0 <= exc.offset <= len(text)


# -- the forms GitHub documents ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "yes", "no"),
    [
        ("*/15 * * * *", "2026-12-01T10:45", "2026-12-01T10:46"),
        ("30 5,17 * * *", "2026-12-01T17:30", "2026-12-01T06:30"),
        ("0 0 * * MON-FRI", "2026-12-04T00:00", "2026-12-05T00:00"),  # Friday; Saturday
        ("0 0 * jan,Jul *", "2026-07-01T00:00", "2026-06-01T00:00"),
        ("3/5 * * * *", "2026-12-01T10:08", "2026-12-01T10:05"),
        ("0 14-23/2 * * 1-5", "2026-12-01T16:00", "2026-12-01T15:00"),
        ("0 0 13 * 5", "2026-11-13T00:00", "2026-11-14T00:00"),  # the 13th OR a Friday
        ("0 0 13 * 5", "2026-12-04T00:00", "2026-12-05T00:00"),  # a Friday, not the 13th
        ("0 0 */2 * 5", "2026-12-11T00:00", "2026-12-04T00:00"),  # '*/2': both must match
        ("0 0 * * sun", "2026-12-06T00:00", "2026-12-07T00:00"),
    ],
)
def test_documented_forms(text: str, yes: str, no: str) -> None:
    schedule = parse_cron(text)
    assert schedule.matches(at(yes))
    assert not schedule.matches(at(no))


@pytest.mark.parametrize(
    ("text", "message", "offset"),
    [
        ("* * * *", "has 5 fields", 0),
        ("0 * * * * *", "not 6 (forge-ci, like GitHub, has no seconds or years field)", 10),
        ("60 * * * *", "60 is out of range for the minute field (0-59)", 0),
        ("0 24 * * *", "24 is out of range for the hour field (0-23)", 2),
        ("0 0 0 * *", "0 is out of range for the day of month field (1-31)", 4),
        ("0 0 * 13 *", "13 is out of range for the month field (1-12)", 6),
        ("0 0 * * 7", "use 0 for Sunday", 8),
        ("0 0 * * MON-FRX", "'FRX' is not valid in the day of week field", 12),
        ("0 0 * * 5-1", "the range 5-1 in the day of week field runs backwards", 8),
        ("*/0 * * * *", "the step 0 in the minute field is out of range (1-60)", 2),
        ("*/x * * * *", "must be a number, not 'x'", 2),
        ("1,,2 * * * *", "an empty item in the minute field", 2),
        ("0 0 ? * *", "'?' is not valid in the day of month field", 4),
        ("0 0 L * *", "'L' is not valid", 4),
        ("@daily", "has 5 fields", 0),
        ("0\t0 * * *", "separate the cron fields with spaces", 1),
    ],
)
def test_invalid_expressions_name_the_field_and_the_place(
    text: str, message: str, offset: int
) -> None:
    with pytest.raises(CronError) as caught:
        parse_cron(text)
    assert message in caught.value.message
    assert caught.value.offset == offset


# -- in a workflow file -----------------------------------------------------------------------


def test_schedules_are_read_and_planned(accept: Accept) -> None:
    workflow = accept("on:\n  schedule:\n    - cron: '*/5 * * * *'\n    - cron: 0 3 * * 1\n" + JOBS)
    assert [entry.text for entry in workflow.triggers.schedule] == ["*/5 * * * *", "0 3 * * 1"]
    assert not workflow.triggers.workflow_dispatch and workflow.triggers.push is None
    from forge_ci.workflow import build_plan

    assert build_plan(workflow)["on"] == {
        "schedule": [{"cron": "*/5 * * * *"}, {"cron": "0 3 * * 1"}]
    }


def test_schedule_beside_other_events(accept: Accept) -> None:
    workflow = accept("on:\n  push:\n  schedule:\n    - cron: '0 0 * * *'\n" + JOBS)
    assert workflow.triggers.push is not None and len(workflow.triggers.schedule) == 1


@pytest.mark.parametrize(
    ("on", "expected"),
    [
        ("on:\n  schedule:\n    - cron: '61 * * * *'", "3:14: invalid cron '61 * * * *': 61 is "),
        ('on:\n  schedule:\n    - cron: "0 0 * * 8"', "3:22: invalid cron '0 0 * * 8'"),
        ("on:\n  schedule:\n    - cron: 0 0 * * SUNDAY", "3:21: invalid cron"),
        ("on:\n  schedule:", "2:12: schedule takes a list of cron entries"),
        ("on:\n  schedule: '0 0 * * *'", "2:13: schedule takes a list of cron entries"),
        ("on:\n  schedule:\n    - '0 0 * * *'", "3:7: a schedule entry is a mapping with cron"),
        ("on:\n  schedule:\n    - {}", "3:7: a schedule entry needs cron"),
        ("on:\n  schedule:\n    - cron: [1]", "3:13: cron must be a string, not a sequence"),
        ("on:\n  schedule:\n    - cron: '${{ x }}'", "expressions are not allowed in cron"),
        (
            "on:\n  schedule:\n    - cron: '0 0 * * *'\n      timezone: Europe/Paris",
            "4:7: schedule timezone is not supported: forge-ci reads every cron expression in UTC",
        ),
        (
            "on:\n  schedule:\n    - cron: '0 0 * * *'\n      when: x",
            "'when' is not a schedule key",
        ),
        ("on: [schedule]", "schedule needs a list of cron entries"),
    ],
)
def test_refused_schedules_are_located(refuse: Refuse, on: str, expected: str) -> None:
    found = messages(refuse(on + JOBS))
    assert expected in found, found


def test_the_error_column_points_into_the_expression(refuse: Refuse) -> None:
    text = "on:\n  schedule:\n    - cron: '0 0 * * MON-FRX'\n" + JOBS
    (diagnostic,) = refuse(text)
    line = text.splitlines()[diagnostic.line - 1]
    assert line[diagnostic.column - 1 :].startswith("FRX")
    assert re.search(r"'FRX' is not valid in the day of week field", diagnostic.message)
