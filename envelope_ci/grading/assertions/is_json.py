"""``is-json`` (shorthand ``schema``): the answer parses as JSON and satisfies this JSON Schema.

Each distinct schema is checked once and compiled once per process, however many cases share it; an
answer is run through jsonschema only when the schema's compiled check (``fastschema``) says no.
A schema's ``$ref`` is followed only inside the schema (and the bundled metaschemas): one that
points elsewhere, or loops without reading deeper into the answer, is bad input at load time,
and no validator is ever given a registry that could fetch a URL.
"""
from __future__ import annotations

import json
import marshal
from collections.abc import Callable, Iterator, Mapping
from functools import lru_cache
from typing import Any

import jsonschema
import referencing
import referencing.jsonschema
from jsonschema_specifications import REGISTRY as METASCHEMAS
from referencing.exceptions import Unresolvable

from ...canonical import canonical_json
from ..fastschema import compile_check, errors_of
from .base import Answer, AssertionType, Failure

SchemaCheck = Callable[[Any], list[str]]
# Past this many errors the first ones say enough.
MAX_SCHEMA_ERRORS = 3
# Retrieves nothing (jsonschema's default registry fetches unknown URLs): local refs and metaschemas only.
_OFFLINE = referencing.Registry()
_REFS = ("$ref", "$dynamicRef", "$recursiveRef")
TOO_DEEP = "(root): the answer nests too deep to check against this schema"


def _validator_class(schema: Any) -> Any:
    """The draft ``$schema`` names, else 2020-12 (whose metaschema then says a ``$schema`` that is not text is wrong).

    jsonschema's own lookup raises on a ``$schema`` that is not text or not a URI ("http://[::1"):
    like one it does not know, such a schema is read as 2020-12.
    """
    named = isinstance(schema, dict) and isinstance(schema.get("$schema"), str)
    try:
        return jsonschema.validators.validator_for(schema if named else {}, default=jsonschema.Draft202012Validator)
    except ValueError:
        return jsonschema.Draft202012Validator


@lru_cache(maxsize=4096)
def _compiled(schema_json: str) -> SchemaCheck:
    schema = json.loads(schema_json)
    cls = _validator_class(schema)
    validator = cls(schema, format_checker=cls.FORMAT_CHECKER, registry=_OFFLINE)
    valid = compile_check(schema) if cls is jsonschema.Draft202012Validator else None

    def check(instance: Any) -> list[str]:
        try:
            errors = sorted(errors_of(valid, validator, instance), key=lambda e: list(map(str, e.absolute_path)))
        except RecursionError:  # a deep answer under a recursive schema: the answer is hostile input, not our bug
            return [TOO_DEEP]
        return [f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in errors]

    return check


def compile_schema(schema: Any) -> SchemaCheck:
    """The compiled check of one schema (shared by every case that uses the same one)."""
    return _compiled(_schema_text(schema))


def _schema_text(schema: Any) -> str:
    """The schema's canonical JSON, the key of its check and its problem: each is asked of every case that has a schema.

    ``marshal`` writes a value four times faster than the canonical encoder, and exactly: types
    kept (``1``, ``1.0`` and ``true`` differ), keys in their order. Equal bytes are an equal
    value, so its canonical text is found once per way of writing a schema, not once per case.
    """
    try:
        return _canonical_of(marshal.dumps(schema))
    except ValueError:  # not marshal's types (a validated case holds none): the long way
        return canonical_json(schema)


@lru_cache(maxsize=4096)
def _canonical_of(marshalled: bytes) -> str:
    return canonical_json(marshal.loads(marshalled))


def _in_place(schema: Mapping[str, Any]) -> Iterator[Any]:
    """The subschemas applied to the same value as ``schema`` (not to a part of it): a cycle of these never ends."""
    for keyword in ("allOf", "anyOf", "oneOf"):
        if isinstance(schema.get(keyword), list):
            yield from schema[keyword]
    for keyword in ("not", "if", "then", "else"):
        yield schema.get(keyword)
    if isinstance(schema.get("dependentSchemas"), dict):
        yield from schema["dependentSchemas"].values()


def _has_cycle(edges: Mapping[int, list[int]]) -> bool:
    """Whether the graph loops (an iterative depth-first search: a deep schema must not recurse here either)."""
    done: set[int] = set()
    for start in edges:
        if start in done:
            continue
        path, stack = {start}, [(start, iter(edges[start]))]
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                done.add(node)
                path.discard(node)
                stack.pop()
            elif child in path:
                return True
            elif child not in done and child in edges:
                path.add(child)
                stack.append((child, iter(edges[child])))
    return False


def _reference_problem(schema: dict[str, Any]) -> str | None:
    """Why the schema's references cannot be followed offline, and to an end: one points outside it, or they loop."""
    try:
        edges = _reference_graph(schema)
    except Unresolvable as exc:
        return f"$ref {exc.ref!r} is not inside this schema, and envelope-ci never fetches one (copy what it names under $defs)"
    except ValueError as exc:  # urllib's word on a $id or $ref that is not a URI ("http://[::1")
        return f"a $id or $ref is not a URI reference ({exc})"
    return "its $refs loop back to where they start without reading deeper into the answer: checking it would never end" if _has_cycle(edges) else None


def _reference_graph(schema: dict[str, Any]) -> dict[int, list[int]]:
    """Each subschema (by id) and those applied to the same value: in place, or where its refs resolve, offline."""
    spec = referencing.jsonschema.specification_with(str(schema.get("$schema", "")), default=referencing.jsonschema.DRAFT202012)
    root = spec.create_resource(schema)
    uri = root.id() or ""
    registry = METASCHEMAS.combine(referencing.Registry().with_resource(uri, root)).crawl()
    edges: dict[int, list[int]] = {}
    stack = [(root, registry.resolver(uri))]
    while stack:
        resource, resolver = stack.pop()
        resolver = resolver.in_subresource(resource)
        contents = resource.contents
        if isinstance(contents, dict):
            refs = [contents[k] for k in _REFS if isinstance(contents.get(k), str)]
            targets = [*_in_place(contents), *(resolver.lookup(ref).contents for ref in refs)]
            edges[id(contents)] = [id(t) for t in targets if isinstance(t, dict)]
        stack += [(sub, resolver) for sub in resource.subresources()]
    return edges


@lru_cache(maxsize=1024)
def _schema_problem(schema_json: str) -> tuple[str, str] | None:
    schema = json.loads(schema_json)
    try:
        _validator_class(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        return ".".join(str(p) for p in exc.absolute_path), f"invalid JSON Schema: {exc.message}"
    found = _reference_problem(schema) if isinstance(schema, dict) else None
    return ("", f"invalid JSON Schema: {found}") if found else None


def schema_problem(schema: Any) -> tuple[str, str] | None:
    """Where a case's own JSON Schema is invalid (checked once per distinct schema)."""
    if not isinstance(schema, (dict, bool)):
        return None  # the case schema has said so already
    return _schema_problem(_schema_text(schema))


def _check(answer: Answer, value: SchemaCheck | None, case: Any) -> list[str]:
    if not answer.has_json:
        return ["no JSON answer"]
    if value is None:  # `{type: is-json}` alone: parsing as JSON is the whole check
        return []
    return [f"schema: {e}" for e in value(answer.parsed)[:MAX_SCHEMA_ERRORS]]


def _check_not(answer: Answer, value: SchemaCheck | None, case: Any) -> list[str]:
    errors = value(answer.parsed) if answer.has_json and value is not None else []
    if errors == [TOO_DEEP]:  # unchecked is not "does not satisfy"
        return [f"schema: {TOO_DEEP}"]
    holds = answer.has_json and not errors
    return ["schema: the answer satisfies a schema it must not"] if holds else []


ASSERTION = AssertionType(
    name="is-json",
    shorthand="schema",
    failure=Failure.SCHEMA,
    needs_json=True,
    value_optional=True,
    check=_check,
    check_not=_check_not,
    prepare=lambda schema, _resolve: compile_schema(schema),
    value_problem=schema_problem,
    value_schema={"type": ["object", "boolean"]},
    description="A full JSON Schema the parsed answer must satisfy (the answer must be JSON).",
)
