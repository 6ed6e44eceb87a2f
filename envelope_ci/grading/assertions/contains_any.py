"""``contains-any``: at least one substring appears, case-sensitive."""
from __future__ import annotations

from typing import Any

from .base import Answer, AssertionType, Failure


def _check(answer: Answer, value: list[str], case: Any) -> list[str]:
    return [] if any(needle in answer.text for needle in value) else [f"contains none of {value!r}"]


def _check_not(answer: Answer, value: list[str], case: Any) -> list[str]:
    return [f"contains forbidden {needle!r}" for needle in value if needle in answer.text]


ASSERTION = AssertionType(
    name="contains-any",
    failure=Failure.WRONG,
    check=_check,
    check_not=_check_not,
    value_schema={"type": "array", "items": {"type": "string"}, "minItems": 1},
    description="Substrings of which the answer must contain at least one (case-sensitive).",
)
