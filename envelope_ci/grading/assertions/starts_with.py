"""``starts-with``: the answer text begins with this string (no trimming, as in promptfoo)."""
from __future__ import annotations

from typing import Any

from .base import Answer, AssertionType, Failure


def _check(answer: Answer, value: str, case: Any) -> list[str]:
    if answer.text.startswith(value):
        return []
    return [f"does not start with {value!r} (starts {answer.text[:len(value) + 20]!r})"]


def _check_not(answer: Answer, value: str, case: Any) -> list[str]:
    return [f"starts with forbidden {value!r}"] if answer.text.startswith(value) else []


ASSERTION = AssertionType(
    name="starts-with",
    failure=Failure.WRONG,
    check=_check,
    check_not=_check_not,
    value_schema={"type": "string", "minLength": 1},
    description="Text the answer must begin with (case-sensitive, no trimming).",
)
