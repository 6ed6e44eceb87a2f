"""Fixture files -> raw cases with their lines: YAML (line-numbered, alias-capped), JSON, JSONL.

Fixture files are user input: every problem is reported with its file, line and field,
all at once, and never as a traceback.
"""
from __future__ import annotations

import json
import math
import re
import sys
from collections import deque
from collections.abc import Container, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import msgspec
import yaml

from ..errors import Problem, UsageError
from ..model import Data
from .files import read_text

MAX_YAML_ALIASES = 100
# Deeper than this, a file is refused on the line where it gets there: no fixture needs it, and it keeps
# every later step (validating, hashing, checking a JSON Schema) well inside Python's recursion limit.
MAX_DEPTH = 100
# What YAML aliases may add to a file once expanded, estimated without expanding: each node costs
# NODE_BYTES (about what a Python object takes) plus its text. A 100 KB file once reached 2 GB.
MAX_ALIAS_BYTES = 16 * 2**20
NODE_BYTES = 64


class RawCase(Data, frozen=True):
    """A case as found in a file (its file's defaults applied), before validation.

    ``key_lines`` holds the line of each top-level key, and of ``assert.N`` and ``vars.NAME``
    (in YAML, or when defaults were merged into them), so a problem in the defaults points at the defaults.
    """

    data: Any
    file: str
    line: int | None
    key_lines: Mapping[str, int]
    default_vars: frozenset[str] = frozenset()  # vars taken from the file's defaults: they may go unused
    # The JSON parser vouches that the data is plain JSON (``not_json`` has nothing to find): see ``_vouched``.
    plain: bool = False
    written_id: str | None = None  # the id as written, when a vars matrix made this case's (``templates.Matrices``)

    def line_of(self, where: str | None) -> int | None:
        """The line of a dotted field: that of its longest prefix with a known line, else the case's."""
        parts = where.split(".") if where else []
        for end in range(len(parts), 0, -1):
            line = self.key_lines.get(".".join(parts[:end]))
            if line is not None:
                return line
        return self.line


class _Refused(yaml.MarkedYAMLError):
    """Well-formed YAML this loader will not build (an alias bomb, deep nesting, a huge integer), marked where it
    starts."""

    def __init__(self, mark: Any, problem: str) -> None:
        super().__init__(problem=problem, problem_mark=mark)
        self.line: int = mark.line + 1
        self.message = problem


def _node_size(node: yaml.Node, sizes: Mapping[yaml.Node, int]) -> int:
    """A node's estimated size once its aliases are expanded: its children's sizes are known already."""
    if isinstance(node, yaml.ScalarNode):
        return NODE_BYTES + len(node.value)
    children = [item for pair in node.value for item in pair] if isinstance(node, yaml.MappingNode) else node.value
    return NODE_BYTES + sum(sizes[child] for child in children)


class _LineLoader(yaml.SafeLoader):
    """A safe loader that remembers where each mapping and key starts, and bounds aliases and nesting.

    Aliases are bounded by what they would expand to, counted while composing: an alias
    shares the node it names, so a bomb costs nothing until something (hashing, validating)
    walks it, and by then it is too late.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.aliases = 0
        self.expanded = 0
        self.depth = 0
        self.sizes: dict[yaml.Node, int] = {}
        self.lines: dict[int, tuple[int, dict[str, int]]] = {}

    def compose_node(self, parent: Any, index: Any) -> Any:  # type: ignore[override]
        alias_mark = self.peek_event().start_mark if self.check_event(yaml.AliasEvent) else None
        node: Any = super().compose_node(parent, index)
        if alias_mark is None:
            self.sizes[node] = _node_size(node, self.sizes)
        else:
            self._count_alias(node, alias_mark)
        return node

    def _count_alias(self, node: yaml.Node, mark: Any) -> None:
        self.aliases += 1
        if self.aliases > MAX_YAML_ALIASES:
            raise _Refused(mark, f"more than {MAX_YAML_ALIASES} YAML aliases: refusing a possible alias bomb")
        if node not in self.sizes:
            raise _Refused(mark, "an alias inside the node it names: a value that contains itself never ends, "
                                 "and is not JSON")
        self.expanded += self.sizes[node]
        if self.expanded > MAX_ALIAS_BYTES:
            raise _Refused(mark, f"YAML aliases expand past {MAX_ALIAS_BYTES // 2**20} MiB: refusing an alias bomb")

    def compose_sequence_node(self, anchor: Any) -> Any:
        return self._nested(super().compose_sequence_node, anchor)

    def compose_mapping_node(self, anchor: Any) -> Any:
        return self._nested(super().compose_mapping_node, anchor)

    def _nested(self, compose: Any, anchor: Any) -> Any:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _Refused(self.peek_event().start_mark, f"nested deeper than {MAX_DEPTH} levels")
        node = compose(anchor)
        self.depth -= 1
        return node


def _construct_located_map(loader: _LineLoader, node: yaml.MappingNode) -> Iterator[dict[Any, Any]]:
    # Recorded on the dict the caller finally gets (SafeLoader fills it after yielding).
    data: dict[Any, Any] = {}
    keys = {str(k.value): k.start_mark.line + 1 for k, _ in node.value if isinstance(k, yaml.ScalarNode)}
    loader.lines[id(data)] = (node.start_mark.line + 1, keys)
    yield data
    data.update(loader.construct_mapping(node))


def _huge_integer() -> str:
    return (f"an integer of more than {sys.get_int_max_str_digits()} digits, more than Python converts to or from text "
            "(quote it, if it is text)")


def _construct_int(loader: _LineLoader, node: yaml.ScalarNode) -> int:
    """An integer, refused on its line when it could not be written back in decimal (``0x`` and 4,000 hex digits,
    say)."""
    try:
        value: int = loader.construct_yaml_int(node)
        str(value)
    except ValueError:
        raise _Refused(node.start_mark, _huge_integer()) from None
    return value


_LineLoader.add_constructor("tag:yaml.org,2002:map", _construct_located_map)
_LineLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
# An unquoted `2024-09-26` is meant as the text a model would answer, not a date object
# (which is not JSON and could be neither hashed nor compared with a parsed answer).
_LineLoader.add_constructor("tag:yaml.org,2002:timestamp", yaml.SafeLoader.construct_yaml_str)  # type: ignore[type-var]


class NotJSON(ValueError):
    """A JSON text that holds what JSON or Python cannot (NaN, Infinity, a huge integer) or nests too deep.

    ``line`` is where, counted in the text given (None when it cannot be told).
    """

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


class _Token(ValueError):
    """Raised inside the JSON decoder, which knows no positions: the message, and how to find the token."""

    def __init__(self, message: str, pattern: str) -> None:
        super().__init__(message)
        self.pattern = pattern


_STRING = r'"[^"\\\n]*(?:\\.[^"\\\n]*)*"'  # a JSON string, which holds no raw newline
_STRINGS = re.compile(_STRING)
_BRACKETS = re.compile(r"[\[\]{}]")
_HUGE_INTEGER = r"(?<![\d.])-?\d{%d,}(?![\d.eE])"


def _refuse_constant(name: str) -> Any:
    raise _Token(f"{name} is not valid JSON (use null or a finite number)", r"(?<![\w-])-?" + name)


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _Token(f"{text} is not a JSON number Python can hold (it overflows to infinity): "
                     "use null or a finite number", re.escape(text))
    return value


def _line_outside_strings(text: str, pattern: str) -> int | None:
    """The line of the first match of ``pattern`` that is not inside a JSON string."""
    for match in re.finditer(f"{_STRING}|(?P<hit>{pattern})", text):
        if match.group("hit") is not None:
            return text.count("\n", 0, match.start()) + 1
    return None


def too_deep(text: str, limit: int = MAX_DEPTH) -> int | None:
    """The line where a JSON text first nests deeper than ``limit`` (brackets in strings skipped), or None."""
    if text.count("[") + text.count("{") <= limit:
        return None
    bare = _STRINGS.sub('""', text)  # the same lines: a string holds no raw newline
    depth = 0
    for match in _BRACKETS.finditer(bare):
        depth += 1 if match.group() in "[{" else -1
        if depth > limit:
            return bare.count("\n", 0, match.start()) + 1
    return None


# ``json.loads`` with these hooks builds a decoder per call; recordings and JSONL fixtures call it per line.
_DECODE = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float).decode


def loads_strict(text: str) -> Any:
    """``json.loads`` for user files: NaN, Infinity, numbers past what Python holds and deep nesting are NotJSON
    (with their line), not values that poison hashes and reports or errors that end as tracebacks."""
    deep = too_deep(text)
    if deep is not None:
        raise NotJSON(f"nested deeper than {MAX_DEPTH} levels", deep)
    # msgspec is as strict as this (no NaN, no lone surrogate), and fast; only what it refuses is read again to word why
    try:
        return msgspec.json.decode(text)
    except (msgspec.DecodeError, msgspec.ValidationError):
        pass
    try:
        if text.startswith("\ufeff"):  # json.loads words this one itself
            return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
        return _DECODE(text)
    except _Token as exc:
        raise NotJSON(str(exc), _line_outside_strings(text, exc.pattern)) from None
    except json.JSONDecodeError:
        raise
    except ValueError:  # the only other: an integer past Python's int-str limit
        raise NotJSON(_huge_integer(),
                      _line_outside_strings(text, _HUGE_INTEGER % (sys.get_int_max_str_digits() + 1))) from None


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
    problems = [Problem(shown, top_lines.get(str(key), 1), str(key),
                        "unknown key: a file with 'defaults' holds only 'defaults' and 'cases'")
                for key in data if key not in ("defaults", "cases")]
    if not isinstance(data.get("cases"), list):
        problems.append(Problem(shown, top_lines.get("cases", 1), "cases",
                                "a file with 'defaults' needs a 'cases' list"))
    if not isinstance(data["defaults"], dict):
        problems.append(Problem(shown, top_lines.get("defaults", 1), "defaults",
                                f"expected a mapping of case keys, got {type(data['defaults']).__name__}"))
    if problems:
        raise UsageError(problems)
    return data["cases"], data["defaults"]


def _split(data: Any, shown: str, top_lines: Mapping[str, int]) -> tuple[list[Any], dict[str, Any]]:
    """A file's cases, and the defaults they share (none unless the file is ``{defaults, cases}``)."""
    if isinstance(data, dict) and "defaults" in data:
        return _defaults_form(data, shown, top_lines)
    items = _unwrap(data)
    if items is None:
        raise UsageError([Problem(shown, 1, None,
                                  "expected a case, a list of cases, or {cases: [...]}" + _wrapper_hint(data))])
    return items, {}


# A case's own key replaces the defaults' keys that give the same message another way.
_REPLACES = {
    "prompt": ("prompt_file", "messages"),
    "prompt_file": ("prompt", "messages"),
    "system": ("system_file",),
    "system_file": ("system",),
    "messages": ("prompt", "prompt_file", "system", "system_file"),
}


def _entry_lines(key: str, entries: Iterable[Any], inherited: Container[Any], default_line: int,
                 own_line: int | None) -> dict[str, int]:
    """The line of each merged entry (``assert.0``, ``vars.tone``): the defaults' for those they gave."""
    found = {f"{key}.{e}": default_line if e in inherited else own_line for e in entries}
    return {k: line for k, line in found.items() if line is not None}


def _entries_of(lines: Mapping[str, int], key: str, shift: int = 0) -> dict[str, int]:
    """The lines under ``key.N`` (``assert.0``, ``assert.0.type``), renumbered ``key.(N + shift)``."""
    out = {}
    for where, line in lines.items():
        head, _, rest = where.partition(".")
        index, dot, tail = rest.partition(".")
        if head == key and index.isdigit():
            out[f"{key}.{int(index) + shift}{dot}{tail}"] = line
    return out


def _assert_lines(data: Any, lines: Mapping[int, tuple[int, dict[str, int]]]) -> dict[str, int]:
    """The line of each ``assert`` entry and of each of its keys, so a problem with one points at it, not at
    ``assert:``."""
    entries = data.get("assert") if isinstance(data, dict) else None
    found: dict[str, int] = {}
    for index, entry in enumerate(entries if isinstance(entries, list) else ()):
        if isinstance(entry, dict) and id(entry) in lines:
            start, keys = lines[id(entry)]
            found[f"assert.{index}"] = start
            found.update({f"assert.{index}.{key}": line for key, line in keys.items()})
    return found


def _var_lines(data: Any, lines: Mapping[int, tuple[int, dict[str, int]]]) -> dict[str, int]:
    """The line of each var of a YAML case or defaults, so a problem with one (a matrix's list) points at it."""
    found = data.get("vars") if isinstance(data, dict) else None
    if not isinstance(found, dict) or id(found) not in lines:
        return {}
    return {f"vars.{name}": line for name, line in lines[id(found)][1].items()}


def apply_defaults(raw: RawCase, defaults: Mapping[str, Any], lines: Mapping[str, int]) -> RawCase:
    """The case over its file's defaults: its own keys win, except that ``assert`` lists
    concatenate (defaults first) and ``vars`` merge name by name."""
    own = raw.data
    if not isinstance(own, dict) or not defaults:
        return raw
    replaced = {key for k in own for key in _REPLACES.get(k, ())}
    data = {k: v for k, v in defaults.items() if k not in own and k not in replaced}
    given = {k: line for k, line in lines.items() if k in data or k.partition(".")[0] in data}
    key_lines = {**given, **raw.key_lines}
    default_vars = set(data.get("vars", {})) if isinstance(data.get("vars"), dict) else set()
    data.update(own)
    base, mine = defaults.get("assert"), own.get("assert")
    if isinstance(base, list) and isinstance(mine, list):
        data["assert"] = base + mine
        key_lines = {k: line for k, line in key_lines.items() if not k.startswith("assert.")}
        key_lines.update(_entry_lines("assert", range(len(data["assert"])), range(len(base)), lines["assert"],
                                      raw.key_lines.get("assert", raw.line)))
        # each entry's own line where the file tells it (YAML): the case's entries come after the defaults'
        key_lines.update({**_entries_of(lines, "assert"), **_entries_of(raw.key_lines, "assert", len(base))})
    base, mine = defaults.get("vars"), own.get("vars")
    if isinstance(base, dict) and isinstance(mine, dict):
        data["vars"] = {**base, **mine}
        default_vars = set(base) - set(mine)
        key_lines.update(_entry_lines("vars", data["vars"], default_vars, lines["vars"],
                                      raw.key_lines.get("vars", raw.line)))
        for name in data["vars"]:  # each var's own line where the file tells it (YAML): the defaults' for theirs
            line = (lines if name in default_vars else raw.key_lines).get(f"vars.{name}")
            if line is not None:
                key_lines[f"vars.{name}"] = line
    # the defaults are from the same text
    return RawCase(data, raw.file, raw.line, key_lines, frozenset(default_vars), raw.plain)


def with_defaults(raws: list[RawCase], defaults: dict[str, Any], lines: Mapping[str, int], shown: str) -> list[RawCase]:
    """Every case of a file over the file's defaults; ``id`` is the one key defaults cannot give."""
    if "id" in defaults:
        raise UsageError([Problem(shown, lines["id"], "defaults.id",
                                  "defaults cannot give an id: each case names its own")])
    return [apply_defaults(raw, defaults, lines) for raw in raws]


def _reader_problem(text: str, shown: str, exc: yaml.reader.ReaderError) -> Problem:
    """A character YAML does not allow (a raw control byte, say), on its line."""
    code = exc.character  # a code point: the reader was given text
    return Problem(shown, text.count("\n", 0, exc.position) + 1, None,
                   f"malformed YAML: character U+{code:04X} is not allowed in YAML "
                   f"(write it as \\u{code:04x} in a double-quoted string)")


def _load_yaml(text: str, shown: str) -> tuple[Any, Mapping[int, tuple[int, dict[str, int]]]]:
    """A YAML document, and where each of its mappings and their keys start (by the mapping's id)."""
    loader = None
    try:
        loader = _LineLoader(text)
        return loader.get_single_data(), loader.lines
    except yaml.reader.ReaderError as exc:
        raise UsageError([_reader_problem(text, shown, exc)]) from None
    except _Refused as exc:
        raise UsageError([Problem(shown, exc.line, None, exc.message)]) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        hint = " (YAML indents with spaces, not tabs)" if "'\\t'" in str(exc.problem) else ""
        raise UsageError([Problem(shown, mark.line + 1 if mark else None, None,
                                  f"malformed YAML: {exc.problem or exc}{hint}")]) from None
    finally:
        if loader is not None:
            loader.dispose()


def parse_yaml_document(text: str, shown: str) -> RawCase:
    """A whole YAML file as one value with its key lines (``envelope-ci.yaml``), loaded as safely as fixtures."""
    data, lines = _load_yaml(text, shown)
    line, keys = lines.get(id(data), (1, {}))
    return RawCase(data, shown, line, keys)


def parse_yaml(text: str, shown: str) -> list[RawCase]:
    data, lines = _load_yaml(text, shown)
    if data is None:
        return []
    items, defaults = _split(data, shown, lines.get(id(data), (1, {}))[1])
    out = []
    for item in items:
        line, keys = lines.get(id(item), (None, {}))
        entries = {**_assert_lines(item, lines), **_var_lines(item, lines)}
        out.append(RawCase(item, shown, line, {**keys, **entries} if entries else keys))
    start, keys = lines.get(id(defaults), (1, {}))
    return with_defaults(out, defaults, {**{k: keys.get(k, start) for k in defaults}, **_assert_lines(defaults, lines),
                                         **_var_lines(defaults, lines)}, shown)


def json_problem(shown: str, exc: json.JSONDecodeError, line_offset: int = 0) -> Problem:
    """A JSON syntax error as a problem on its line, with a hint for the commonest slip."""
    before = exc.doc[: exc.pos].rstrip()
    hint = (" (a trailing comma? JSON allows none before ] or })"
            if before.endswith(",") and exc.doc[exc.pos : exc.pos + 1] in "]}" else "")
    return Problem(shown, exc.lineno + line_offset, None, f"malformed JSON: {exc.msg} (column {exc.colno}){hint}")


def _key_line(text: str, key: str) -> int:
    """Where a key is first written in a JSON file (json keeps no positions)."""
    match = re.compile(re.escape(json.dumps(key)) + r"\s*:").search(text)
    return text.count("\n", 0, match.start()) + 1 if match else 1


_ID = re.compile(r'"id"\s*:\s*(' + _STRING + ")")


def _id_lines(text: str) -> dict[str, deque[int]]:
    """Every line an ``"id": "..."`` is written on, by id, in file order: one pass (json keeps no positions).

    Inside a string a quote is escaped, so a match is a key named ``id`` (or, at worst, a key
    ending in ``\\"id``: a wrong line, never a wrong case).
    """
    found: dict[str, deque[int]] = {}
    line, at = 1, 0
    for match in _ID.finditer(text):
        line += text.count("\n", at, match.start())
        at = match.start()
        written = match.group(1)
        found.setdefault(json.loads(written) if "\\" in written else written[1:-1], deque()).append(line)
    return found


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _vouched(text: str) -> bool:
    """Whether what ``loads_strict`` made of this text is plain JSON for certain, without walking it.

    It refuses NaN, Infinity and huge numbers, JSON keys are text, and UTF-8 holds no lone
    surrogate: only a ``\\uD800``-``\\uDFFF`` escape can bring one in (an escaped backslash
    before "ud800" only costs the walk).
    """
    return "\\u" not in text or _SURROGATE_ESCAPE.search(text) is None


def parse_json(text: str, shown: str) -> list[RawCase]:
    try:
        data = loads_strict(text)
    except json.JSONDecodeError as exc:
        raise UsageError([json_problem(shown, exc)]) from None
    except NotJSON as exc:
        raise UsageError([Problem(shown, exc.line, None, str(exc))]) from None
    top_lines = {str(k): _key_line(text, str(k)) for k in data} if isinstance(data, dict) and "defaults" in data else {}
    items, defaults = _split(data, shown, top_lines)
    id_lines = _id_lines(text)
    plain = _vouched(text)
    out: list[RawCase] = []
    for item in items:
        case_id = item.get("id") if isinstance(item, dict) else None
        lines = id_lines.get(case_id) if isinstance(case_id, str) else None
        # a duplicate id gets the next line it is on
        out.append(RawCase(item, shown, lines.popleft() if lines else None, {}, plain=plain))
    # json keeps no positions: a problem in the defaults points at the "defaults" key.
    return with_defaults(out, defaults, dict.fromkeys(defaults, top_lines.get("defaults", 1)), shown)


# Lines are cut a block of about this many characters at a time (ending after a "\n"): the text is not held twice over.
LINES_BLOCK = 1 << 20


def numbered_lines(text: str) -> Iterator[tuple[int, str]]:
    """``enumerate(text.splitlines(), start=1)``, a block at a time: a 50 MB recordings file is not held twice over.

    A block ends just after a "\n", which ends a line whatever comes before it ("\r\n" stays
    whole), so the blocks' lines are the text's lines.
    """
    first, start = 1, 0
    while start < len(text):
        end = text.find("\n", start + LINES_BLOCK)
        end = len(text) if end < 0 else end + 1
        lines = text[start:end].splitlines()  # never empty: the block is not
        yield from enumerate(lines, start=first)
        first += len(lines)
        start = end


def parse_jsonl(text: str, shown: str) -> list[RawCase]:
    """Each line's case; every problem raised together."""
    problems, cases = [], []
    for number, line in numbered_lines(text):
        if not line.strip():
            continue
        try:
            cases.append(RawCase(loads_strict(line), shown, number, {}, plain=_vouched(line)))
        except json.JSONDecodeError as exc:
            problems.append(json_problem(shown, exc, number - 1))
        except NotJSON as exc:
            problems.append(Problem(shown, number, None, str(exc)))
    if problems:
        raise UsageError(problems)
    return cases


def parse_file(path: Path, shown: str) -> list[RawCase]:
    """A fixture file's cases, by its suffix."""
    text = read_text(path, shown)
    if path.suffix == ".jsonl":
        return parse_jsonl(text, shown)
    if path.suffix == ".json":
        return parse_json(text, shown)
    return parse_yaml(text, shown)
