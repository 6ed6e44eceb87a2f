"""JSON Schema 2020-12 compiled to one yes/no check, for the keywords envelope-ci's own schemas use. Pure.

jsonschema walks the schema again for every instance, building a validator per subschema:
about 100 µs a fixture case, which was half of a 100,000-case offline run. ``compile_check``
turns a schema into nested closures once; each answers exactly what jsonschema's
``Draft202012Validator(schema).is_valid`` would (a bool is not a number, 1.0 is an integer,
``enum`` compares as jsonschema's ``equal``), and nothing more. A schema that uses any other
keyword compiles to None and the caller asks jsonschema. Only jsonschema words errors: a
caller runs it when the check says no, so every message stays jsonschema's own.
"""
from __future__ import annotations

import numbers
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

Check = Callable[[Any], bool]

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
# Keywords that never affect validity (without a format checker, which no compiled check has).
_ANNOTATIONS = frozenset({"description", "title", "$comment", "default", "examples", "deprecated", "readOnly", "writeOnly", "$defs"})
_REF_PREFIX = "#/$defs/"


class _Unsupported(Exception):
    """A keyword (or a keyword's value) this compiler does not vouch for: the schema is left to jsonschema."""


def _always(instance: Any) -> bool:
    return True


def _never(instance: Any) -> bool:
    return False


def _is_number(x: Any) -> bool:
    kind = type(x)
    if kind is int or kind is float:  # what JSON gives, settled without the ABC's slower isinstance
        return True
    return isinstance(x, numbers.Number) and not isinstance(x, bool)


def _is_integer(x: Any) -> bool:
    if type(x) is int:  # what JSON gives, settled at once
        return True
    return not isinstance(x, bool) and (isinstance(x, int) or (isinstance(x, float) and x.is_integer()))


_CLASSES: Mapping[str, type] = {"string": str, "object": dict, "array": list, "boolean": bool, "null": type(None)}
_TYPES: Mapping[str, Check] = {
    "string": lambda x: isinstance(x, str),
    "object": lambda x: isinstance(x, dict),
    "array": lambda x: isinstance(x, list),
    "boolean": lambda x: isinstance(x, bool),
    "null": lambda x: x is None,
    "integer": _is_integer,
    "number": _is_number,
}


def equal(one: Any, two: Any) -> bool:
    """jsonschema's equality for ``enum`` and ``const``: ``True`` is not ``1``, in containers too."""
    if one is two:
        return True
    if isinstance(one, str) or isinstance(two, str):
        return bool(one == two)
    if isinstance(one, Sequence) and isinstance(two, Sequence):
        return len(one) == len(two) and all(equal(a, b) for a, b in zip(one, two, strict=True))
    if isinstance(one, Mapping) and isinstance(two, Mapping):
        return len(one) == len(two) and all(key in two and equal(value, two[key]) for key, value in one.items())
    if isinstance(one, bool) or isinstance(two, bool):
        return isinstance(one, bool) and isinstance(two, bool) and one == two
    return bool(one == two)


def errors_of(check: Check | None, validator: Any, instance: Any) -> list[Any]:
    """jsonschema's errors for ``instance`` (``validator.iter_errors``), asked only when the compiled ``check`` says no.

    None (a schema it does not support) and a recursion too deep for the check leave the answer
    to jsonschema too, which words that as well.
    """
    try:
        if check is not None and check(instance):
            return []
    except RecursionError:
        pass
    return list(validator.iter_errors(instance))


def compile_check(schema: Any) -> Check | None:
    """The schema as one check that is True exactly when jsonschema (draft 2020-12) finds the instance valid; None when unsupported."""
    named = schema.get("$schema", DRAFT_2020_12) if isinstance(schema, dict) else DRAFT_2020_12
    if not isinstance(named, str) or named.rstrip("#") != DRAFT_2020_12:
        return None
    try:
        return _Compiler(schema).root
    except _Unsupported:
        return None


class _Compiler:
    """One schema's checks; ``$ref`` to ``#/$defs/NAME`` is looked up when checking, so a schema may refer to itself."""

    def __init__(self, root: Any) -> None:
        self.defs: dict[str, Check] = {}
        self.wanted: list[str] = []
        written = root.get("$defs", {}) if isinstance(root, dict) else {}
        if not isinstance(written, dict):
            raise _Unsupported("$defs")
        self.root = self.compile(root, top=True)
        while self.wanted:
            name = self.wanted.pop()
            if name not in written:
                raise _Unsupported(f"$ref to a missing definition {name!r}")
            if name not in self.defs:
                self.defs[name] = _never  # marks it taken: a definition that refers to itself is compiled once
                self.defs[name] = self.compile(written[name])

    def compile(self, schema: Any, top: bool = False) -> Check:
        if schema is True:
            return _always
        if schema is False:
            return _never
        if not isinstance(schema, dict):
            raise _Unsupported(repr(schema))
        checks: list[Check] = []
        object_keys = {k: schema[k] for k in ("properties", "required", "additionalProperties", "propertyNames") if k in schema}
        if object_keys:
            checks.append(self._object(object_keys))
        for keyword, value in schema.items():
            if keyword in object_keys or keyword in _ANNOTATIONS or (top and keyword in ("$schema", "$id")) or keyword in ("then", "else"):
                continue
            checks.append(self._keyword(keyword, value, schema))
        return _all_of(checks)

    def _keyword(self, keyword: str, value: Any, schema: Mapping[str, Any]) -> Check:
        simple = _SIMPLE.get(keyword)
        if simple is not None:
            return simple(value)
        if keyword in ("allOf", "anyOf", "oneOf"):
            if not isinstance(value, list) or not value:
                raise _Unsupported(keyword)
            branches = [self.compile(s) for s in value]
            return _all_of(branches) if keyword == "allOf" else (_any_of(branches) if keyword == "anyOf" else _one_of(branches))
        if keyword == "not":
            inner = self.compile(value)
            return lambda x: not inner(x)
        if keyword == "if":
            return _if(self.compile(value), self.compile(schema.get("then", True)), self.compile(schema.get("else", True)))
        if keyword == "items":
            item = self.compile(value)
            return lambda x: not isinstance(x, list) or all(map(item, x))
        if keyword == "$ref":
            return self._ref(value)
        raise _Unsupported(keyword)

    def _ref(self, ref: Any) -> Check:
        name = ref[len(_REF_PREFIX):] if isinstance(ref, str) and ref.startswith(_REF_PREFIX) else ""
        if not name or "/" in name or "~" in name or "%" in name:
            raise _Unsupported(f"$ref {ref!r}")
        self.wanted.append(name)
        defs = self.defs
        return lambda x: defs[name](x)

    def _object(self, keys: Mapping[str, Any]) -> Check:
        """properties, required, additionalProperties and propertyNames in one pass over the instance's keys."""
        props, required = keys.get("properties", {}), keys.get("required", [])
        if not isinstance(props, dict) or not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise _Unsupported("properties")
        checks = {name: self.compile(sub) for name, sub in props.items()}
        extra = keys.get("additionalProperties", True)
        extra_check = None if extra is False else self.compile(extra)
        names = self.compile(keys["propertyNames"]) if "propertyNames" in keys else None
        if not checks and extra_check is _always and names is None:
            if len(required) == 1:  # a oneOf/anyOf branch that asks for one key, the commonest
                (only,) = required
                return lambda x: not isinstance(x, dict) or only in x
            return lambda x: not isinstance(x, dict) or all(map(x.__contains__, required))

        def check(x: Any) -> bool:
            if not isinstance(x, dict):
                return True
            for name in required:
                if name not in x:
                    return False
            for key, value in x.items():
                if names is not None and not names(key):
                    return False
                found = checks.get(key, extra_check)  # a key not named: additionalProperties' check, None when false
                if found is None or not found(value):
                    return False
            return True

        return check


def _all_of(checks: Sequence[Check]) -> Check:
    if not checks:
        return _always
    if len(checks) == 1:
        return checks[0]

    def check(x: Any) -> bool:
        for c in checks:
            if not c(x):
                return False
        return True

    return check


def _any_of(checks: Sequence[Check]) -> Check:
    def check(x: Any) -> bool:
        for c in checks:
            if c(x):
                return True
        return False

    return check


def _one_of(checks: Sequence[Check]) -> Check:
    def check(x: Any) -> bool:
        found = False
        for c in checks:
            if c(x):
                if found:
                    return False
                found = True
        return found

    return check


def _if(condition: Check, then: Check, otherwise: Check) -> Check:
    return lambda x: then(x) if condition(x) else otherwise(x)


def _type(value: Any) -> Check:
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n in _TYPES for n in names):
        raise _Unsupported(f"type {value!r}")
    if "integer" not in names and "number" not in names:  # plain Python types: one isinstance in C
        classes = tuple(_CLASSES[n] for n in names)
        return lambda x: isinstance(x, classes)
    checks = [_TYPES[n] for n in names if n != "null"]
    one = checks[0] if len(checks) == 1 else _any_of(checks)
    if "null" in names:  # ["integer", "null"] and the like: None settled without a call
        return lambda x: x is None or one(x)
    return one


def _enum(value: Any) -> Check:
    if not isinstance(value, list):
        raise _Unsupported("enum")
    if all(isinstance(v, str) for v in value):
        texts = frozenset(value)
        return lambda x: isinstance(x, str) and x in texts
    return lambda x: any(equal(v, x) for v in value)


def _const(value: Any) -> Check:
    return lambda x: equal(x, value)


def _count(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise _Unsupported(f"count {value!r}")
    return value


def _bound(value: Any) -> Any:
    if not _is_number(value) or not isinstance(value, (int, float)):
        raise _Unsupported(f"bound {value!r}")
    return value


def _pattern(value: Any) -> Check:
    if not isinstance(value, str):
        raise _Unsupported("pattern")
    try:
        search = re.compile(value).search
    except re.error:
        raise _Unsupported("pattern") from None
    return lambda x: not isinstance(x, str) or search(x) is not None


def _sized(kind: type[str] | type[list[Any]], within: Callable[[int, int], bool]) -> Callable[[Any], Check]:
    """minLength, maxLength, minItems, maxItems: a bound on ``len`` that only values of ``kind`` must keep."""
    def compile_bound(value: Any) -> Check:
        n = _count(value)
        return lambda x: not isinstance(x, kind) or within(len(x), n)
    return compile_bound


def _minimum(value: Any) -> Check:
    low = _bound(value)
    return lambda x: not x < low if type(x) is int or type(x) is float else (not _is_number(x) or not x < low)


def _maximum(value: Any) -> Check:
    high = _bound(value)
    return lambda x: not x > high if type(x) is int or type(x) is float else (not _is_number(x) or not x > high)


def _exclusive_minimum(value: Any) -> Check:
    low = _bound(value)
    return lambda x: not _is_number(x) or not x <= low


def _exclusive_maximum(value: Any) -> Check:
    high = _bound(value)
    return lambda x: not _is_number(x) or not x >= high


# Keywords checked on the instance alone, from their value.
_SIMPLE: Mapping[str, Callable[[Any], Check]] = {
    "type": _type,
    "enum": _enum,
    "const": _const,
    "pattern": _pattern,
    "minLength": _sized(str, operator.ge),
    "maxLength": _sized(str, operator.le),
    "minItems": _sized(list, operator.ge),
    "maxItems": _sized(list, operator.le),
    "minimum": _minimum,
    "maximum": _maximum,
    "exclusiveMinimum": _exclusive_minimum,
    "exclusiveMaximum": _exclusive_maximum,
}
