"""``json-path``: the value at a path of the JSON answer equals a value, or matches a regex.

The path syntax is small on purpose (no new dependency): ``$``, then ``.key``, ``[N]``
(``[-1]`` is the last item) or ``["key with space"]``, e.g. ``$.items[0].qty``.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ..json_equal import json_equal
from .base import Answer, AssertionType, Failure
from .regex import pattern_problem

_STEP = re.compile(r'\.([^.\[\]"\'\s]+)|\[(-?\d+)\]|\[("(?:[^"\\]|\\.)*")\]|\[\'([^\']*)\'\]')

Step = str | int


def parse_path(path: str) -> tuple[Step, ...]:
    """The keys and indexes of a path; ValueError (saying where) when it is not one."""
    if not path.startswith("$"):
        raise ValueError("a path starts with $ (e.g. $.items[0].qty)")
    steps: list[Step] = []
    at = 1
    while at < len(path):
        m = _STEP.match(path, at)
        if m is None:
            raise ValueError(f"cannot read the path at char {at}: {path[at:at + 20]!r} (use .key, [N] or [\"key\"])")
        key, index, quoted, single = m.groups()
        if index is not None:
            steps.append(int(index))
        elif quoted is not None:
            steps.append(json.loads(quoted))
        else:
            steps.append(key if key is not None else single)
        at = m.end()
    return tuple(steps)


def _shown(steps: tuple[Step, ...]) -> str:
    return "$" + "".join(f"[{s}]" if isinstance(s, int) else f".{s}" if re.fullmatch(r"[\w-]+", s)
                         else f"[{json.dumps(s)}]" for s in steps)


def lookup(document: Any, steps: tuple[Step, ...]) -> tuple[Any, str | None]:
    """The value at the path, or why there is none (naming how far the path got)."""
    here = document
    for i, step in enumerate(steps):
        missing = _missing(here, step)
        if missing:
            return None, f"no {_shown(steps[:i + 1])}: {_shown(steps[:i])} {missing}"
        here = here[step]
    return here, None


def _missing(here: Any, step: Step) -> str | None:
    """Why ``here[step]`` does not exist, or None when it does."""
    if isinstance(step, int):
        if isinstance(here, list):
            return None if -len(here) <= step < len(here) else f"has {len(here)} items"
        return f"is {_kind(here)}, not a list"
    if isinstance(here, dict):
        return None if step in here else "has no such key"
    return f"is {_kind(here)}, not an object"


def _kind(value: Any) -> str:
    return "null" if value is None else {dict: "an object", list: "a list", str: "a string",
                                         bool: "a boolean"}.get(type(value), "a number")


@dataclass(frozen=True)
class PathCheck:
    """A prepared value: the parsed path, and the value to equal or the pattern to match."""

    path: str
    steps: tuple[Step, ...]
    equals: Any = None
    matches: re.Pattern[str] | None = None

    def holds(self, found: Any) -> bool:
        """Whether the value found meets it: a pattern reads a string as is, anything else as its JSON text."""
        if self.matches is None:
            return json_equal(self.equals, found)
        return bool(self.matches.search(found if isinstance(found, str) else json.dumps(found)))

    @property
    def wanted(self) -> str:
        return f"matching {self.matches.pattern!r}" if self.matches else f"equal to {json.dumps(self.equals)[:80]}"


def _prepare(value: dict[str, Any], _resolve: Any) -> PathCheck:
    pattern = re.compile(value["matches"]) if "matches" in value else None
    return PathCheck(value["path"], parse_path(value["path"]), value.get("equals"), pattern)


def _value_problem(value: Any) -> tuple[str, str] | None:
    if not isinstance(value, dict) or not isinstance(value.get("path"), str):
        return None  # the schema has said so already
    if ("equals" in value) == ("matches" in value):
        return "", "give either 'equals' (a JSON value) or 'matches' (a regex)"
    try:
        parse_path(value["path"])
    except ValueError as exc:
        return "path", str(exc)
    found = pattern_problem(value.get("matches"))
    return ("matches", found) if found else None


def _check(answer: Answer, value: PathCheck, case: Any) -> list[str]:
    if not answer.has_json:
        return ["no JSON answer"]
    found, missing = lookup(answer.parsed, value.steps)
    if missing:
        return [f"json-path {missing}"]
    return [] if value.holds(found) else [f"json-path {value.path}: expected a value {value.wanted}, "
                                          f"got {json.dumps(found)[:80]}"]


def _check_not(answer: Answer, value: PathCheck, case: Any) -> list[str]:
    if not answer.has_json:
        return []
    found, missing = lookup(answer.parsed, value.steps)
    return ([f"json-path {value.path}: {json.dumps(found)[:80]} is {value.wanted}, which it must not be"]
            if not missing and value.holds(found) else [])


ASSERTION = AssertionType(
    name="json-path",
    failure=Failure.WRONG,
    needs_json=True,
    check=_check,
    check_not=_check_not,
    prepare=_prepare,
    value_problem=_value_problem,
    value_schema={
        "type": "object",
        "required": ["path"],
        "additionalProperties": False,
        "properties": {"path": {"type": "string"}, "equals": {}, "matches": {"type": "string"}},
    },
    description=("A value in the JSON answer, by path ($.items[0].qty): {path, equals: VALUE} or "
                 "{path, matches: REGEX}."),
)
