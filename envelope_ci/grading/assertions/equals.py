"""``equals``: the answer text is exactly this string (no trimming, as in promptfoo)."""
from __future__ import annotations

from typing import Any

from .base import Answer, AssertionType, Failure

# Enough of a different answer to see how it differs.
SHOWN = 80


def _check(answer: Answer, value: str, case: Any) -> list[str]:
    return [] if answer.text == value else [f"answer is not exactly {value!r} (got {answer.text[:SHOWN]!r})"]


def _check_not(answer: Answer, value: str, case: Any) -> list[str]:
    return [f"answer is exactly the forbidden {value!r}"] if answer.text == value else []


ASSERTION = AssertionType(
    name="equals",
    failure=Failure.WRONG,
    check=_check,
    check_not=_check_not,
    value_schema={"type": "string"},
    description="Text the whole answer must be, character for character (no trimming).",
)
