"""``{{ name }}`` placeholders in what a case sends (prompt, system, messages, prompt files), filled from its
``vars``."""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import UsageError
from ..grading.rubric import RUBRIC_TYPE
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
    """A var as it is sent: strings as written, numbers and booleans as JSON spells them (``true``)."""
    return value if isinstance(value, str) else json.dumps(value)


@dataclass
class _Filler:
    """Fills every text of one case, remembering which names were used and which had no value."""

    case_id: str
    values: Mapping[str, str]
    suite_before: int = 0  # what the suite's cases before this one rendered
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
                                             f"add it to the vars of case {self.case_id!r}"))
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


def render(data: Mapping[str, Any], refs: FileRefs,
           default_vars: frozenset[str] = frozenset()) -> tuple[tuple[dict[str, Any], ...], list[tuple[str, str]]]:
    """The messages a validated case sends, files read and placeholders filled, and its problems as (field, message).

    A var the case sets itself must be used (an unused one is most likely a typo); one it
    takes from its file's defaults may go unused, since the defaults serve every case.
    """
    variables = data.get("vars", {})
    fill = _Filler(data["id"], {name: _as_text(value) for name, value in variables.items()}, refs.rendered)
    try:
        messages = _messages(data, refs, fill)
        _judge_prompts(data, messages, fill)
    except _TooLong as exc:
        return (), [(exc.where, exc.message)]
    refs.rendered += fill.chars
    for name in variables:
        if name not in fill.used and name not in default_vars:
            fill.problems.append((f"vars.{name}",
                                  f"unused variable {name!r}: case {data['id']!r} has no {{{{ {name} }}}} "
                                  "in its prompt, system, messages or their files"))
    return messages, fill.problems
