"""``regex``: Python ``re.search`` finds the pattern in the answer text.

The pattern is compiled at load time, so an invalid one is bad input with its file and line.
"""
from __future__ import annotations

import re
from typing import Any

from .base import Answer, AssertionType, Failure


def pattern_problem(pattern: Any) -> str | None:
    """Why a pattern does not compile (None when it does, or when the schema has said it is no string)."""
    if not isinstance(pattern, str):
        return None
    try:
        re.compile(pattern)
    except re.error as exc:
        return f"invalid regular expression: {exc}"
    return None


def _value_problem(value: Any) -> tuple[str, str] | None:
    found = pattern_problem(value)
    return ("", found) if found else None


def _check(answer: Answer, value: re.Pattern[str], case: Any) -> list[str]:
    return [] if value.search(answer.text) else [f"no match for regex {value.pattern!r}"]


def _check_not(answer: Answer, value: re.Pattern[str], case: Any) -> list[str]:
    found = value.search(answer.text)
    return [f"matches forbidden regex {value.pattern!r}: {found.group(0)[:80]!r}"] if found else []


ASSERTION = AssertionType(
    name="regex",
    failure=Failure.WRONG,
    check=_check,
    check_not=_check_not,
    prepare=lambda pattern, _resolve: re.compile(pattern),
    value_problem=_value_problem,
    value_schema={"type": "string"},
    description="A Python regular expression found anywhere in the answer (re.search; flags inline, e.g. (?i)).",
)
