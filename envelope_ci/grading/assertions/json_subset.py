"""``json-subset`` (shorthand ``expect_json``): the parsed answer contains this value."""
from __future__ import annotations

import json
from typing import Any

from .base import Answer, AssertionType, Failure


def subset_mismatch(expected: Any, actual: Any, path: str = "$") -> str | None:
    """Where ``actual`` fails to contain ``expected`` (dicts by key, lists by position)."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return f"{path}: expected an object, got {type(actual).__name__}"
        for key, value in expected.items():
            if key not in actual:
                return f"{path}.{key}: missing"
            found = subset_mismatch(value, actual[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) < len(expected):
            return f"{path}: expected a list of at least {len(expected)} items"
        for i, value in enumerate(expected):
            found = subset_mismatch(value, actual[i], f"{path}[{i}]")
            if found:
                return found
        return None
    if expected != actual or isinstance(expected, bool) != isinstance(actual, bool):
        return f"{path}: expected {json.dumps(expected)}, got {json.dumps(actual)[:80]}"
    return None


def _check(answer: Answer, value: Any, case: Any) -> list[str]:
    where = subset_mismatch(value, answer.parsed) if answer.has_json else "no JSON answer"
    return [f"expect_json: {where}"] if where else []


def _check_not(answer: Answer, value: Any, case: Any) -> list[str]:
    return ([f"expect_json: the answer contains {json.dumps(value)[:80]}"]
            if answer.has_json and subset_mismatch(value, answer.parsed) is None else [])


ASSERTION = AssertionType(
    name="json-subset",
    shorthand="expect_json",
    failure=Failure.WRONG,
    needs_json=True,
    check=_check,
    check_not=_check_not,
    value_schema={},
    description="A subset the parsed JSON answer must contain (objects by key, lists by position).",
)
