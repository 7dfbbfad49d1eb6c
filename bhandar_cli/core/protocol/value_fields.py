"""The fields of the protocol's value classes: equality, hash, repr and `replaced`, by field order.

The hot messages, effects and pendings are `@final` classes with an explicit constructor and
`Final` attributes rather than frozen dataclasses: mypyc compiles them to native classes (C
fields, built in C), while a frozen dataclass's generated `__init__` stays a Python function that
sets each field through `object.__setattr__` (docs/performance.md, "Native core types"). Each such
class names its fields, in constructor order, in `__match_args__` (and the same names in
`__slots__`, which keeps them small when the code runs as Python), and takes `__eq__`, `__hash__`,
`__repr__` and `__reduce__` (for copy and pickle) from `ValueClass`, which give what the dataclass
gave: equal when of one class with equal fields in order, a hash of the fields,
`Name(field=value, ...)`. A mutable one sets `__hash__ = None`, as a mutable dataclass is.
"""

from __future__ import annotations

from typing import Any, TypeVar

T = TypeVar("T")


def field_names(cls: type) -> tuple[str, ...]:
    """The fields of a value class, in constructor order."""
    names: tuple[str, ...] = cls.__match_args__  # type: ignore[attr-defined]  # every value class has one
    return names


def fields_of(obj: object) -> tuple[Any, ...]:
    return tuple([getattr(obj, name) for name in field_names(type(obj))])


def same_fields(a: object, b: object) -> bool:
    """A value class's `__eq__` (the caller returns NotImplemented for another class)."""
    return fields_of(a) == fields_of(b)


def fields_hash(obj: object) -> int:
    return hash(fields_of(obj))


def fields_repr(obj: object) -> str:
    cls = type(obj)
    shown = ", ".join(f"{name}={getattr(obj, name)!r}" for name in field_names(cls))
    return f"{cls.__name__}({shown})"


def fields_reduce(obj: object) -> tuple[Any, ...]:
    """A value class's `__reduce__`: how copy and pickle rebuild it (a compiled class has no
    `__dict__` or slots for them to copy), by its constructor."""
    return (rebuild, (type(obj), fields_of(obj)))


def rebuild(cls: type[T], values: tuple[Any, ...]) -> T:
    """An instance of a value class from its fields' values in order (what `fields_reduce` saves)."""
    return cls(**dict(zip(field_names(cls), values, strict=True)))


def replaced(obj: T, **changes: Any) -> T:
    """A copy of `obj` with `changes` (as `dataclasses.replace`); a name that is not a field of
    its class is a TypeError."""
    cls = type(obj)
    names = field_names(cls)
    unknown = set(changes) - set(names)
    if unknown:
        raise TypeError(f"{cls.__name__} has no field {', '.join(sorted(unknown))}")
    built: T = cls(**{name: changes[name] if name in changes else getattr(obj, name) for name in names})
    return built


class ValueClass:
    """The base of a value class: equality, hash, repr and copying by its fields (`__match_args__`),
    the methods a frozen dataclass would generate."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return same_fields(self, other)

    def __hash__(self) -> int:
        return fields_hash(self)

    def __repr__(self) -> str:
        return fields_repr(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return fields_reduce(self)
