"""``icontains-all`` (shorthand ``must_include``): every substring appears, ignoring case."""
from __future__ import annotations

from typing import Any

from .base import Answer, AssertionType, Failure


def _check(answer: Answer, value: list[str], case: Any) -> list[str]:
    lowered = answer.text.lower()
    return [f"missing {needle!r}" for needle in value if needle.lower() not in lowered]


def _check_not(answer: Answer, value: list[str], case: Any) -> list[str]:
    lowered = answer.text.lower()
    if value and all(needle.lower() in lowered for needle in value):
        return [f"contains all of {value!r}"]
    return []


ASSERTION = AssertionType(
    name="icontains-all",
    shorthand="must_include",
    failure=Failure.WRONG,
    check=_check,
    check_not=_check_not,
    value_schema={"type": "array", "items": {"type": "string"}},
    description="Substrings the answer must contain (case-insensitive).",
)
