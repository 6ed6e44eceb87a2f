"""Frozen dataclasses <-> plain JSON data, and their JSON Schema, from the type hints alone.

One description of the report (its dataclasses) gives report.json, reads it back exactly,
and publishes its schema, so the three cannot drift apart. Supported field types: str, int,
float, bool, None unions, ``tuple[X, ...]``, ``Mapping[str, X]``, enums, nested dataclasses.
A field's JSON name is its own unless ``metadata={"json": NAME}``; ``metadata={"omit_none":
True}`` leaves the key out while the value is None.
"""
from __future__ import annotations

import dataclasses
import operator
import sys
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from enum import Enum
from functools import cache
from typing import Any

Encode = Callable[[Any], Any]
Decode = Callable[[Any], Any]
_SCALARS = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _args(tp: Any) -> tuple[Any, ...]:
    return typing.get_args(tp)


def _optional(tp: Any) -> Any | None:
    """X for ``X | None``, else None."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        rest = [a for a in _args(tp) if a is not type(None)]
        if len(rest) == 1 and len(_args(tp)) == 2:
            return rest[0]
    return None


def _identity(value: Any) -> Any:
    return value


@cache
def _codec(tp: Any) -> tuple[Encode, Decode]:
    """(encode, decode) for one type, built once."""
    inner = _optional(tp)
    if inner is not None:
        enc, dec = _codec(inner)
        if enc is _identity and dec is _identity:  # None goes through as it is
            return _identity, _identity
        return (lambda v: None if v is None else enc(v)), (lambda v: None if v is None else dec(v))
    origin = typing.get_origin(tp)
    if origin is tuple:
        enc, dec = _codec(_args(tp)[0])
        if enc is _identity and dec is _identity:
            return list, tuple
        return (lambda v: list(map(enc, v))), (lambda v: tuple(map(dec, v)))
    if origin in (Mapping, dict, typing.Mapping):
        enc, dec = _codec(_args(tp)[1])
        return (lambda v: dict(zip(v.keys(), map(enc, v.values()), strict=True))), (lambda v: dict(zip(v.keys(), map(dec, v.values()), strict=True)))
    if isinstance(tp, type) and issubclass(tp, Enum):
        # The member's ``_value_`` attribute, read in C: ``.value`` is a Python property; Enum(value) is a slow call.
        return operator.attrgetter("_value_"), {member.value: member for member in tp}.__getitem__
    if dataclasses.is_dataclass(tp):
        return _object_codec(tp)
    return _identity, _identity


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))


def _getter(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """Every named item of a mapping as one tuple, looked up in C (``itemgetter`` of one name is no tuple)."""
    if len(names) == 1:
        (name,) = names
        return lambda mapping: (mapping[name],)
    return operator.itemgetter(*names) if names else (lambda mapping: ())


def _converter(steps: list[tuple[int, Encode]]) -> Callable[[tuple[Any, ...]], Sequence[Any]]:
    """Values with the fields at these positions converted, the others as they are."""
    if not steps:
        return _identity

    def convert(values: tuple[Any, ...]) -> list[Any]:
        converted = list(values)
        for i, step in steps:
            converted[i] = step(converted[i])
        return converted

    return convert


def _converted(state: dict[str, Any], steps: tuple[tuple[str, Encode], ...]) -> dict[str, Any]:
    """The (fresh) dict with the values at these keys converted in place, the others as they are."""
    for key, step in steps:
        state[key] = step(state[key])
    return state


def _object_codec(cls: Any) -> tuple[Encode, Decode]:
    """A dataclass's codec: its fields' values taken, converted and zipped with their keys in one pass each.

    Per object this is a C lookup of every field, a call per field that needs converting, and a
    dict built from pairs: a 100k-case report is encoded and read back field by field otherwise.
    """
    hints = _hints(cls)
    fields = dataclasses.fields(cls)
    names = tuple(f.name for f in fields)
    keys = tuple(f.metadata.get("json", f.name) for f in fields)
    codecs = [_codec(hints[name]) for name in names]
    omitted = tuple(key for f, key in zip(fields, keys, strict=True) if f.metadata.get("omit_none"))
    values_of = _getter(names)

    def every_item(data: Mapping[str, Any]) -> tuple[Any, ...]:
        return tuple(map(data.get, keys))  # a key left out reads as None

    # Where a key may be left out most objects lack it, and a failed lookup per object costs more than a get per key.
    items_of = every_item if omitted else _getter(keys)
    encoded = _converter([(i, enc) for i, (enc, _) in enumerate(codecs) if enc is not _identity])
    decoded = _converter([(i, dec) for i, (_, dec) in enumerate(codecs) if dec is not _identity])
    # An object whose JSON keys are its field names maps one to one onto its __dict__: the dict is
    # copied in C and only the fields that need it are converted, a third of the work field by field.
    as_state = keys == names and not hasattr(cls, "__slots__")
    field_names = frozenset(names)
    left_out = dict.fromkeys(names)
    to_plain = tuple((name, enc) for name, (enc, _) in zip(names, codecs, strict=True) if enc is not _identity)
    from_plain = tuple((name, dec) for name, (_, dec) in zip(names, codecs, strict=True) if dec is not _identity)

    def encode(obj: Any) -> dict[str, Any]:
        state = obj.__dict__
        if as_state and tuple(state) == names:  # the key order is the report's
            data = _converted(dict(state), to_plain)
        else:
            data = dict(zip(keys, encoded(values_of(state)), strict=True))
        for key in omitted:
            if data[key] is None:
                del data[key]
        return data

    def decode(data: Mapping[str, Any]) -> Any:
        # The object __init__ would make, without a frozen __setattr__ per field: reading a
        # 100k-case report (envelope-ci merge) spent most of its time there.
        obj = object.__new__(cls)
        if as_state and data.keys() <= field_names:
            # A key left out reads as None, the fields in their order: one merge into the defaults, no copy first.
            state = dict(data) if len(data) == len(names) else {**left_out, **data}
            object.__setattr__(obj, "__dict__", _converted(state, from_plain))
            return obj
        try:
            values = items_of(data)
        except KeyError:  # a key some other writer left out
            values = every_item(data)
        obj.__dict__.update(zip(names, decoded(values), strict=True))
        return obj

    return encode, decode


def to_json(obj: Any) -> Any:
    """A report dataclass as plain JSON data, keys in field order."""
    return _codec(type(obj))[0](obj)  # type: ignore[arg-type]  # classes are hashable


def from_json(cls: Any, data: Any) -> Any:
    """Plain JSON data as the dataclass ``cls`` (the inverse of ``to_json``)."""
    return _codec(cls)[1](data)


def json_schema(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    """The JSON Schema of a type; dataclasses go to ``defs`` by name and are referenced."""
    inner = _optional(tp)
    if inner is not None:
        return {"anyOf": [json_schema(inner, defs), {"type": "null"}]}
    origin = typing.get_origin(tp)
    if origin is tuple:
        return {"type": "array", "items": json_schema(_args(tp)[0], defs)}
    if origin in (Mapping, dict, typing.Mapping):
        return {"type": "object", "additionalProperties": json_schema(_args(tp)[1], defs)}
    if isinstance(tp, type) and issubclass(tp, Enum):
        return {"enum": [m.value for m in tp]}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        name = tp.__name__
        if name not in defs:
            defs[name] = {}  # placeholder: a recursive reference finds it
            hints = _hints(tp)  # type: ignore[arg-type]
            fields = dataclasses.fields(tp)
            defs[name] = {
                "type": "object",
                "additionalProperties": False,
                "properties": {f.metadata.get("json", f.name): json_schema(hints[f.name], defs) for f in fields},
                "required": [f.metadata.get("json", f.name) for f in fields if not f.metadata.get("omit_none")],
            }
            if tp.__doc__:
                defs[name]["description"] = " ".join(tp.__doc__.split())
        return {"$ref": f"#/$defs/{name}"}
    if tp is float:
        return {"type": "number"}
    if tp in _SCALARS:
        return {"type": _SCALARS[tp]}
    return {}
