"""Compile each case's JSON Schema once, however many cases share it."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jsonschema

from .canonical import canonical_json

SchemaCheck = Callable[[Any], list[str]]


class SchemaCache:
    """One compiled validator per distinct schema (by canonical JSON)."""

    def __init__(self) -> None:
        self._checks: dict[str, SchemaCheck] = {}

    def check_for(self, schema: Mapping[str, Any] | bool | None) -> SchemaCheck | None:
        if schema is None:
            return None
        key = canonical_json(schema)
        found = self._checks.get(key)
        if found is None:
            cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
            validator = cls(schema, format_checker=cls.FORMAT_CHECKER)

            def found(instance: Any, _v: Any = validator) -> list[str]:
                errors = sorted(_v.iter_errors(instance), key=lambda e: list(map(str, e.absolute_path)))
                return [f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in errors]

            self._checks[key] = found
        return found

    def __len__(self) -> int:
        return len(self._checks)
