"""``contains-all``: every substring appears, case-sensitive."""
from __future__ import annotations

from typing import Any

from .base import Answer, AssertionType, Failure


def _check(answer: Answer, value: list[str], case: Any) -> list[str]:
    return [f"missing {needle!r}" for needle in value if needle not in answer.text]


def _check_not(answer: Answer, value: list[str], case: Any) -> list[str]:
    return [f"contains all of {value!r}"] if all(needle in answer.text for needle in value) else []


ASSERTION = AssertionType(
    name="contains-all",
    failure=Failure.WRONG,
    check=_check,
    check_not=_check_not,
    value_schema={"type": "array", "items": {"type": "string"}, "minItems": 1},
    description="Substrings the answer must all contain (case-sensitive).",
)
