"""``tool-call``: the reply calls these tools, in this order, with at least these arguments.

A call whose arguments are not a JSON object is a shape fault (label ``schema``): the app
could not even run it. A missing call, another name or other arguments is ``wrong``.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..envelope import AnswerTooDeep, loads_answer
from .base import Answer, AssertionType, Failure
from .json_subset import subset_mismatch


@dataclass(frozen=True)
class Call:
    """One tool call: expected (``arguments`` None means any), or as the reply made it."""

    name: str
    arguments: Any = None

    def __str__(self) -> str:
        return self.name if self.arguments is None else f"{self.name}({json.dumps(self.arguments)[:80]})"


def _read(call: Mapping[str, Any]) -> tuple[Call | None, str | None]:
    """A reply's call, or why its shape is unusable. Empty arguments are no arguments (some servers send "")."""
    fn = call.get("function")
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
        return None, "has no function name"
    name, raw = fn["name"], fn.get("arguments", "")
    if not isinstance(raw, str):
        return None, f"{name}: arguments are not a JSON string (OpenAI sends one)"
    try:
        arguments = loads_answer(raw) if raw.strip() else {}
    except json.JSONDecodeError as exc:
        return None, f"{name}: arguments are not JSON: {exc.msg} at char {exc.pos}"
    except AnswerTooDeep as exc:
        return None, f"{name}: arguments are not JSON that can be graded: {exc}"
    if not isinstance(arguments, dict):
        return None, f"{name}: arguments are JSON but not an object"
    return Call(name, arguments), None


def _made(answer: Answer) -> list[Call]:
    return [call for call, _ in map(_read, answer.tool_calls) if call is not None]


def _fits(want: Call, got: Call) -> bool:
    return want.name == got.name and (want.arguments is None or subset_mismatch(want.arguments, got.arguments) is None)


def _first_miss(wanted: Sequence[Call], made: list[Call]) -> tuple[int, int] | None:
    """(index of the first expected call not found, where the search for it started); None when all are, in order."""
    start = 0
    for i, want in enumerate(wanted):
        found = next((j for j in range(start, len(made)) if _fits(want, made[j])), None)
        if found is None:
            return i, start
        start = found + 1
    return None


def _why(want: Call, made: list[Call], start: int) -> str:
    """Why an expected call was not found from ``start`` on, as precisely as the calls allow."""
    if not made:
        return f"no tool call (expected {want.name})"
    same = [got for got in made[start:] if got.name == want.name]
    if same:
        where = subset_mismatch(want.arguments, same[0].arguments, "$")
        return f"tool call {want.name}: arguments {where}"
    called = ", ".join(got.name for got in made)
    if any(got.name == want.name for got in made[:start]):
        return f"no call to {want.name} after {made[start - 1].name} (expected in this order; called: {called})"
    return f"no call to {want.name} (called: {called})"


def _check(answer: Answer, value: Sequence[Call], case: Any) -> list[str]:
    made = _made(answer)
    miss = _first_miss(value, made)
    return [] if miss is None else [_why(value[miss[0]], made, miss[1])]


def _check_not(answer: Answer, value: Sequence[Call], case: Any) -> list[str]:
    if _first_miss(value, _made(answer)) is not None:
        return []
    return [f"made the forbidden tool call{'s' if len(value) > 1 else ''} {', '.join(map(str, value))}"]


def _check_shape(answer: Answer, value: Sequence[Call], case: Any) -> list[str]:
    return [f"tool call {i}: {why}" for i, (_, why) in enumerate(map(_read, answer.tool_calls), 1) if why]


def _prepare(value: Any, _resolve: Any) -> tuple[Call, ...]:
    return tuple(Call(c["name"], c.get("arguments")) for c in (value if isinstance(value, list) else [value]))


_CALL = {
    "type": "object",
    "required": ["name"],
    "additionalProperties": False,
    "properties": {"name": {"type": "string", "minLength": 1}, "arguments": {"type": "object"}},
}

ASSERTION = AssertionType(
    name="tool-call",
    failure=Failure.WRONG,
    check=_check,
    check_not=_check_not,
    check_shape=_check_shape,
    prepare=_prepare,
    # One call or a list of them, without anyOf: a mistake gets the precise complaint, not "not valid under any".
    value_schema={**_CALL, "type": ["object", "array"], "minItems": 1, "items": _CALL},
    description="Tool calls the reply must make, in order: {name, arguments} (arguments a subset), or a list of them.",
)
