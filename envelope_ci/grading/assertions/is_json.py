"""``is-json`` (shorthand ``schema``): the answer parses as JSON and satisfies this JSON Schema.

Each distinct schema is checked once and compiled once per process, however many cases share it.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import jsonschema

from ...canonical import canonical_json
from .base import Answer, AssertionType, Failure

SchemaCheck = Callable[[Any], list[str]]
# Past this many errors the first ones say enough.
MAX_SCHEMA_ERRORS = 3


@lru_cache(maxsize=4096)
def _compiled(schema_json: str) -> SchemaCheck:
    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    validator = cls(schema, format_checker=cls.FORMAT_CHECKER)

    def check(instance: Any) -> list[str]:
        errors = sorted(validator.iter_errors(instance), key=lambda e: list(map(str, e.absolute_path)))
        return [f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in errors]

    return check


def compile_schema(schema: Any) -> SchemaCheck:
    """The compiled check of one schema (shared by every case that uses the same one)."""
    return _compiled(canonical_json(schema))


@lru_cache(maxsize=1024)
def _schema_problem(schema_json: str) -> tuple[str, str] | None:
    schema = json.loads(schema_json)
    try:
        jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator).check_schema(schema)
    except jsonschema.SchemaError as exc:
        return ".".join(str(p) for p in exc.absolute_path), f"invalid JSON Schema: {exc.message}"
    return None


def schema_problem(schema: Any) -> tuple[str, str] | None:
    """Where a case's own JSON Schema is invalid (checked once per distinct schema)."""
    if not isinstance(schema, (dict, bool)):
        return None  # the case schema has said so already
    return _schema_problem(canonical_json(schema))


def _check(answer: Answer, value: SchemaCheck | None, case: Any) -> list[str]:
    if not answer.has_json:
        return ["no JSON answer"]
    if value is None:  # `{type: is-json}` alone: parsing as JSON is the whole check
        return []
    return [f"schema: {e}" for e in value(answer.parsed)[:MAX_SCHEMA_ERRORS]]


def _check_not(answer: Answer, value: SchemaCheck | None, case: Any) -> list[str]:
    holds = answer.has_json and (value is None or not value(answer.parsed))
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
