"""Frozen dataclasses <-> plain JSON data, and their JSON Schema, from the type hints alone.

One description of the report (its dataclasses) gives report.json, reads it back exactly,
and publishes its schema, so the three cannot drift apart. Supported field types: str, int,
float, bool, None unions, ``tuple[X, ...]``, ``Mapping[str, X]``, enums, nested dataclasses.
A field's JSON name is its own unless ``metadata={"json": NAME}``; ``metadata={"omit_none":
True}`` leaves the key out while the value is None.
"""
from __future__ import annotations

import dataclasses
import sys
import types
import typing
from collections.abc import Callable, Mapping
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
        return (lambda v: [enc(x) for x in v]), (lambda v: tuple(dec(x) for x in v))
    if origin in (Mapping, dict, typing.Mapping):
        enc, dec = _codec(_args(tp)[1])
        return (lambda v: {k: enc(x) for k, x in v.items()}), (lambda v: {k: dec(x) for k, x in v.items()})
    if isinstance(tp, type) and issubclass(tp, Enum):
        return (lambda v: v.value), {member.value: member for member in tp}.__getitem__  # Enum(value) is a slow call
    if dataclasses.is_dataclass(tp):
        return _object_codec(tp)
    return _identity, _identity


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))


def _object_codec(cls: Any) -> tuple[Encode, Decode]:
    hints = _hints(cls)
    plan = [(f.name, f.metadata.get("json", f.name), bool(f.metadata.get("omit_none")), *_codec(hints[f.name])) for f in dataclasses.fields(cls)]

    order = [(name, key, omit_none, None if enc is _identity else enc) for name, key, omit_none, enc, _ in plan]

    def encode(obj: Any) -> dict[str, Any]:
        values = obj.__dict__
        return {key: value if enc is None else enc(value) for name, key, omit_none, enc in order
                if not ((value := values[name]) is None and omit_none)}

    plain = [(name, key) for name, key, _, _, dec in plan if dec is _identity]
    converted = [(name, key, dec) for name, key, _, _, dec in plan if dec is not _identity]

    def decode(data: Mapping[str, Any]) -> Any:
        # The object __init__ would make, without a frozen __setattr__ per field: reading a
        # 100k-case report (envelope-ci merge) spent most of its time there.
        values = {name: data.get(key) for name, key in plain}
        values.update((name, dec(data.get(key))) for name, key, dec in converted)
        obj = object.__new__(cls)
        obj.__dict__.update(values)
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
