"""``contains`` (shorthand ``expect_fragment``): a case-sensitive substring of the answer."""
from __future__ import annotations

from typing import Any

from .base import Answer, AssertionType, Failure


def _check(answer: Answer, value: str, case: Any) -> list[str]:
    return [] if value in answer.text else [f"missing fragment {value!r}"]


def _check_not(answer: Answer, value: str, case: Any) -> list[str]:
    return [f"contains forbidden fragment {value!r}"] if value in answer.text else []


ASSERTION = AssertionType(
    name="contains",
    shorthand="expect_fragment",
    failure=Failure.WRONG,
    check=_check,
    check_not=_check_not,
    value_schema={"type": "string"},
    description="Substring the answer must contain (case-sensitive).",
)
