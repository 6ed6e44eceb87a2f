"""Every assertion type by name: the built-ins, then plug-ins from the ``envelope_ci.assertions`` entry points.

Adding a built-in is one module beside this one and one line in ``BUILTIN``; the fixture
schema, the shorthand keys and ``not-`` forms all follow from it.
"""
from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from ...errors import UsageError
from ...plugins import load_plugins
from . import (
    contains,
    contains_all,
    contains_any,
    cost,
    equals,
    icontains,
    icontains_all,
    icontains_any,
    is_json,
    json_path,
    json_subset,
    latency,
    max_chars,
    python_grader,
    regex,
    similar,
    starts_with,
    tool_call,
)
from .base import AssertionType
from .llm_rubric import ASSERTION as LLM_RUBRIC

ENTRY_POINT_GROUP = "envelope_ci.assertions"
NEGATION_PREFIX = "not-"

# Order matters for the shorthands: a case's flat keys become assertions in this order, so
# its reasons read the same as before the list form existed.
BUILTIN: tuple[AssertionType, ...] = (
    contains.ASSERTION,
    icontains_all.ASSERTION,
    icontains_any.ASSERTION,
    is_json.ASSERTION,
    json_subset.ASSERTION,
    max_chars.ASSERTION,
    equals.ASSERTION,
    icontains.ASSERTION,
    contains_any.ASSERTION,
    contains_all.ASSERTION,
    starts_with.ASSERTION,
    regex.ASSERTION,
    json_path.ASSERTION,
    python_grader.ASSERTION,
    tool_call.ASSERTION,
    LLM_RUBRIC,
    cost.ASSERTION,
    latency.ASSERTION,
    similar.ASSERTION,
)


@lru_cache(maxsize=1)
def assertion_types() -> Mapping[str, AssertionType]:
    """Every assertion type by name; a plug-in may not shadow a built-in or another plug-in."""
    types: dict[str, AssertionType] = {}
    for kind in (*BUILTIN, *load_plugins(ENTRY_POINT_GROUP, AssertionType, "assertion")):
        if kind.name in types or kind.name.startswith(NEGATION_PREFIX):
            raise UsageError(f"assertion type {kind.name!r} is defined twice or starts with {NEGATION_PREFIX!r}")
        types[kind.name] = kind
    return types


@lru_cache(maxsize=1)
def shorthands() -> Mapping[str, tuple[AssertionType, bool]]:
    """Flat fixture keys -> (type, negated), in the order their assertions are checked (asked of every case: built
    once)."""
    out: dict[str, tuple[AssertionType, bool]] = {}
    for kind in assertion_types().values():
        if kind.shorthand:
            out[kind.shorthand] = (kind, False)
        if kind.negated_shorthand:
            out[kind.negated_shorthand] = (kind, True)
    return out


def lookup(name: str) -> tuple[AssertionType, bool] | None:
    """The type a list entry's ``type`` names, and whether it is negated; None when unknown."""
    types = assertion_types()
    if name in types:
        return types[name], False
    if name.startswith(NEGATION_PREFIX):
        kind = types.get(name[len(NEGATION_PREFIX):])
        if kind is not None and kind.check_not is not None:
            return kind, True
    return None


def type_names() -> list[str]:
    """Every name an ``assert`` entry may use, negated forms included."""
    names = []
    for kind in assertion_types().values():
        names.append(kind.name)
        if kind.check_not is not None:
            names.append(NEGATION_PREFIX + kind.name)
    return names


def schema_fragments() -> dict[str, Any]:
    """The case schema's parts that come from assertions: each shorthand key and the ``assert`` list."""
    props: dict[str, Any] = {}
    for key, (kind, negated) in shorthands().items():
        what = f"Shorthand for {{type: {NEGATION_PREFIX if negated else ''}{kind.name}}}"
        props[key] = {**kind.value_schema, "description": f"{what}: {kind.description}"}
    branches = []
    entry_keys = _entry_keys()
    for name in type_names():
        found = lookup(name)
        assert found is not None  # type_names lists only names lookup knows
        kind = found[0]
        # An entry key of another type is refused, not ignored (``endpoint`` on a ``contains``).
        then: dict[str, Any] = {"properties": {"value": kind.value_schema,
                                               **{k: False for k in entry_keys if k not in kind.entry_keys},
                                               **kind.entry_keys}}
        required = ([] if kind.value_optional else ["value"]) + [k for k in kind.entry_keys
                                                                  if k not in kind.optional_keys]
        if required:
            then["required"] = required
        # `required`: an entry without a type (a typo, `tpye`) is not every type at once
        branches.append({"if": {"required": ["type"], "properties": {"type": {"const": name}}}, "then": then})
    props["assert"] = {
        "type": "array",
        "description": "Assertions on the answer, checked in order (promptfoo's names where they overlap).",
        "items": {
            "type": "object",
            "required": ["type"],
            "additionalProperties": False,
            "properties": {"type": {"enum": type_names()}, "value": {}, "description": {"type": "string"},
                           **entry_keys},
            "allOf": branches,
        },
    }
    return props


def _entry_keys() -> dict[str, Any]:
    """Every key an ``assert`` entry may take besides type, value and description, with the schema its types agree
    on: ``threshold`` differs by type, and each type's own branch checks it."""
    out: dict[str, Any] = {}
    for kind in assertion_types().values():
        for key, schema in kind.entry_keys.items():
            out[key] = schema if out.get(key, schema) == schema else {}
    return out
