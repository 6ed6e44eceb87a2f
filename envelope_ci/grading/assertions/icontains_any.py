"""``icontains-any``: at least one substring appears, ignoring case.

Its negation ``not-icontains-any`` (shorthand ``must_not_include``) forbids every one.
"""
from __future__ import annotations

from .base import AssertionType, Failure
from .substrings import any_of, none_of

ASSERTION = AssertionType(
    name="icontains-any",
    negated_shorthand="must_not_include",
    failure=Failure.WRONG,
    check=any_of(str.lower),
    check_not=none_of(str.lower),
    value_schema={"type": "array", "items": {"type": "string"}},
    description="Substrings of which the answer must contain at least one (case-insensitive).",
)
