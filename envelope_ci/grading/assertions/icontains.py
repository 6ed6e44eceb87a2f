"""``icontains``: a substring of the answer, ignoring case."""
from __future__ import annotations

from typing import Any

from .base import Answer, AssertionType, Failure


def _check(answer: Answer, value: str, case: Any) -> list[str]:
    return [] if value.lower() in answer.text.lower() else [f"missing {value!r} (ignoring case)"]


def _check_not(answer: Answer, value: str, case: Any) -> list[str]:
    return [f"contains forbidden {value!r} (ignoring case)"] if value.lower() in answer.text.lower() else []


ASSERTION = AssertionType(
    name="icontains",
    failure=Failure.WRONG,
    check=_check,
    check_not=_check_not,
    value_schema={"type": "string"},
    description="Substring the answer must contain (case-insensitive).",
)
