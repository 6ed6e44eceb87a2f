"""``max-chars`` (shorthand ``max_chars``): a size budget, judged on the size channel.

A longer answer is not wrong, it is too big: the label stays, the channel is ``size``.
The check is the channel's, so it is made in ``analysis.channels`` with the pin's size.
"""
from __future__ import annotations

from typing import Any

from .base import Answer, AssertionType, Failure


def _check(answer: Answer, value: int, case: Any) -> list[str]:
    return [f"size: {len(answer.text)} chars > max_chars {value}"] if len(answer.text) > value else []


ASSERTION = AssertionType(
    name="max-chars",
    shorthand="max_chars",
    failure=Failure.SIZE,
    check=_check,
    value_schema={"type": "integer", "minimum": 1},
    description="The most characters the answer may have (the size channel).",
)
