"""``contains-all``: every substring appears, case-sensitive."""
from __future__ import annotations

from .base import AssertionType, Failure
from .substrings import all_of, not_all_of

ASSERTION = AssertionType(
    name="contains-all",
    failure=Failure.WRONG,
    check=all_of(str),
    check_not=not_all_of(str),
    value_schema={"type": "array", "items": {"type": "string"}, "minItems": 1},
    description="Substrings the answer must all contain (case-sensitive).",
)
