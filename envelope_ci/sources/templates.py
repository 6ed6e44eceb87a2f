"""``{{ name }}`` placeholders in what a case sends (prompt, system, messages, prompt files), filled from its ``vars``."""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import UsageError
from .refs import FileRefs

# Plain substitution: a name, nothing else (no filters, no expressions). Values are not
# scanned again, so a variable can carry a literal "{{ x }}".
PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
FILE_KEYS = ("system_file", "prompt_file")


def _as_text(value: Any) -> str:
    """A var as it is sent: strings as written, numbers and booleans as JSON spells them (``true``)."""
    return value if isinstance(value, str) else json.dumps(value)


@dataclass
class _Filler:
    """Fills every text of one case, remembering which names were used and which had no value."""

    case_id: str
    values: Mapping[str, str]
    used: set[str] = field(default_factory=set)
    problems: list[tuple[str, str]] = field(default_factory=list)

    def __call__(self, where: str, text: str, ref: str | None = None) -> str:
        if "{{" not in text:  # most texts have no placeholder: skip the scan
            return text
        unknown: set[str] = set()
        for match in PLACEHOLDER.finditer(text):
            name = match.group(1)
            self.used.add(name)
            if name not in self.values and name not in unknown:
                unknown.add(name)
                place = f" ({{{{ {name} }}}} in {ref}:{text.count(chr(10), 0, match.start()) + 1})" if ref else ""
                self.problems.append((where, f"unknown variable {name!r}{place}: add it to the vars of case {self.case_id!r}"))
        return PLACEHOLDER.sub(lambda m: self.values.get(m.group(1), m.group(0)), text)

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


def render(data: Mapping[str, Any], refs: FileRefs, default_vars: frozenset[str] = frozenset()) -> tuple[tuple[dict[str, Any], ...], list[tuple[str, str]]]:
    """The messages a validated case sends, files read and placeholders filled, and its problems as (field, message).

    A var the case sets itself must be used (an unused one is most likely a typo); one it
    takes from its file's defaults may go unused, since the defaults serve every case.
    """
    variables = data.get("vars", {})
    fill = _Filler(data["id"], {name: _as_text(value) for name, value in variables.items()})
    messages = _messages(data, refs, fill)
    for name in variables:
        if name not in fill.used and name not in default_vars:
            fill.problems.append((f"vars.{name}", f"unused variable {name!r}: case {data['id']!r} has no {{{{ {name} }}}} in its prompt, system, messages or their files"))
    return messages, fill.problems
