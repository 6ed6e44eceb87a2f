"""``regex``: Python ``re.search`` finds the pattern in the answer text.

The pattern is compiled at load time, so an invalid one is bad input with its file and line, and
so is one that can backtrack catastrophically: ``re`` has no time bound, and a model's answer is
untrusted text that can make such a pattern run for hours.
"""
from __future__ import annotations

import re
from typing import Any

try:  # the parser ``re`` itself uses (3.11+; ``sre_parse`` before)
    from re import _constants as _sre  # type: ignore[attr-defined]
    from re import _parser as _sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _sre  # type: ignore[no-redef]
    import sre_parse as _sre_parse  # type: ignore[no-redef]

from .base import Answer, AssertionType, Failure

NESTED_REPEAT = ("can backtrack catastrophically: a repeated group whose only required part repeats too, as in (a+)+ "
                 "or (\\w+\\s?)+, tries exponentially many ways on an answer that almost matches; "
                 "repeat the inner part once, or separate the repeats with a required character")


def pattern_problem(pattern: Any) -> str | None:
    """Why a pattern cannot be used: it does not compile, or it can backtrack catastrophically (None for one that
    is no string)."""
    if not isinstance(pattern, str):
        return None
    try:
        re.compile(pattern)
    except re.error as exc:
        return f"invalid regular expression: {exc}"
    return f"this regular expression {NESTED_REPEAT}" if _nested_repeat(_sre_parse.parse(pattern)) else None


_REPEATS = (_sre.MAX_REPEAT, _sre.MIN_REPEAT)


def _nested_repeat(items: Any) -> bool:
    """Whether a parsed pattern holds an unbounded repeat of something that is itself, in essence, an unbounded
    repeat."""
    for op, av in items:
        if op in _REPEATS:
            if av[1] == _sre.MAXREPEAT and _repeats_alone(av[2]):
                return True
            if _nested_repeat(av[2]):
                return True
        elif any(_nested_repeat(sub) for sub in _subpatterns(op, av)):
            return True
    return False


def _subpatterns(op: Any, av: Any) -> list[Any]:
    """The parsed patterns inside one item: a group's, each branch's, a look-around's, a conditional's."""
    if op is _sre.SUBPATTERN:
        return [av[-1]]
    if op is _sre.BRANCH:
        return list(av[1])
    if op in (_sre.ASSERT, _sre.ASSERT_NOT):
        return [av[1]]
    if op is _sre.GROUPREF_EXISTS:
        return [p for p in av[1:] if p is not None]
    return []  # an atomic group or a possessive repeat (3.11+) does not backtrack into itself


def _repeats_alone(body: Any) -> bool:
    """Whether every part of ``body`` that must match something (every part, if none must) is an unbounded repeat."""
    items = list(body)
    while len(items) == 1 and items[0][0] is _sre.SUBPATTERN:
        items = list(items[0][1][-1])
    required = [item for item in items if _sre_parse.SubPattern(body.state, [item]).getwidth()[0] > 0] or items
    return bool(required) and all(op in _REPEATS and av[1] == _sre.MAXREPEAT for op, av in required)


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
