"""``contains-any``: at least one substring appears, case-sensitive."""
from __future__ import annotations

from .base import AssertionType, Failure
from .substrings import any_of, none_of

ASSERTION = AssertionType(
    name="contains-any",
    failure=Failure.WRONG,
    check=any_of(str),
    check_not=none_of(str),
    value_schema={"type": "array", "items": {"type": "string"}, "minItems": 1},
    description="Substrings of which the answer must contain at least one (case-sensitive).",
)
