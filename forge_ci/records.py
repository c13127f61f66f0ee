"""Value classes without :mod:`dataclasses`: ``@record`` and :func:`field`.

The workflow engine defines its tree as small value classes, and ``forge-ci workflow validate``
of one file defines every one of them before it reads a byte: with :mod:`dataclasses` that was
about a third of the command's own time (importing it pulls in :mod:`inspect`, and each class
compiles five or six generated methods). ``@record`` compiles one method per class, its
``__init__`` (the one that must be fast: the parser builds thousands of records); equality,
hashing, ordering, ``repr`` and the frozen guard are shared functions that read the class's
field names.

What a record is, the part of :func:`dataclasses.dataclass` this project uses, with the same
meaning: the fields are the class's own annotations, in order (a record has no fields from its
bases); a default is the value assigned in the class body or ``field(default=...)`` or
``field(default_factory=...)``; ``__init__`` takes them positionally or by name and then calls
``__post_init__`` when the class has one; ``repr`` is ``Name(a=1, b='x')`` over the fields with
``repr=True``; ``==`` holds between two records of the same class whose ``compare=True``
fields are equal. ``frozen=True`` refuses assignment and deletion (:class:`FrozenInstanceError`,
an ``AttributeError``) and hashes the compared fields; a mutable record is unhashable.
``order=True`` adds ``<``, ``<=``, ``>``, ``>=`` over the compared fields, ``slots=True``
gives the class ``__slots__`` (a frozen one still pickles and copies), and ``__match_args__``
lists the fields. :func:`fields` and :func:`replace` are those of :mod:`dataclasses`.

Standard library only (the runner's image copies this module with the expression package).
"""

from __future__ import annotations

from collections.abc import Callable
from operator import ge, gt, le, lt
from typing import Any, TypeVar, dataclass_transform, overload

T = TypeVar("T")
C = TypeVar("C", bound=type)


class FrozenInstanceError(AttributeError):
    """An assignment to, or deletion of, a field of a frozen record."""


class _Missing:
    """The absence of a default (``None`` is a default like any other)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class Field:
    """What :func:`field` says of one field; the record keeps them in ``__record_fields__``."""

    __slots__ = ("compare", "default", "default_factory", "name", "repr")

    def __init__(
        self, default: Any, default_factory: Any, repr: bool, compare: bool, name: str = ""
    ) -> None:
        self.name = name
        self.default = default
        self.default_factory = default_factory
        self.repr = repr
        self.compare = compare


@overload
def field(*, default: T, repr: bool = True, compare: bool = True) -> T: ...
@overload
def field(*, default_factory: Callable[[], T], repr: bool = True, compare: bool = True) -> T: ...
@overload
def field(*, repr: bool = True, compare: bool = True) -> Any: ...
def field(
    *,
    default: Any = MISSING,
    default_factory: Any = MISSING,
    repr: bool = True,
    compare: bool = True,
) -> Any:
    """A field's default (a value, or a function called for each new record) and its roles."""
    if default is not MISSING and default_factory is not MISSING:
        raise ValueError("a field cannot have both a default and a default_factory")
    return Field(default, default_factory, repr, compare)


@overload
def record(cls: C, /) -> C: ...
@overload
def record(
    *, frozen: bool = False, order: bool = False, slots: bool = False
) -> Callable[[C], C]: ...
@dataclass_transform(field_specifiers=(field,))
def record(
    cls: Any = None, /, *, frozen: bool = False, order: bool = False, slots: bool = False
) -> Any:
    """Make ``cls`` a record (see the module's docstring): ``@record`` or ``@record(...)``."""

    def wrap(cls: Any) -> Any:
        return _build(cls, frozen, order, slots)

    return wrap if cls is None else wrap(cls)


def _build(cls: Any, frozen: bool, order: bool, slots: bool) -> Any:
    body = cls.__dict__
    fields: list[Field] = []
    for name, annotation in body.get("__annotations__", {}).items():
        if isinstance(annotation, str) and annotation.startswith(("ClassVar", "typing.ClassVar")):
            continue
        value = body.get(name, MISSING)
        spec = value if isinstance(value, Field) else Field(value, MISSING, True, True)
        spec.name = name
        fields.append(spec)
    if slots:
        namespace = {k: v for k, v in body.items() if k not in ("__dict__", "__weakref__")}
        for spec in fields:
            namespace.pop(spec.name, None)
        namespace["__slots__"] = tuple(spec.name for spec in fields)
        cls = type(cls)(cls.__name__, cls.__bases__, namespace)
    else:
        for spec in fields:
            if isinstance(body.get(spec.name), Field):
                if spec.default is MISSING:
                    delattr(cls, spec.name)
                else:
                    setattr(cls, spec.name, spec.default)
    cls.__record_fields__ = tuple(fields)
    cls.__record_compared__ = tuple(spec.name for spec in fields if spec.compare)
    cls.__record_shown__ = tuple(spec.name for spec in fields if spec.repr)
    setattr(cls, "__match_args__", tuple(spec.name for spec in fields))  # noqa: B010
    cls.__init__ = _init(cls, fields, frozen)
    cls.__repr__ = _repr
    cls.__eq__ = _eq
    if frozen:
        cls.__hash__ = _hash
        cls.__setattr__ = _frozen_setattr
        cls.__delattr__ = _frozen_delattr
        if slots:  # pickle and copy would set the slots through the frozen guard
            cls.__getstate__ = _getstate
            cls.__setstate__ = _setstate
    else:
        cls.__hash__ = None
    if order:
        cls.__lt__ = _lt
        cls.__le__ = _le
        cls.__gt__ = _gt
        cls.__ge__ = _ge
    return cls


def fields(record_or_class: Any) -> tuple[Field, ...]:
    """The fields of a record class (or of a record), in order: ``dataclasses.fields``."""
    found: tuple[Field, ...] = record_or_class.__record_fields__
    return found


def replace(value: T, **changes: Any) -> T:
    """A new record like ``value`` with ``changes``: ``dataclasses.replace``."""
    current = {spec.name: getattr(value, spec.name) for spec in fields(value)}
    made: T = type(value)(**(current | changes))
    return made


_FACTORY = object()


def _init(cls: Any, fields: list[Field], frozen: bool) -> Callable[..., None]:
    """The compiled ``__init__``: one assignment a field, as :mod:`dataclasses` writes it."""
    names: dict[str, Any] = {"_FACTORY": _FACTORY, "_set": object.__setattr__}
    parameters, lines = ["self"], []
    for spec in fields:
        value = spec.name
        if spec.default_factory is not MISSING:
            names[f"_factory_{spec.name}"] = spec.default_factory
            parameters.append(f"{spec.name}=_FACTORY")
            value = f"_factory_{spec.name}() if {spec.name} is _FACTORY else {spec.name}"
        elif spec.default is not MISSING:
            names[f"_default_{spec.name}"] = spec.default
            parameters.append(f"{spec.name}=_default_{spec.name}")
        else:
            parameters.append(spec.name)
        if frozen:
            lines.append(f"    _set(self, {spec.name!r}, {value})")
        else:
            lines.append(f"    self.{spec.name} = {value}")
    if "__post_init__" in cls.__dict__ or any(
        "__post_init__" in base.__dict__ for base in cls.__mro__[1:-1]
    ):
        lines.append("    self.__post_init__()")
    source = f"def __init__({', '.join(parameters)}):\n" + ("\n".join(lines) or "    return")
    exec(source, names)
    function: Callable[..., None] = names["__init__"]
    function.__qualname__ = f"{cls.__qualname__}.__init__"
    return function


def _values(self: Any) -> tuple[Any, ...]:
    return tuple([getattr(self, name) for name in self.__record_compared__])


def _repr(self: Any) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__record_shown__)
    return f"{type(self).__qualname__}({shown})"


def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is not self.__class__:
        return NotImplemented
    return _values(self) == _values(other)


def _hash(self: Any) -> int:
    return hash(_values(self))


def _ordering(compare: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """``<``, ``<=``, ``>`` or ``>=`` over the compared fields, between records of one class."""

    def method(self: Any, other: Any) -> Any:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return compare(_values(self), _values(other))

    return method


_lt, _le, _gt, _ge = (_ordering(compare) for compare in (lt, le, gt, ge))


def _getstate(self: Any) -> list[Any]:
    return [getattr(self, spec.name) for spec in self.__record_fields__]


def _setstate(self: Any, state: list[Any]) -> None:
    for spec, value in zip(self.__record_fields__, state, strict=True):
        object.__setattr__(self, spec.name, value)


def _frozen_setattr(self: Any, name: str, value: Any) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _frozen_delattr(self: Any, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")
