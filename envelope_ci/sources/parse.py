"""Fixture files -> raw cases with their lines: YAML (line-numbered, alias-capped), JSON, JSONL.

Fixture files are user input: every problem is reported with its file, line and field,
all at once, and never as a traceback.
"""
from __future__ import annotations

import json
import re
from collections.abc import Container, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..errors import Problem, UsageError
from .files import read_text

MAX_YAML_ALIASES = 100
MAX_EXPANDED_NODES = 200_000


@dataclass(frozen=True)
class RawCase:
    """A case as found in a file (its file's defaults applied), before validation.

    ``key_lines`` holds the line of each top-level key, and of ``assert.N`` and ``vars.NAME``
    when defaults were merged into them, so a problem in the defaults points at the defaults.
    """

    data: Any
    file: str
    line: int | None
    key_lines: Mapping[str, int]
    default_vars: frozenset[str] = frozenset()  # vars taken from the file's defaults: they may go unused

    def line_of(self, where: str | None) -> int | None:
        """The line of a dotted field: that of its longest prefix with a known line, else the case's."""
        parts = where.split(".") if where else []
        for end in range(len(parts), 0, -1):
            line = self.key_lines.get(".".join(parts[:end]))
            if line is not None:
                return line
        return self.line


class _LineLoader(yaml.SafeLoader):
    """A safe loader that remembers where each mapping and key starts and caps aliases."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.aliases = 0
        self.lines: dict[int, tuple[int, dict[str, int]]] = {}

    def compose_node(self, parent: Any, index: Any) -> Any:  # type: ignore[override]
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_YAML_ALIASES:
                raise yaml.YAMLError(f"more than {MAX_YAML_ALIASES} YAML aliases: refusing a possible alias bomb")
        return super().compose_node(parent, index)



def _construct_located_map(loader: _LineLoader, node: yaml.MappingNode) -> Iterator[dict[Any, Any]]:
    # Recorded on the dict the caller finally gets (SafeLoader fills it after yielding).
    data: dict[Any, Any] = {}
    keys = {str(k.value): k.start_mark.line + 1 for k, _ in node.value if isinstance(k, yaml.ScalarNode)}
    loader.lines[id(data)] = (node.start_mark.line + 1, keys)
    yield data
    data.update(loader.construct_mapping(node))


_LineLoader.add_constructor("tag:yaml.org,2002:map", _construct_located_map)
# An unquoted `2024-09-26` is meant as the text a model would answer, not a date object
# (which is not JSON and could be neither hashed nor compared with a parsed answer).
_LineLoader.add_constructor("tag:yaml.org,2002:timestamp", yaml.SafeLoader.construct_yaml_str)  # type: ignore[type-var]


class NotJSON(ValueError):
    """A JSON text used NaN or Infinity, which JSON does not have (Python's json accepts them)."""


def _refuse_constant(name: str) -> Any:
    raise NotJSON(f"{name} is not valid JSON (use null or a finite number)")


def loads_strict(text: str) -> Any:
    """``json.loads`` that refuses NaN and Infinity instead of letting them poison hashes and reports."""
    return json.loads(text, parse_constant=_refuse_constant)


def _expanded_size(value: Any, budget: int) -> int:
    """Count nodes as a consumer would see them (aliases expanded), stopping at the budget."""
    seen, stack = 0, [value]
    while stack:
        item = stack.pop()
        seen += 1
        if seen > budget:
            return seen
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return seen


def _wrapper_hint(data: Any) -> str:
    if isinstance(data, dict) and len(data) == 1:
        return f" (found the key {next(iter(data))!r}: did you mean 'cases'?)"
    return ""


def _unwrap(data: Any) -> list[Any] | None:
    """A file holds one case, a list of cases, or a mapping with a ``cases`` list."""
    if isinstance(data, list):
        return data
    if isinstance(data, dict) and set(data) == {"cases"} and isinstance(data["cases"], list):
        return data["cases"]
    if isinstance(data, dict) and len(data) == 1 and isinstance(next(iter(data.values())), list):
        return None  # `case: [...]`, `tests: [...]`: a typo for `cases`, reported as such
    if isinstance(data, dict):
        return [data]
    return None


def _defaults_form(data: dict[str, Any], shown: str, top_lines: Mapping[str, int]) -> tuple[list[Any], dict[str, Any]]:
    """``{defaults: {...}, cases: [...]}``: the cases and their defaults, or every problem with the wrapper."""
    problems = [Problem(shown, top_lines.get(str(key), 1), str(key), "unknown key: a file with 'defaults' holds only 'defaults' and 'cases'")
                for key in data if key not in ("defaults", "cases")]
    if not isinstance(data.get("cases"), list):
        problems.append(Problem(shown, top_lines.get("cases", 1), "cases", "a file with 'defaults' needs a 'cases' list"))
    if not isinstance(data["defaults"], dict):
        problems.append(Problem(shown, top_lines.get("defaults", 1), "defaults", f"expected a mapping of case keys, got {type(data['defaults']).__name__}"))
    if problems:
        raise UsageError(problems)
    return data["cases"], data["defaults"]


def _split(data: Any, shown: str, top_lines: Mapping[str, int]) -> tuple[list[Any], dict[str, Any]]:
    """A file's cases, and the defaults they share (none unless the file is ``{defaults, cases}``)."""
    if isinstance(data, dict) and "defaults" in data:
        return _defaults_form(data, shown, top_lines)
    items = _unwrap(data)
    if items is None:
        raise UsageError([Problem(shown, 1, None, "expected a case, a list of cases, or {cases: [...]}" + _wrapper_hint(data))])
    return items, {}


# A case's own key replaces the defaults' keys that give the same message another way.
_REPLACES = {
    "prompt": ("prompt_file", "messages"),
    "prompt_file": ("prompt", "messages"),
    "system": ("system_file",),
    "system_file": ("system",),
    "messages": ("prompt", "prompt_file", "system", "system_file"),
}


def _entry_lines(key: str, entries: Iterable[Any], inherited: Container[Any], default_line: int, own_line: int | None) -> dict[str, int]:
    """The line of each merged entry (``assert.0``, ``vars.tone``): the defaults' for those they gave."""
    found = {f"{key}.{e}": default_line if e in inherited else own_line for e in entries}
    return {k: line for k, line in found.items() if line is not None}


def apply_defaults(raw: RawCase, defaults: Mapping[str, Any], lines: Mapping[str, int]) -> RawCase:
    """The case over its file's defaults: its own keys win, except that ``assert`` lists
    concatenate (defaults first) and ``vars`` merge name by name."""
    own = raw.data
    if not isinstance(own, dict) or not defaults:
        return raw
    replaced = {key for k in own for key in _REPLACES.get(k, ())}
    data = {k: v for k, v in defaults.items() if k not in own and k not in replaced}
    key_lines = {**{k: lines[k] for k in data}, **raw.key_lines}
    default_vars = set(data.get("vars", {})) if isinstance(data.get("vars"), dict) else set()
    data.update(own)
    base, mine = defaults.get("assert"), own.get("assert")
    if isinstance(base, list) and isinstance(mine, list):
        data["assert"] = base + mine
        key_lines.update(_entry_lines("assert", range(len(data["assert"])), range(len(base)), lines["assert"], raw.key_lines.get("assert", raw.line)))
    base, mine = defaults.get("vars"), own.get("vars")
    if isinstance(base, dict) and isinstance(mine, dict):
        data["vars"] = {**base, **mine}
        default_vars = set(base) - set(mine)
        key_lines.update(_entry_lines("vars", data["vars"], default_vars, lines["vars"], raw.key_lines.get("vars", raw.line)))
    return RawCase(data, raw.file, raw.line, key_lines, frozenset(default_vars))


def with_defaults(raws: list[RawCase], defaults: dict[str, Any], lines: Mapping[str, int], shown: str) -> list[RawCase]:
    """Every case of a file over the file's defaults; ``id`` is the one key defaults cannot give."""
    if "id" in defaults:
        raise UsageError([Problem(shown, lines["id"], "defaults.id", "defaults cannot give an id: each case names its own")])
    return [apply_defaults(raw, defaults, lines) for raw in raws]


def parse_yaml(text: str, shown: str) -> list[RawCase]:
    loader = _LineLoader(text)
    try:
        data = loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        hint = " (YAML indents with spaces, not tabs)" if "'\\t'" in str(exc.problem) else ""
        raise UsageError([Problem(shown, mark.line + 1 if mark else None, None, f"malformed YAML: {exc.problem or exc}{hint}")]) from None
    except yaml.YAMLError as exc:
        raise UsageError([Problem(shown, None, None, f"malformed YAML: {exc}")]) from None
    finally:
        loader.dispose()
    if loader.aliases and _expanded_size(data, MAX_EXPANDED_NODES) > MAX_EXPANDED_NODES:
        raise UsageError([Problem(shown, None, None, f"YAML aliases expand past {MAX_EXPANDED_NODES} nodes: refusing an alias bomb")])
    if data is None:
        return []
    items, defaults = _split(data, shown, loader.lines.get(id(data), (1, {}))[1])
    out = []
    for item in items:
        line, keys = loader.lines.get(id(item), (None, {}))
        out.append(RawCase(item, shown, line, keys))
    start, keys = loader.lines.get(id(defaults), (1, {}))
    return with_defaults(out, defaults, {k: keys.get(k, start) for k in defaults}, shown)


def json_problem(shown: str, exc: json.JSONDecodeError, line_offset: int = 0) -> Problem:
    """A JSON syntax error as a problem on its line, with a hint for the commonest slip."""
    before = exc.doc[: exc.pos].rstrip()
    hint = " (a trailing comma? JSON allows none before ] or })" if before.endswith(",") and exc.doc[exc.pos : exc.pos + 1] in "]}" else ""
    return Problem(shown, exc.lineno + line_offset, None, f"malformed JSON: {exc.msg} (column {exc.colno}){hint}")


def _key_line(text: str, key: str) -> int:
    """Where a key is first written in a JSON file (json keeps no positions)."""
    match = re.compile(re.escape(json.dumps(key)) + r"\s*:").search(text)
    return text.count("\n", 0, match.start()) + 1 if match else 1


def _id_line(text: str, case_id: Any, start: int = 0) -> tuple[int | None, int]:
    """Where a case's id is written in a JSON file (json keeps no positions), searching from
    ``start``; and where to search for the next case with the same id."""
    if not isinstance(case_id, str):
        return None, start
    match = re.compile(r'"id"\s*:\s*' + re.escape(json.dumps(case_id))).search(text, start)
    if not match:
        return None, start
    return text.count("\n", 0, match.start()) + 1, match.end()


def parse_json(text: str, shown: str) -> list[RawCase]:
    try:
        data = loads_strict(text)
    except json.JSONDecodeError as exc:
        raise UsageError([json_problem(shown, exc)]) from None
    except NotJSON as exc:
        raise UsageError([Problem(shown, None, None, str(exc))]) from None
    top_lines = {str(k): _key_line(text, str(k)) for k in data} if isinstance(data, dict) and "defaults" in data else {}
    items, defaults = _split(data, shown, top_lines)
    out: list[RawCase] = []
    resume: dict[str, int] = {}
    for item in items:
        case_id = item.get("id") if isinstance(item, dict) else None
        line, after = _id_line(text, case_id, resume.get(case_id, 0) if isinstance(case_id, str) else 0)
        if isinstance(case_id, str):
            resume[case_id] = after  # a duplicate id is found on its own line, not the first one's
        out.append(RawCase(item, shown, line, {}))
    # json keeps no positions: a problem in the defaults points at the "defaults" key.
    return with_defaults(out, defaults, dict.fromkeys(defaults, top_lines.get("defaults", 1)), shown)


def parse_jsonl(text: str, shown: str) -> list[RawCase]:
    out, problems = [], []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append(RawCase(loads_strict(line), shown, number, {}))
        except json.JSONDecodeError as exc:
            problems.append(json_problem(shown, exc, number - 1))
        except NotJSON as exc:
            problems.append(Problem(shown, number, None, str(exc)))
    if problems:
        raise UsageError(problems)
    return out


def parse_file(path: Path, shown: str) -> list[RawCase]:
    text = read_text(path, shown)
    if path.suffix == ".jsonl":
        return parse_jsonl(text, shown)
    if path.suffix == ".json":
        return parse_json(text, shown)
    return parse_yaml(text, shown)


