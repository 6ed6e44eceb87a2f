"""Load, validate and hash fixture files into cases; load recordings.

Fixture files are user input: every problem is reported with its file, line and
field, all at once, and never as a traceback.
"""
from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from .canonical import LONE_SURROGATE, canonical_json, digest, digest_bytes
from .errors import Problem, UsageError
from .model import Case, Envelope
from .parallel import parallel_map

CASE_SUFFIXES = (".yaml", ".yml", ".json", ".jsonl")
CONFIG_NAMES = ("envelope-ci.yaml", "envelope-ci.yml")
PINS_NAME = "envelope-pins.json"
MAX_YAML_ALIASES = 100
MAX_EXPANDED_NODES = 200_000
_REQUEST_KEYS = ("max_tokens", "temperature", "seed", "stop", "response_format")


@lru_cache(maxsize=1)
def case_schema() -> dict[str, Any]:
    """The fixture case format, published with the package for editors too."""
    return json.loads(resources.files(__package__).joinpath("case_schema.json").read_text("utf-8"))


@lru_cache(maxsize=1)
def _case_validator() -> jsonschema.protocols.Validator:
    return jsonschema.Draft202012Validator(case_schema())


@dataclass(frozen=True)
class RawCase:
    """A case as found in a file, before validation."""

    data: Any
    file: str
    line: int | None
    key_lines: Mapping[str, int]


def is_hidden(rel: Path) -> bool:
    return any(part.startswith(".") or part == "__pycache__" for part in rel.parts)


def fixture_files(root: Path, exclude: set[Path]) -> list[Path]:
    """Every file that belongs to the fixtures (hashed), sorted, minus excluded files and folders."""
    out = []
    for path in sorted(root.rglob("*")):
        resolved = path.resolve()
        if path.is_file() and not is_hidden(path.relative_to(root)) and not (resolved in exclude or exclude.intersection(resolved.parents)):
            out.append(path)
    return out


def fixture_digests(root: Path, exclude: set[Path]) -> dict[str, str]:
    """Each fixtures file (relative POSIX path) and the digest of its bytes, sorted by path."""
    return {p.relative_to(root).as_posix(): digest_bytes(p.read_bytes()) for p in fixture_files(root, exclude)}


def hash_of_digests(digests: Mapping[str, str]) -> str:
    """The fixtures hash: one digest over every (path, file digest) pair."""
    return digest([[path, value] for path, value in sorted(digests.items())])


def fixtures_hash(root: Path, exclude: set[Path]) -> str:
    """Hash of the fixtures directory: relative paths and bytes of every file but the excluded."""
    return hash_of_digests(fixture_digests(root, exclude))


def case_files(root: Path, exclude: set[Path]) -> list[Path]:
    """The files that hold cases: data files that are not a pins file or the config.

    A file named like the pins is never a case, even when ``--pins`` points elsewhere.
    """
    return [p for p in fixture_files(root, exclude) if p.suffix in CASE_SUFFIXES and p.name not in (*CONFIG_NAMES, PINS_NAME)]


def read_text(path: Path, shown: str) -> str:
    """UTF-8 text of a user file, or a problem naming the line of the first bad byte."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise UsageError([Problem(shown, line, None, f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})")]) from None


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
_LineLoader.add_constructor("tag:yaml.org,2002:timestamp", yaml.SafeLoader.construct_yaml_str)


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
    items = _unwrap(data)
    if items is None:
        raise UsageError([Problem(shown, 1, None, "expected a case, a list of cases, or {cases: [...]}" + _wrapper_hint(data))])
    out = []
    for item in items:
        line, keys = loader.lines.get(id(item), (None, {}))
        out.append(RawCase(item, shown, line, keys))
    return out


def _json_problem(shown: str, exc: json.JSONDecodeError, line_offset: int = 0) -> Problem:
    before = exc.doc[: exc.pos].rstrip()
    hint = " (a trailing comma? JSON allows none before ] or })" if before.endswith(",") and exc.doc[exc.pos : exc.pos + 1] in "]}" else ""
    return Problem(shown, exc.lineno + line_offset, None, f"malformed JSON: {exc.msg} (column {exc.colno}){hint}")


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
        raise UsageError([_json_problem(shown, exc)]) from None
    except NotJSON as exc:
        raise UsageError([Problem(shown, None, None, str(exc))]) from None
    items = _unwrap(data)
    if items is None:
        raise UsageError([Problem(shown, 1, None, "expected a case, a list of cases, or {cases: [...]}" + _wrapper_hint(data))])
    out: list[RawCase] = []
    resume: dict[str, int] = {}
    for item in items:
        case_id = item.get("id") if isinstance(item, dict) else None
        line, after = _id_line(text, case_id, resume.get(case_id, 0) if isinstance(case_id, str) else 0)
        if isinstance(case_id, str):
            resume[case_id] = after  # a duplicate id is found on its own line, not the first one's
        out.append(RawCase(item, shown, line, {}))
    return out


def parse_jsonl(text: str, shown: str) -> list[RawCase]:
    out, problems = [], []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append(RawCase(loads_strict(line), shown, number, {}))
        except json.JSONDecodeError as exc:
            problems.append(_json_problem(shown, exc, number - 1))
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


def _field_path(error: jsonschema.ValidationError) -> str:
    return ".".join(str(p) for p in error.absolute_path)


def unknown_key_problems(raw: RawCase, error: jsonschema.ValidationError) -> list[Problem]:
    """One problem per unexpected key, on the key's own line, with a did-you-mean."""
    known = [str(k) for k in error.schema.get("properties", {})]
    path = [str(p) for p in error.absolute_path]
    out = []
    for key in (LONE_SURROGATE.sub("\ufffd", str(k)) for k in error.instance):
        if key in known:
            continue
        guess = difflib.get_close_matches(key, known, n=1)
        hint = f" (did you mean {guess[0]!r}?)" if guess else ""
        line = raw.key_lines.get(path[0] if path else key, raw.line)
        out.append(Problem(raw.file, line, ".".join(path + [key]), f"unknown key{hint}"))
    return out


_SURROGATE_WHY = "text holds a lone UTF-16 surrogate escape (e.g. \\ud800), which is not valid Unicode"


def not_json(value: Any, path: str = "") -> tuple[str, str] | None:
    """Where a loaded value is not plain JSON, and why: lone surrogates, NaN/Infinity, YAML-only types, non-text keys."""
    if isinstance(value, str):
        return (path, _SURROGATE_WHY) if LONE_SURROGATE.search(value) else None
    if isinstance(value, float):
        return None if math.isfinite(value) else (path, f"{value} is not a JSON number (use null or a finite number)")
    if value is None or isinstance(value, (bool, int)):
        return None
    if not isinstance(value, (dict, list)):
        return path, f"a YAML {type(value).__name__} is not JSON: quote it"
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in items:
        here = LONE_SURROGATE.sub("\ufffd", f"{path}.{key}" if path else str(key))
        if isinstance(value, dict) and not isinstance(key, str):
            return here, f"key {key!r} is not text: quote it"
        if isinstance(key, str) and LONE_SURROGATE.search(key):
            return here, _SURROGATE_WHY
        found = not_json(item, here)
        if found is not None:
            return found
    return None


def validate_raw(raw: RawCase) -> list[Problem]:
    """Problems with one case: the format schema, then its own JSON Schema."""
    if not isinstance(raw.data, dict):
        return [Problem(raw.file, raw.line, None, f"a case must be a mapping, got {type(raw.data).__name__}")]
    if "recorded" in raw.data and set(raw.data) <= {"id", "recorded", "attempt_log"} and "attempt_log" in raw.data:
        return [Problem(raw.file, raw.line, None, "this is a recordings line (--record output), not a case: "
                        "keep recordings outside the fixtures directory and grade them with --replay FILE")]
    problems = []
    for error in sorted(_case_validator().iter_errors(raw.data), key=lambda e: list(map(str, e.absolute_path))):
        if error.validator in ("oneOf", "anyOf") and error.absolute_path:
            error = jsonschema.exceptions.best_match([error])  # the likeliest branch's own complaint
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            problems += unknown_key_problems(raw, error)
            continue
        field_name = _field_path(error)
        top = str(error.absolute_path[0]) if error.absolute_path else None
        line = raw.key_lines.get(top, raw.line) if top else raw.line
        message = error.message
        if error.validator == "pattern" and list(error.absolute_path) == ["id"]:
            message = f"{error.instance!r} has whitespace: ids are single words (use - or _)"
        elif error.validator == "anyOf" and not error.absolute_path:
            message = "a case needs a 'prompt' or 'messages'"
        elif error.validator == "not" and not error.absolute_path:
            message = "give either 'completion' or 'recorded', not both"
        problems.append(Problem(raw.file, line, field_name or None, message))
    found_not_json = not_json(raw.data)
    if found_not_json is not None:
        where, why = found_not_json
        problems.append(Problem(raw.file, raw.key_lines.get(where.split(".")[0], raw.line), where or None, why))
        return problems  # such a case cannot be hashed or its schema checked
    schema = raw.data.get("schema")
    if isinstance(schema, (dict, bool)):
        found = schema_problem(canonical_json(schema))
        if found:
            where, message = found
            problems.append(Problem(raw.file, raw.key_lines.get("schema", raw.line), "schema" + (f".{where}" if where else ""), message))
    return problems


@lru_cache(maxsize=1024)
def schema_problem(schema_json: str) -> tuple[str, str] | None:
    """Where a case's own JSON Schema is invalid; checked once per distinct schema."""
    schema = json.loads(schema_json)
    try:
        jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator).check_schema(schema)
    except jsonschema.SchemaError as exc:
        return ".".join(str(p) for p in exc.absolute_path), f"invalid JSON Schema: {exc.message}"
    return None


def envelope_from_raw(data: Mapping[str, Any]) -> Envelope:
    """A recorded envelope (fixture ``recorded`` or a recordings line) as plain data."""
    return Envelope(
        http_status=data.get("http_status"),
        elapsed_ms=data.get("elapsed_ms"),
        ttft_ms=data.get("ttft_ms"),
        headers=dict(data.get("headers") or {}),
        body=data.get("body"),
        error=data.get("error"),
        attempts=int(data.get("attempts", 1)),
        stream_complete=data.get("stream_complete"),
        notes=tuple(data.get("notes") or ()),
    )


def checked(raw: RawCase) -> tuple[list[Problem], str | None]:
    """A case's problems, and its digest when it has none: the per-case work worth spreading over cores."""
    problems = validate_raw(raw)
    return problems, None if problems else digest(raw.data)


def build_case(raw: RawCase, case_digest: str | None = None) -> Case:
    """A validated raw case as a frozen Case."""
    data = raw.data
    if "messages" in data:
        messages = tuple(data["messages"])
    else:
        system = [{"role": "system", "content": data["system"]}] if "system" in data else []
        messages = tuple(system + [{"role": "user", "content": data["prompt"]}])
    recorded = data.get("recorded")
    if isinstance(recorded, dict):
        recorded = [recorded]
    return Case(
        id=data["id"],
        stratum=data.get("stratum"),
        messages=messages,
        file=raw.file,
        line=raw.line,
        digest=case_digest or digest(data),
        expect_fragment=data.get("expect_fragment"),
        must_include=tuple(data.get("must_include", ())),
        must_not_include=tuple(data.get("must_not_include", ())),
        expect_json=data.get("expect_json"),
        has_expect_json="expect_json" in data,
        schema=data.get("schema"),
        max_chars=data.get("max_chars"),
        timeout_s=data.get("timeout_s"),
        completion=data.get("completion"),
        recorded=tuple(recorded) if recorded else None,
        request={k: data[k] for k in _REQUEST_KEYS if k in data},
    )


def load_cases(root: Path, exclude: set[Path], shown_root: str | None = None) -> list[Case]:
    """Every case under ``root``, validated; all problems raised together."""
    if not root.is_dir():
        raise UsageError(f"{root}: not a directory of fixtures")
    problems: list[Problem] = []
    cases: list[Case] = []
    first_seen: dict[str, str] = {}
    raws: list[RawCase] = []
    for path in case_files(root, exclude):
        shown = (Path(shown_root) / path.relative_to(root)).as_posix() if shown_root else path.as_posix()
        try:
            raws += parse_file(path, shown)
        except UsageError as exc:
            problems += exc.problems
    for raw, (found, case_digest) in zip(raws, parallel_map(checked, raws), strict=True):
        if found:
            problems += found
            continue
        case = build_case(raw, case_digest)
        if case.id in first_seen:
            problems.append(Problem(raw.file, raw.line, "id", f"duplicate id {case.id!r} (first defined at {first_seen[case.id]})"))
            continue
        first_seen[case.id] = f"{raw.file}:{raw.line}" if raw.line else raw.file
        cases.append(case)
    if problems:
        raise UsageError(sorted(problems, key=lambda p: p.file))  # stable: file order, then as found
    if not cases:
        raise UsageError([Problem(root.as_posix(), None, None, f"no cases found (looked for {', '.join(CASE_SUFFIXES)} files)")])
    return cases


def iter_recordings(path: Path) -> Iterator[tuple[int, Any]]:
    text = read_text(path, path.as_posix())
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                yield number, loads_strict(line)
            except json.JSONDecodeError as exc:
                raise UsageError([_json_problem(path.as_posix(), exc, number - 1)]) from None
            except NotJSON as exc:
                raise UsageError([Problem(path.as_posix(), number, None, str(exc))]) from None


@lru_cache(maxsize=1)
def _envelope_validator() -> jsonschema.protocols.Validator:
    """One recorded envelope, validated directly (no oneOf/$ref): replays can be 100k lines."""
    return jsonschema.Draft202012Validator(case_schema()["$defs"]["envelope"])


_ENVELOPE_KEYS = frozenset(case_schema()["$defs"]["envelope"]["properties"])
_NUMBER = (int, float)


def _plainly_valid(env: Any) -> bool:
    """A cheap check that implies the envelope schema holds (never the reverse).

    Replays can hold 100k lines and jsonschema costs ~40 µs each; anything this check
    does not vouch for goes through jsonschema, which also words the error.
    """
    if type(env) is not dict or not env.keys() <= _ENVELOPE_KEYS or ("http_status" in env) == ("error" in env):
        return False
    status = env.get("http_status")
    if status is not None and not (type(status) is int and 100 <= status <= 599):
        return False
    for key in ("elapsed_ms", "ttft_ms"):
        value = env.get(key)
        if value is not None and not (type(value) in _NUMBER and value >= 0):
            return False
    headers = env.get("headers", {})
    if type(headers) is not dict or not all(type(v) is str for v in headers.values()):
        return False
    if "error" in env and type(env["error"]) is not str:
        return False
    if "attempts" in env and not (type(env["attempts"]) is int and env["attempts"] >= 1):
        return False
    if any(key in env and type(env[key]) is not bool for key in ("stream", "stream_complete")):
        return False
    if "notes" in env and not (type(env["notes"]) is list and all(type(n) is str for n in env["notes"])):
        return False
    return "request" not in env or type(env["request"]) is dict


def envelope_problem(recorded: Any) -> tuple[str, str] | None:
    """The first problem with a ``recorded`` value (one envelope or a list of repeats)."""
    items = recorded if isinstance(recorded, list) else [recorded]
    if isinstance(recorded, list) and not recorded:
        return "recorded", "a list of repeats needs at least one envelope"
    validator = _envelope_validator()
    for index, env in enumerate(items):
        if _plainly_valid(env):
            continue
        error = next(validator.iter_errors(env), None)
        if error is not None:
            error = jsonschema.exceptions.best_match(validator.iter_errors(env)) or error
            prefix = f"recorded[{index}]" if isinstance(recorded, list) else "recorded"
            where = _field_path(error)
            return prefix + (f".{where}" if where else ""), error.message
    return None


def load_recordings(path: Path, case_ids: set[str]) -> dict[str, list[Envelope]]:
    """A ``--replay`` file: JSONL of ``{"id", "recorded"}``; lines for one id are its repeats."""
    if not path.is_file():
        raise UsageError(f"{path}: recordings file not found")
    shown = path.as_posix()
    out: dict[str, list[Envelope]] = {}
    problems: list[Problem] = []
    for number, item in iter_recordings(path):
        if not isinstance(item, dict) or not isinstance(item.get("id"), str) or "recorded" not in item:
            problems.append(Problem(shown, number, None, 'expected {"id": CASE_ID, "recorded": ENVELOPE}'))
            continue
        if item["id"] not in case_ids:
            problems.append(Problem(shown, number, "id", f"{item['id']!r} matches no case in the fixtures"))
            continue
        found = envelope_problem(item["recorded"])
        if found is not None:
            problems.append(Problem(shown, number, found[0], found[1]))
            continue
        recorded = item["recorded"]
        for env in recorded if isinstance(recorded, list) else [recorded]:
            out.setdefault(item["id"], []).append(envelope_from_raw(env))
    if problems:
        raise UsageError(problems)
    return out
