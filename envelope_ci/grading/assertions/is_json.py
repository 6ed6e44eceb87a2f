"""``is-json`` (shorthand ``schema``): the answer parses as JSON and satisfies this JSON Schema.

One engine, jsonschema-rs, does all of it. When the fixtures load it checks a case's schema (against its draft's
metaschema, each ``pattern`` compiled as an ECMA-262 regex, each ``$ref`` followed); for an answer it gives the
verdict and the reasons both, so the two cannot disagree. Each distinct schema is checked once and compiled once
per process, however many cases share it.

Nothing is ever fetched: jsonschema-rs is given a retriever that refuses every URI (its own would read files and
URLs), so a ``$ref`` outside the schema and the metaschemas jsonschema-rs bundles is bad input at load time. So are
``$ref``s that loop without reading deeper into the answer: jsonschema-rs accepts them, and answers something.
"""
from __future__ import annotations

import gc
import json
import marshal
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Any, TypeVar

import jsonschema_rs

from ...canonical import LONE_SURROGATE, canonical_json
from ..envelope import MAX_ANSWER_DEPTH
from .base import Answer, AssertionType, Failure

# Past this many errors the first ones say enough.
MAX_SCHEMA_ERRORS = 3
# jsonschema-rs recurses on the thread's stack, up to about 1 KB per level of the answer, and a stack overflow kills
# the process: no answer deeper than grading reads as JSON (MAX_ANSWER_DEPTH) is handed to it (a tool call's
# arguments, say); threads get 8 MB of stack on Linux, and 1 MB is enough for 1000 levels.
TOO_DEEP = "(root): the answer nests too deep to check against this schema"
_UNSAID = "(root): the answer does not satisfy this schema (jsonschema-rs cannot say where: {})"
_DRAFTS = {
    jsonschema_rs.Draft4Validator: jsonschema_rs.Draft4,
    jsonschema_rs.Draft6Validator: jsonschema_rs.Draft6,
    jsonschema_rs.Draft7Validator: jsonschema_rs.Draft7,
    jsonschema_rs.Draft201909Validator: jsonschema_rs.Draft201909,
    jsonschema_rs.Draft202012Validator: jsonschema_rs.Draft202012,
}
# The formats asserted are those envelope-ci asserted before jsonschema-rs (jsonschema, with no format extra installed):
# any other format jsonschema-rs knows is annotation only, as it was (docs/assertions.md lists them).
ASSERTED_FORMATS = {
    jsonschema_rs.Draft4Validator: ("email", "idn-email", "ipv4", "ipv6", "regex"),
    jsonschema_rs.Draft6Validator: ("email", "idn-email", "ipv4", "ipv6", "regex"),
    jsonschema_rs.Draft7Validator: ("date", "email", "idn-email", "idn-hostname", "ipv4", "ipv6", "regex"),
    jsonschema_rs.Draft201909Validator: ("date", "email", "idn-email", "idn-hostname", "ipv4", "ipv6", "regex", "uuid"),
    jsonschema_rs.Draft202012Validator: ("date", "email", "idn-email", "idn-hostname", "ipv4", "ipv6", "regex", "uuid"),
}
_KNOWN_FORMATS = ("date", "date-time", "time", "duration", "email", "idn-email", "hostname", "idn-hostname", "ipv4",
                  "ipv6", "uri", "uri-reference", "iri", "iri-reference", "uri-template", "json-pointer",
                  "relative-json-pointer", "regex", "uuid")


def _any_text(_value: str) -> bool:
    return True


_UNASSERTED = {cls: {name: _any_text for name in _KNOWN_FORMATS if name not in kept}
               for cls, kept in ASSERTED_FORMATS.items()}
T = TypeVar("T")
_BASE = "json-schema:///"  # jsonschema-rs's base URI for a schema without an $id


def _refuse(uri: str) -> Any:
    """jsonschema-rs's retriever: it never fetches anything, from the network or from a file."""
    raise ValueError(f"envelope-ci never fetches a schema ({uri})")


def _validator(schema: Any) -> jsonschema_rs.Validator:
    """The draft ``$schema`` names (draft 4, 6, 7, 2019-09 or 2020-12; any other is read as 2020-12), formats asserted.

    ``validator_cls_for`` picks the draft without fetching anything: ``validator_for`` would ask the
    retriever for a ``$schema`` it does not know, and refuse the schema.
    """
    cls = jsonschema_rs.validator_cls_for(schema)
    return cls(schema, validate_formats=True, formats=_UNASSERTED[cls], retriever=_refuse)


class SchemaCheck:
    """One schema, compiled: called with an answer, the reasons it fails the schema (none when it satisfies it)."""

    __slots__ = ("_validator",)

    def __init__(self, validator: jsonschema_rs.Validator) -> None:
        self._validator = validator

    def __call__(self, instance: Any) -> list[str]:
        """The failures, sorted by where in the answer: ``[]`` exactly when the answer satisfies the schema."""
        reasons = _asked(instance, self._reasons)
        return [TOO_DEEP] if reasons is None else reasons

    def holds(self, instance: Any) -> bool | None:
        """Whether the answer satisfies the schema (the verdict alone); None when it nests too deep to check."""
        return _asked(instance, self._validator.is_valid)

    def _reasons(self, instance: Any) -> list[str]:
        if self._validator.is_valid(instance):
            return []
        try:
            errors = sorted(self._validator.iter_errors(instance), key=lambda e: list(map(str, e.instance_path)))
        except UnicodeEncodeError:
            raise
        except ValueError as exc:  # past 255 levels jsonschema-rs decides, but cannot word why ("Recursion limit")
            return [_UNSAID.format(exc)]
        found = [f"{'/'.join(map(str, e.instance_path)) or '(root)'}: {e.message}" for e in errors]
        return found or [_UNSAID.format("it listed no error")]  # the verdict is is_valid's: no failure goes unsaid


def _asked(instance: Any, question: Callable[[Any], T]) -> T | None:
    """``question(instance)`` asked of jsonschema-rs, or None when the answer nests too deep to hand it.

    A server's lone surrogate ("\\ud800" in JSON) is not Unicode, and jsonschema-rs cannot read it:
    such an answer is asked again with U+FFFD in its place, as reports show it.
    """
    if _deeper_than(instance, MAX_ANSWER_DEPTH):
        return None
    try:
        return question(instance)
    except UnicodeEncodeError:
        pass
    try:
        readable = json.loads(LONE_SURROGATE.sub("\ufffd", json.dumps(instance, ensure_ascii=False)))
    except RecursionError:
        return None
    return question(readable)


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` nests more than ``limit`` lists and objects, a level at a time (no recursion here either).

    ``gc.get_referents`` lists the keys and values of objects and the items of lists, in C, and nothing for
    text, numbers, booleans and null: a level at a time, the whole answer costs a fifth of a walk in Python.
    """
    level = [value]
    for _ in range(limit + 1):
        level = gc.get_referents(*level)
        if not level:
            return False
    return True


@lru_cache(maxsize=4096)
def _compiled(schema_json: str) -> SchemaCheck:
    return SchemaCheck(_validator(json.loads(schema_json)))


def compile_schema(schema: Any) -> SchemaCheck:
    """The compiled check of one schema (shared by every case that uses the same one).

    Raises jsonschema-rs's ``ValidationError`` for a schema ``schema_problem`` finds bad.
    """
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


# -- references: where they lead, and whether they loop ------------------------------------------------------------

_REFS = ("$ref", "$dynamicRef", "$recursiveRef")
# Keywords whose subschemas apply to the same value as the schema holding them (a loop of these never ends) ...
_IN_PLACE_ONE = ("not", "if", "then", "else")  # if, then, else: from draft 7
_IN_PLACE_LISTS = ("allOf", "anyOf", "oneOf")
_IN_PLACE_MAPS = ("dependentSchemas", "dependencies")  # dependencies (a schema, or names): up to draft 7
# ... and those whose subschemas apply to a part of it, or to nothing ($defs).
_DEEPER_ONE = ("items", "additionalItems", "contains", "additionalProperties", "propertyNames", "unevaluatedItems",
               "unevaluatedProperties", "contentSchema")
_DEEPER_LISTS = ("items", "prefixItems")
_DEEPER_MAPS = ("properties", "patternProperties", "$defs", "definitions")

# A subschema and the resolver its references are read against.
Node = tuple[dict[str, Any], jsonschema_rs.Resolver]


def _kids(node: Node, draft: int, keywords: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]) -> Iterator[Node]:
    """The subschemas under ``keywords`` (one schema, lists of them, maps of them), each with its resolver."""
    contents, resolver = node
    ones, lists, maps = keywords
    found = [contents.get(k) for k in ones]
    found += [s for k in lists if isinstance(contents.get(k), list) for s in contents[k]]
    found += [s for k in maps if isinstance(contents.get(k), dict) for s in contents[k].values()]
    for kid in found:
        if isinstance(kid, dict):
            yield kid, _rebased(kid, resolver, draft)


def _rebased(schema: dict[str, Any], resolver: jsonschema_rs.Resolver, draft: int) -> jsonschema_rs.Resolver:
    """The resolver for the refs inside ``schema``: its ``$id`` (draft 4: ``id``) starts a new base URI."""
    given = schema.get("id" if draft == jsonschema_rs.Draft4 else "$id")
    if not isinstance(given, str) or given.startswith("#"):
        return resolver
    try:
        return resolver.lookup(given).resolver
    except (jsonschema_rs.ReferencingError, ValueError):
        return resolver


def _in_place(node: Node, draft: int) -> Iterator[Node]:
    """The subschemas applied to the same value as ``node``: in place, and where its refs lead (unresolvable: none)."""
    contents, resolver = node
    refs = [contents[k] for k in _REFS if isinstance(contents.get(k), str)]
    old = draft in (jsonschema_rs.Draft4, jsonschema_rs.Draft6, jsonschema_rs.Draft7)
    if "$ref" in contents and old:
        refs = refs[:1]  # up to draft 7 a $ref stands alone: the keywords beside it are ignored
    else:
        ones = _IN_PLACE_ONE[:1] if draft in (jsonschema_rs.Draft4, jsonschema_rs.Draft6) else _IN_PLACE_ONE
        yield from _kids(node, draft, (ones, _IN_PLACE_LISTS, _IN_PLACE_MAPS[1:] if old else _IN_PLACE_MAPS[:1]))
    for ref in refs:
        try:
            found = resolver.lookup(ref)
        except (jsonschema_rs.ReferencingError, ValueError):
            continue
        if isinstance(found.contents, dict):
            yield found.contents, found.resolver


def _everywhere(root: Node, draft: int) -> Iterator[Node]:
    """Every subschema of the document, the root first (iteratively: a deep schema must not recurse here)."""
    stack = [root]
    every = (_IN_PLACE_ONE + _DEEPER_ONE, _IN_PLACE_LISTS + _DEEPER_LISTS, _IN_PLACE_MAPS + _DEEPER_MAPS)
    while stack:
        node = stack.pop()
        yield node
        stack += _kids(node, draft, every)


def _loops(root: Node, draft: int) -> bool:
    """Whether a subschema comes back to itself through in-place keywords and refs (an iterative depth-first search).

    A subschema is known by its base URI and its text: two that are equal act alike, wherever they are
    written (a ref's target is a copy, not the object the walk met).
    """
    texts: dict[int, tuple[dict[str, Any], str]] = {}  # id -> (the subschema, kept alive so no id is reused; its text)

    def key(node: Node) -> tuple[str, str]:
        known = texts.get(id(node[0]))
        if known is None:
            known = texts[id(node[0])] = node[0], canonical_json(node[0])
        return node[1].base_uri, known[1]

    done: set[tuple[str, str]] = set()
    for start in _everywhere(root, draft):
        start_key = key(start)
        if start_key in done:
            continue
        path, stack = {start_key}, [(start_key, _in_place(start, draft))]
        while stack:
            node_key, kids = stack[-1]
            kid = next(kids, None)
            if kid is None:
                done.add(node_key)
                path.discard(node_key)
                stack.pop()
                continue
            kid_key = key(kid)
            if kid_key in path:
                return True
            if kid_key not in done:
                path.add(kid_key)
                stack.append((kid_key, _in_place(kid, draft)))
    return False


def _root(schema: dict[str, Any], draft: int, outside: list[str]) -> Node:
    """The schema in a registry of its own, to follow its refs as jsonschema-rs does (with the metaschemas it bundles).

    A URI outside the schema is not fetched either: it stands for an empty schema, and ``outside`` lists it.
    """
    def stand_in(uri: str) -> Any:
        outside.append(uri)
        return {}

    registry = jsonschema_rs.Registry([(_BASE, schema)], draft=draft, retriever=stand_in)
    return schema, _rebased(schema, registry.resolver(_BASE), draft)


def _unresolved(schema: dict[str, Any], draft: int, said: str) -> str | None:
    """The ``$ref`` jsonschema-rs could not follow (``said`` is its message), as written: outside, or to nothing."""
    outside: list[str] = []
    missing: list[str] = []
    for contents, resolver in _everywhere(_root(schema, draft, outside), draft):
        ref = contents.get("$ref")
        if not isinstance(ref, str):
            continue
        try:
            found = resolver.lookup(ref)
        except (jsonschema_rs.ReferencingError, ValueError):
            missing.append(ref)
            continue
        if found.resolver.base_uri in outside:
            missing.append(ref)
    named = [ref for ref in missing if any(part and part in said for part in ref.partition("#")[::2])]
    return (named or missing)[0] if missing else None


_NOT_INSIDE = "$ref {!r} is not inside this schema, and envelope-ci never fetches one (copy what it names under $defs)"
_LOOP = "its $refs loop back to where they start without reading deeper into the answer: checking it would never end"


@lru_cache(maxsize=1024)
def _schema_problem(schema_json: str) -> tuple[str, str] | None:
    schema = json.loads(schema_json)
    draft = jsonschema_rs.Draft202012
    try:
        draft = _DRAFTS.get(jsonschema_rs.validator_cls_for(schema), draft)
        _compiled(schema_json)  # compiled once: the case's check, when it loads
    except jsonschema_rs.ValidationError as exc:  # the metaschema, a pattern, a $ref, an $id: the first it met
        return ".".join(map(str, exc.instance_path)), f"invalid JSON Schema: {_worded(exc, schema, draft)}"
    except (jsonschema_rs.ReferencingError, ValueError) as exc:
        return "", f"invalid JSON Schema: {exc}"
    try:
        loops = isinstance(schema, dict) and _loops(_root(schema, draft, []), draft)
    except (jsonschema_rs.ReferencingError, ValueError):  # jsonschema-rs compiled it: its registry is not ours to judge
        loops = False
    return ("", f"invalid JSON Schema: {_LOOP}") if loops else None


def _worded(exc: jsonschema_rs.ValidationError, schema: Any, draft: int) -> str:
    """jsonschema-rs's message; for a $ref it could not follow, one that names the $ref as written."""
    said = exc.message
    if not isinstance(exc.kind, jsonschema_rs.ValidationErrorKind.Referencing) or not isinstance(schema, dict):
        return said
    try:
        ref = _unresolved(schema, draft, said)
    except (jsonschema_rs.ReferencingError, ValueError):  # an $id that is not a URI: jsonschema-rs has said so
        return said
    return said if ref is None else _NOT_INSIDE.format(ref)


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
    if not answer.has_json:
        return []
    holds = True if value is None else value.holds(answer.parsed)
    if holds is None:  # unchecked is not "does not satisfy"
        return [f"schema: {TOO_DEEP}"]
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
