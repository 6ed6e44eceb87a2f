"""``icontains-all`` (shorthand ``must_include``): every substring appears, ignoring case."""
from __future__ import annotations

from .base import AssertionType, Failure
from .substrings import all_of, not_all_of

ASSERTION = AssertionType(
    name="icontains-all",
    shorthand="must_include",
    failure=Failure.WRONG,
    check=all_of(str.lower),
    check_not=not_all_of(str.lower),
    value_schema={"type": "array", "items": {"type": "string"}},
    description="Substrings the answer must contain (case-insensitive).",
)
