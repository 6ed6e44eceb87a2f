"""``icontains-any``: at least one substring appears, ignoring case.

Its negation ``not-icontains-any`` (shorthand ``must_not_include``) forbids every one.
"""
from __future__ import annotations

from typing import Any

from .base import Answer, AssertionType, Failure


def _check(answer: Answer, value: list[str], case: Any) -> list[str]:
    lowered = answer.text.lower()
    if any(needle.lower() in lowered for needle in value):
        return []
    return [f"contains none of {value!r}"]


def _check_not(answer: Answer, value: list[str], case: Any) -> list[str]:
    lowered = answer.text.lower()
    return [f"contains forbidden {needle!r}" for needle in value if needle.lower() in lowered]


ASSERTION = AssertionType(
    name="icontains-any",
    negated_shorthand="must_not_include",
    failure=Failure.WRONG,
    check=_check,
    check_not=_check_not,
    value_schema={"type": "array", "items": {"type": "string"}},
    description="Substrings of which the answer must contain at least one (case-insensitive).",
)
