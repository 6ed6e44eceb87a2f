"""``{{ name }}`` placeholders in what a case sends (prompt, system, messages, prompt files), filled from its
``vars``; and the vars matrix: a list-valued var makes one case per value."""
from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from msgspec.structs import replace

from ..errors import Problem, UsageError
from ..formats.escape import invisible_in
from ..grading.rubric import RUBRIC_TYPE
from .parse import RawCase
from .refs import FileRefs

# Plain substitution: a name, nothing else (no filters, no expressions). Values are not
# scanned again, so a variable can carry a literal "{{ x }}".
PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
FILE_KEYS = ("system_file", "prompt_file")

# The most text one case may render (its prompt, system and messages, prompt files read and every
# placeholder filled, plus what each llm-rubric judge is sent of it: the rubric and the question), and
# the most all the cases of a suite may. Filling is multiplication: a 126 KiB fixture whose defaults
# repeat a long var in every case once asked for 20 GB. Counted before a text is built, so a refused
# case costs nothing.
MAX_CASE_CHARS = 2**20
MAX_SUITE_CHARS = 64 * 2**20


class _TooLong(Exception):
    """Rendering stopped at ``where``: the case, or the suite with it, went over its cap (``message`` says which)."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(message)
        self.where = where
        self.message = message


def _as_text(value: Any) -> str:
    """A var as it is sent: strings as written, numbers and booleans as JSON spells them (``true``), and the list of a
    ``{value: [...]}`` as JSON (``["a", "b"]``), text kept as written."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return json.dumps(value.get("value"), ensure_ascii=False)
    return json.dumps(value)


@dataclass
class _Filler:
    """Fills every text of one case, remembering which names were used and which had no value."""

    case_id: str
    values: Mapping[str, str]
    suite_before: int = 0  # what the suite's cases before this one rendered
    written_id: str = ""  # the id as written, whose vars a problem with a variable is about (a matrix's base id)
    used: set[str] = field(default_factory=set)
    problems: list[tuple[str, str]] = field(default_factory=list)
    chars: int = 0  # rendered so far

    def __call__(self, where: str, text: str, ref: str | None = None) -> str:
        if "{{" not in text:  # most texts have no placeholder: skip the scan
            self.spend(where, len(text), ref)
            return text
        unknown: set[str] = set()
        size = len(text)
        for match in PLACEHOLDER.finditer(text):
            name = match.group(1)
            self.used.add(name)
            value = self.values.get(name)
            if value is not None:
                size += len(value) - (match.end() - match.start())
            elif name not in unknown:
                unknown.add(name)
                place = f" ({{{{ {name} }}}} in {ref}:{text.count(chr(10), 0, match.start()) + 1})" if ref else ""
                self.problems.append((where, f"unknown variable {name!r}{place}: "
                                             f"add it to the vars of case {self.written_id!r}"))
        self.spend(where, size, ref)  # before the text is built: a refused one never is
        return PLACEHOLDER.sub(lambda m: self.values.get(m.group(1), m.group(0)), text)

    def spend(self, where: str, size: int, ref: str | None = None) -> None:
        """Count ``size`` rendered characters; _TooLong past the case's cap or the suite's."""
        self.chars += size
        source = f" (with {ref})" if ref else ""
        if self.chars > MAX_CASE_CHARS:
            raise _TooLong(where, f"case {self.case_id!r} renders more than {MAX_CASE_CHARS // 2**20} MiB of text"
                                  f"{source}, the most a case may send (prompt, system and messages with their files "
                                  "read and every {{ name }} filled, and each llm-rubric judge's prompt): "
                                  "use fewer or shorter placeholders, vars or files")
        if self.suite_before + self.chars > MAX_SUITE_CHARS:
            raise _TooLong(where, f"the cases up to {self.case_id!r} render more than {MAX_SUITE_CHARS // 2**20} MiB "
                                  f"of text{source}, the most a suite may send (prompts, files and placeholders "
                                  "filled, judge prompts included): split the fixtures into suites, or send less")

    def file(self, key: str, ref: str, refs: FileRefs) -> str:
        """A prompt file's text, filled; not UTF-8 is a problem on the key that names it."""
        try:
            return self(key, refs.text(ref), ref)
        except UsageError as exc:
            self.problems.append((key, str(exc)))
            return ""


def _part(data: Mapping[str, Any], key: str, refs: FileRefs, fill: _Filler) -> str | None:
    """``system`` or ``prompt``: written inline, or the text of the file its ``_file`` key names."""
    if key in data:
        return fill(key, data[key])
    ref = data.get(f"{key}_file")
    return None if ref is None else fill.file(f"{key}_file", ref, refs)


def _content_part(where: str, part: Any, fill: _Filler) -> Any:
    if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
        return {**part, "text": fill(f"{where}.text", part["text"])}
    return part


def _message(where: str, message: Mapping[str, Any], fill: _Filler) -> dict[str, Any]:
    content = message.get("content")
    if isinstance(content, str):
        return {**message, "content": fill(f"{where}.content", content)}
    if isinstance(content, list):
        return {**message, "content": [_content_part(f"{where}.content.{i}", p, fill) for i, p in enumerate(content)]}
    return dict(message)


def _messages(data: Mapping[str, Any], refs: FileRefs, fill: _Filler) -> tuple[dict[str, Any], ...]:
    if "messages" in data:
        return tuple(_message(f"messages.{i}", m, fill) for i, m in enumerate(data["messages"]))
    system = _part(data, "system", refs, fill)
    head = [{"role": "system", "content": system}] if system is not None else []
    return (*head, {"role": "user", "content": _part(data, "prompt", refs, fill)})


def _judge_prompts(data: Mapping[str, Any], messages: tuple[dict[str, Any], ...], fill: _Filler) -> None:
    """Count what each llm-rubric judge is sent of the case (``grading.rubric.judge_request``): rubric and question."""
    rubrics = [(i, item["value"]) for i, item in enumerate(data.get("assert") or ())
               if isinstance(item, dict) and item.get("type") == RUBRIC_TYPE and isinstance(item.get("value"), str)]
    if not rubrics:
        return
    asked = next((m.get("content") for m in reversed(messages) if m.get("role") == "user"), "")
    question = len(asked) if isinstance(asked, str) else len(json.dumps(asked, ensure_ascii=False))
    for index, rubric in rubrics:
        fill.spend(f"assert.{index}.value", len(rubric) + question)


def render(data: Mapping[str, Any], refs: FileRefs, default_vars: frozenset[str] = frozenset(),
           written_id: str | None = None) -> tuple[tuple[dict[str, Any], ...], list[tuple[str, str]]]:
    """The messages a validated case sends, files read and placeholders filled, and its problems as (field, message).

    A var the case sets itself must be used (an unused one is most likely a typo); one it
    takes from its file's defaults may go unused, since the defaults serve every case.
    ``written_id``: the id as written, when a vars matrix made this case's (a problem with a
    variable is then said once for the whole matrix, not once per case).
    """
    variables = data.get("vars", {})
    written = written_id or data["id"]
    fill = _Filler(data["id"], {name: _as_text(value) for name, value in variables.items()}, refs.rendered, written)
    try:
        messages = _messages(data, refs, fill)
        _judge_prompts(data, messages, fill)
    except _TooLong as exc:
        return (), [(exc.where, exc.message)]
    refs.rendered += fill.chars
    for name in variables:
        if name not in fill.used and name not in default_vars:
            fill.problems.append((f"vars.{name}",
                                  f"unused variable {name!r}: case {written!r} has no {{{{ {name} }}}} "
                                  "in its prompt, system, messages or their files"))
    return messages, fill.problems


# A list-valued var makes one case per value; several make one per combination (a matrix). More combinations
# than this for one case, or more cases made by matrices in a whole suite, is bad input: a line of YAML must not
# make a million cases.
MAX_MATRIX_CASES = 1000
MAX_MATRIX_SUITE_CASES = 10_000
_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ID_ESCAPED = frozenset("%,=[]")  # what would end a value in ``id[name=value,...]``, and the escape itself


def _id_char(char: str) -> str:
    """One character of a value as an id spells it: percent-encoded (its UTF-8 bytes) when it would end the value,
    break the id's one word, or hide in it."""
    if char in _ID_ESCAPED or char.isspace() or not char.isprintable() or invisible_in(char):
        return "".join(f"%{byte:02X}" for byte in char.encode("utf-8", "surrogatepass"))
    return char


def _id_value(value: Any) -> str:
    """A matrix value as a case id names it: as the placeholder is filled, with ``%,=[]``, whitespace and invisible
    characters percent-encoded, so that every id is one word and two values never read the same."""
    return "".join(map(_id_char, _as_text(value)))


class _Axis(NamedTuple):
    """One list-valued var of a case: its name, its values in list order, and each value as the id spells it."""

    name: str
    values: list[Any]
    spelled: list[str]


def _matrix_value(value: Any) -> bool:
    """Whether a list item can be one case's value (a string, number or boolean); any other is the schema's to word."""
    return isinstance(value, (str, int)) or (isinstance(value, float) and math.isfinite(value))


def _axes(data: Any) -> list[_Axis]:
    """A case's list-valued vars in the order its vars are written; a list the schema will refuse is left to it."""
    if not isinstance(data, dict) or not isinstance(data.get("id"), str) or not isinstance(data.get("vars"), dict):
        return []
    return [_Axis(name, values, [_id_value(v) for v in values]) for name, values in data["vars"].items()
            if isinstance(values, list) and values and _VAR_NAME.fullmatch(name) and all(map(_matrix_value, values))]


def _repeated(raw: RawCase, axis: _Axis) -> Problem | None:
    """Two values of one list that would give two cases one id: the first such pair, on the list's line."""
    seen: dict[str, Any] = {}
    for value, spelled in zip(axis.values, axis.spelled, strict=True):
        if spelled in seen:
            first = seen[spelled]
            why = (f"{value!r} is in the list twice" if type(first) is type(value) and first == value
                   else f"{first!r} and {value!r} are both written {axis.name}={spelled} in a case id")
            where = f"vars.{axis.name}"
            return Problem(raw.file, raw.line_of(where), where, f"{why}: the matrix would make every case naming "
                                                                f"{axis.name}={spelled} twice; give each value once")
        seen[spelled] = value
    return None


def _too_many(raw: RawCase, axes: list[_Axis], count: int) -> Problem:
    """A matrix over the cap, with the lists' sizes that multiplied to it."""
    sizes = " × ".join(str(len(axis.values)) for axis in axes)
    return Problem(raw.file, raw.line_of("vars"), "vars",
                   f"a matrix of {count:,} cases ({sizes}), more than the {MAX_MATRIX_CASES:,} one case may make: "
                   "use fewer or shorter lists, or split the case")


def _expanded(raw: RawCase, axes: list[_Axis]) -> Iterator[RawCase]:
    """One raw case per combination, like ``itertools.product``: its own id, and its own value in its vars."""
    written_id = raw.data["id"]
    for picks in itertools.product(*(range(len(axis.values)) for axis in axes)):
        label = ",".join(f"{axis.name}={axis.spelled[i]}" for axis, i in zip(axes, picks, strict=True))
        chosen = {axis.name: axis.values[i] for axis, i in zip(axes, picks, strict=True)}
        data = {**raw.data, "id": f"{written_id}[{label}]", "vars": {**raw.data["vars"], **chosen}}
        yield replace(raw, data=data, written_id=written_id)


def _matrix_problem(raw: RawCase, axes: list[_Axis]) -> Problem | None:
    """Why this case's own matrix cannot be made (too many combinations, a value given twice), or None."""
    count = math.prod(len(axis.values) for axis in axes)
    if count > MAX_MATRIX_CASES:
        return _too_many(raw, axes, count)
    return next(filter(None, (_repeated(raw, axis) for axis in axes)), None)


@dataclass
class Matrices:
    """Expands the vars matrices of a suite's cases file by file, counting the cases they make against the suite's
    cap."""

    made: int = 0

    def expand(self, raws: Iterable[RawCase]) -> list[RawCase]:
        """A file's cases with each list-valued var expanded, in file order; a matrix that cannot be made is a problem,
        and the file's problems are raised together."""
        out: list[RawCase] = []
        problems: list[Problem] = []
        for raw in raws:
            axes = _axes(raw.data)
            if not axes:
                out.append(raw)
                continue
            found = _matrix_problem(raw, axes) or self._count(raw, axes)
            if found is not None:
                problems.append(found)
            elif self.made <= MAX_MATRIX_SUITE_CASES:  # past the cap, said once where it was crossed
                out += _expanded(raw, axes)
        if problems:
            raise UsageError(problems)
        return out

    def _count(self, raw: RawCase, axes: list[_Axis]) -> Problem | None:
        """Count what this matrix makes; the problem when it takes the suite past its cap, None otherwise."""
        before = self.made
        self.made += math.prod(len(axis.values) for axis in axes)
        if before <= MAX_MATRIX_SUITE_CASES < self.made:
            return Problem(raw.file, raw.line_of("vars"), "vars",
                           f"the vars matrices up to case {raw.data['id']!r} make more than "
                           f"{MAX_MATRIX_SUITE_CASES:,} cases, the most a suite may: use fewer or shorter lists")
        return None
