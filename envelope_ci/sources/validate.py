"""How every file the run reads is checked against its schema: jsonschema-rs says yes or no, jsonschema words a no.

jsonschema-rs checks a value in Rust, many times faster than jsonschema, and agrees with it on
JSON Schema (patterns aside: ECMA-262 there, docs/assertions.md). jsonschema words its errors
with the paths and keywords the problems quote, so it is imported and run only for a value
jsonschema-rs refuses: it is what a file's problems say, never what decides that it has some.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, Any

import jsonschema_rs

if TYPE_CHECKING:
    import jsonschema


class FileSchema:
    """One schema of a file format (a case, an envelope, the pins, the settings), made when first asked for."""

    def __init__(self, make: Callable[[], dict[str, Any]]) -> None:
        self._make = make

    @cached_property
    def schema(self) -> dict[str, Any]:
        return self._make()

    @cached_property
    def _fast(self) -> jsonschema_rs.Validator:
        return jsonschema_rs.Draft202012Validator(self.schema)

    @cached_property
    def precise(self) -> jsonschema.protocols.Validator:
        """jsonschema's validator of the schema, for the wording of what is wrong."""
        import jsonschema

        return jsonschema.Draft202012Validator(self.schema)

    def errors(self, data: Any) -> list[jsonschema.ValidationError]:
        """What is wrong with ``data``, in field order: none when jsonschema-rs accepts it."""
        try:
            if self._fast.is_valid(data):
                return []
        except (ValueError, OverflowError, RecursionError):  # a lone surrogate, a huge integer: jsonschema reads them
            pass
        return sorted(self.precise.iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
