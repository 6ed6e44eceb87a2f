"""``max-words``: an answer with more than ``value`` whitespace-separated words is ``wrong``.

An example of an envelope-ci assertion plug-in (docs/plugins.md): one ``AssertionType``
and an entry point in ``pyproject.toml``.
"""
from __future__ import annotations

from typing import Any

from envelope_ci.grading.assertions.base import Answer, AssertionType, Failure


def _check(answer: Answer, value: int, case: Any) -> list[str]:
    words = len(answer.text.split())
    return [f"{words} words > max-words {value}"] if words > value else []


def _check_not(answer: Answer, value: int, case: Any) -> list[str]:
    words = len(answer.text.split())
    return [] if words > value else [f"{words} words <= {value}: expected more (not-max-words)"]


ASSERTION = AssertionType(
    name="max-words",
    failure=Failure.WRONG,
    check=_check,
    check_not=_check_not,
    value_schema={"type": "integer", "minimum": 1},
    description="The most whitespace-separated words the answer may have.",
)
