"""``forge_ci.records`` behaves as the part of ``dataclasses`` it replaces: each check is made
against a real dataclass of the same shape, and each refusal (frozen, unhashable, wrong class,
missing argument) is checked too."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest

from forge_ci.records import FrozenInstanceError, field, fields, record, replace


@record(frozen=True)
class Point:
    x: int
    y: int = 0
    tags: list[str] = field(default_factory=list)
    note: str = field(default="", repr=False, compare=False)


@dataclasses.dataclass(frozen=True)
class DataPoint:
    x: int
    y: int = 0
    tags: list[str] = dataclasses.field(default_factory=list)
    note: str = dataclasses.field(default="", repr=False, compare=False)


def test_a_record_is_built_repr_compared_and_hashed_as_a_dataclass_is() -> None:
    made, data = Point(1, y=2, tags=["a"], note="n"), DataPoint(1, y=2, tags=["a"], note="n")
    assert (made.x, made.y, made.tags, made.note) == (1, 2, ["a"], "n")
    assert repr(made) == repr(data).replace("DataPoint", "Point") == "Point(x=1, y=2, tags=['a'])"
    assert Point(1) == Point(1, 0, [], note="other")  # note is not compared
    assert Point(1) != Point(2)
    assert Point(1).tags is not Point(1).tags  # a fresh default each time
    assert Point.y == 0 and Point.note == "" and not hasattr(Point, "tags")  # as dataclasses
    with pytest.raises(TypeError, match="unhashable type: 'list'"):
        hash(made)  # the compared fields are hashed, the list among them
    assert Point.__match_args__ == DataPoint.__match_args__ == ("x", "y", "tags", "note")
    assert [spec.name for spec in fields(Point)] == [f.name for f in dataclasses.fields(DataPoint)]
    assert replace(made, y=5) == Point(1, 5, ["a"]) and replace(made, y=5).note == "n"


def test_a_record_refuses_what_a_dataclass_refuses() -> None:
    made = Point(1)
    with pytest.raises(FrozenInstanceError, match="cannot assign to field 'x'"):
        made.x = 2  # type: ignore[misc]
    with pytest.raises(AttributeError, match="cannot delete field 'y'"):
        del made.y  # type: ignore[misc]
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'x'"):
        Point()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'z'"):
        Point(1, z=2)  # type: ignore[call-arg]
    assert made.__eq__(DataPoint(1)) is NotImplemented and made != DataPoint(1)
    with pytest.raises(ValueError, match="both a default and a default_factory"):
        field(default=1, default_factory=int)  # type: ignore[call-overload]


@record
class Counter:
    name: str
    count: int = 0

    def __post_init__(self) -> None:
        self.count += 1


@record(frozen=True, order=True, slots=True)
class Place:
    line: int
    column: int


@dataclasses.dataclass(frozen=True, order=True, slots=True)
class DataPlace:
    line: int
    column: int


def test_mutable_ordered_and_slotted_records() -> None:
    counter = Counter("a")
    assert counter.count == 1  # __post_init__ ran
    counter.count = 5
    assert counter == Counter("a", 4)
    with pytest.raises(TypeError, match="unhashable"):
        hash(counter)  # mutable and compared: unhashable, as a dataclass is
    assert sorted([Place(2, 1), Place(1, 9), Place(1, 2)]) == [
        Place(1, 2),
        Place(1, 9),
        Place(2, 1),
    ]
    assert Place(1, 2) < Place(1, 3) <= Place(1, 3) and Place(2, 0) > Place(1, 9) >= Place(1, 9)
    assert hash(Place(3, 4)) == hash(DataPlace(3, 4)) == hash(Place(3, 4))
    assert repr(Place(3, 4)) == "Place(line=3, column=4)"
    assert Place.__slots__ == DataPlace.__slots__ == ("line", "column") and not hasattr(
        Place(1, 1), "__dict__"
    )
    with pytest.raises(TypeError, match="not supported"):
        Place(1, 1) < (1, 2)  # type: ignore[operator]  # noqa: B015
    with pytest.raises(FrozenInstanceError):
        Place(1, 1).line = 2  # type: ignore[misc]
    for made in (Place(5, 6), Point(1, 2, ["t"], note="n")):
        assert pickle.loads(pickle.dumps(made)) == made == copy.deepcopy(made) == copy.copy(made)
    match Place(3, 4):
        case Place(line, column):
            assert (line, column) == (3, 4)
