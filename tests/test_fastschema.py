"""Issue 10, item 5: the fast paths of offline grading say exactly what the slow ones say.

The compiled schema check (``grading.fastschema``) must agree with jsonschema on every schema it
compiles; a fixture case must get the same problems, word for word, whether the compiled check
vouches for it or jsonschema walks it; an answer the same schema messages; ``not_json`` the same
findings as the walk it replaced; ``numbered_lines`` the lines of ``str.splitlines``. Properties
run derandomized (CI is deterministic), tables pin the malformed cases a fixture author writes.
"""
from __future__ import annotations

import copy
import dataclasses
import math
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envelope_ci.canonical import LONE_SURROGATE
from envelope_ci.grading.assertions import is_json
from envelope_ci.grading.fastschema import compile_check
from envelope_ci.sources import cases as cases_module
from envelope_ci.sources import parse
from envelope_ci.sources.cases import case_schema, checked, not_json
from envelope_ci.sources.parse import RawCase, numbered_lines, parse_file
from envelope_ci.sources.recordings import ENVELOPE_SCHEMA


def bounded(examples: int) -> settings:
    return settings(max_examples=examples, derandomize=True, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# -- strategies -------------------------------------------------------------------------------------

TEXT = st.sampled_from(["", "a", "ab c", "x_1", "1x", "\u00e9", "system", "user", "42"]) | st.text(max_size=6)
FINITE = st.integers(-3, 3) | st.sampled_from([0.0, 1.0, 1.5, -0.5, 2.0, 10**20])
SCALARS = st.none() | st.booleans() | FINITE | TEXT  # what a schema holds: fixtures refuse NaN
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3), max_leaves=8)
ANSWERS = st.recursive(SCALARS | st.just(float("nan")), lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3), max_leaves=8)
TYPES = st.sampled_from(["string", "object", "array", "boolean", "null", "integer", "number"])
NAMES = st.sampled_from(["a", "b", "id", "type"])


def _schemas(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Objects of one to three keywords, each from those the compiler knows, nesting ``inner``."""
    def one(keyword: str, value: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
        return st.fixed_dictionaries({keyword: value})

    keywords = [
        one("type", TYPES | st.lists(TYPES, min_size=1, max_size=3, unique=True)),
        one("enum", st.lists(SCALARS, min_size=1, max_size=3)),
        one("const", JSON),
        one("pattern", st.sampled_from(["^a", "^[^\\s]+$", "b$", "^[A-Za-z_][A-Za-z0-9_]*$"])),
        *(one(k, st.integers(0, 3)) for k in ("minLength", "maxLength", "minItems", "maxItems")),
        *(one(k, st.integers(-2, 2) | st.sampled_from([0.5, 1.0])) for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")),
        one("required", st.lists(NAMES, max_size=2, unique=True)),
        one("properties", st.dictionaries(NAMES, inner, max_size=2)),
        one("additionalProperties", inner),
        one("propertyNames", inner),
        one("items", inner),
        *(one(k, st.lists(inner, min_size=1, max_size=3)) for k in ("allOf", "anyOf", "oneOf")),
        one("not", inner),
        st.fixed_dictionaries({"if": inner, "then": inner}, optional={"else": inner}),
        one("description", TEXT),
    ]
    return st.lists(st.one_of(*keywords), max_size=3).map(lambda parts: {k: v for part in parts for k, v in part.items()})


SCHEMAS = st.recursive(st.booleans() | st.just({}), _schemas, max_leaves=6)


# -- the compiled check against jsonschema ----------------------------------------------------------


@bounded(1000)
@given(SCHEMAS, st.lists(ANSWERS, min_size=1, max_size=6))
def test_the_compiled_check_agrees_with_jsonschema(schema: Any, instances: list[Any]) -> None:
    check = compile_check(schema)
    assert check is not None, schema  # every keyword drawn here is one it compiles
    validator = jsonschema.Draft202012Validator(schema)
    for instance in instances:
        assert check(instance) == validator.is_valid(instance), (schema, instance)


EDGES = [
    ({"type": "integer"}, [1, 1.0, 1.5, True, -0.0, 10**30, float("nan")]),
    ({"type": "number"}, [1, 1.5, True, None, "1"]),
    ({"type": ["string", "null"]}, ["", None, 0, False]),
    ({"enum": [1, "a"]}, [1, 1.0, True, "a", "b"]),
    ({"enum": [False, None]}, [False, 0, None, 0.0]),
    ({"const": [1, {"a": True}]}, [[1, {"a": True}], [True, {"a": 1}], [1.0, {"a": True}], (1, {"a": True})]),
    ({"minimum": 1, "exclusiveMaximum": 2}, [1, 0.999, 2, 1.5, True, "x", float("nan")]),
    ({"minLength": 2, "maxLength": 3}, ["a", "ab", "abcd", "\u00e9\u00e9", 5]),
    ({"minItems": 1, "items": {"type": "string"}}, [[], ["a"], ["a", 1], "a", {}]),
    ({"required": ["a"], "additionalProperties": False, "properties": {"a": {}}}, [{"a": 1}, {}, {"a": 1, "b": 2}, [], "a"]),
    ({"propertyNames": {"pattern": "^[a-z]+$"}, "additionalProperties": {"type": "integer"}}, [{"ab": 1}, {"Ab": 1}, {"ab": "1"}, {}]),
    ({"oneOf": [{"type": "integer"}, {"minimum": 0}]}, [-1, 1, 0.5, "x"]),
    ({"anyOf": [{"required": ["a"]}, {"required": ["b"]}], "not": {"required": ["a", "b"]}}, [{"a": 1}, {"b": 1}, {"a": 1, "b": 1}, {}, 3]),
    ({"if": {"properties": {"t": {"const": "x"}}}, "then": {"required": ["v"]}, "else": {"required": ["w"]}}, [{"t": "x"}, {"t": "x", "v": 1}, {"w": 1}, {"t": "y"}]),
    (True, [None, 1]),
    (False, [None, 1]),
]


@pytest.mark.parametrize(("schema", "instances"), EDGES)
def test_json_schema_edges(schema: Any, instances: list[Any]) -> None:
    """Where Python and JSON Schema disagree: 1.0 is an integer, True is not 1, a tuple is no array."""
    check = compile_check(schema)
    assert check is not None
    validator = jsonschema.Draft202012Validator(schema)
    assert [check(x) for x in instances] == [validator.is_valid(x) for x in instances]


@pytest.mark.parametrize("schema", [
    {"format": "email"},  # a format checker is the answer validators', never the compiled check's
    {"$ref": "https://example.com/s.json"},
    {"$ref": "#/properties/a"},
    {"patternProperties": {"^a": {}}},
    {"uniqueItems": True},
    {"properties": {"a": {"$id": "x"}}},
    {"$schema": "http://json-schema.org/draft-07/schema#"},
    {"$schema": 7},
    {"minLength": 1.0},
    {"type": "whole"},
    {"pattern": "("},
    {"$defs": {"a": {"type": "string"}}, "$ref": "#/$defs/b"},
])
def test_what_it_does_not_vouch_for_is_left_to_jsonschema(schema: dict[str, Any]) -> None:
    assert compile_check(schema) is None


def test_local_refs_and_recursion() -> None:
    schema = {"$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}, "required": ["v"]}}, "$ref": "#/$defs/node"}
    check = compile_check(schema)
    assert check is not None
    assert check({"v": 1, "next": {"v": 2, "next": {"v": 3}}})
    assert not check({"v": 1, "next": {"next": {"v": 3}}})


def test_the_case_schema_and_the_envelope_compile() -> None:
    """A keyword added to the case schema that the compiler does not know would silently cost the speed."""
    assert compile_check(case_schema()) is not None
    assert compile_check(ENVELOPE_SCHEMA) is not None


# -- fixture cases: the same problems, word for word ------------------------------------------------

VALID = {"id": "c1", "stratum": "easy", "prompt": "Reply {{ x }}", "vars": {"x": 1}, "schema": {"type": "object"},
         "expect_json": {"a": 1}, "max_chars": 200, "tags": ["t"], "temperature": 0.5,
         "recorded": {"http_status": 200, "elapsed_ms": 1.0, "body": {}},
         "assert": [{"type": "contains", "value": "a"}, {"type": "not-icontains-any", "value": ["x"]}]}

MALFORMED: list[dict[str, Any]] = [
    {"id": "has space"}, {"id": ""}, {"id": 3}, {"stratum": "hard"}, {"stratum": None}, {"prompt": 3}, {"tags": "t"},
    {"tags": [1]}, {"vars": {"1x": "a"}}, {"vars": {"x": None}}, {"vars": []}, {"messages": []}, {"messages": [{"role": "bot"}]},
    {"messages": [{"content": "hi"}]}, {"timeout_s": 0}, {"timeout_s": True}, {"max_tokens": 0}, {"max_tokens": 1.5}, {"temperature": 3},
    {"seed": "1"}, {"stop": 1}, {"response_format": {}}, {"tools": [{}]}, {"tool_choice": 1}, {"completion": "both"},
    {"recorded": {"http_status": 99}}, {"recorded": []}, {"recorded": {"status": 200}}, {"schema": "object"}, {"schema": {"type": 7}},
    {"max_chars": 0}, {"max_chars": True}, {"expect_fragment": ["a"]}, {"must_include": "a"}, {"promt": "typo"},
    {"assert": "x"}, {"assert": [{"type": "nope"}]}, {"assert": [{"type": "contains"}]}, {"assert": [{"value": "a"}]},
    {"assert": [{"type": "contains", "value": "a", "endpoint": "j"}]}, {"assert": [{"type": "llm-rubric", "value": "r"}]},
    {"assert": [{"type": "regex", "value": "("}]}, {"assert": [{"type": "max-chars", "value": -1}]}, {"prompt_file": ""},
    {"system": "s", "system_file": "s.txt"}, {"description": 1}, {"temperature": float("nan")}, {"tags": ["\ud800"]},
    {"expect_json": {"k": float("inf")}}, {"expect_json": {1: "a"}},
]


def _problems(data: Any, fast: bool, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    with monkeypatch.context() as patched:
        if not fast:
            patched.setattr(cases_module, "_case_check", lambda: None)
        return [str(p) for p in checked(RawCase(data, "cases.yaml", 3, {"id": 3, "prompt": 4})).problems]


@pytest.mark.parametrize("change", MALFORMED, ids=lambda change: ",".join(map(str, change)))
def test_a_malformed_case_gets_the_same_problems_either_way(change: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    data = {**copy.deepcopy(VALID), **change}
    slow = _problems(data, False, monkeypatch)
    assert _problems(data, True, monkeypatch) == slow
    assert slow, change  # every row is malformed: a row that is not tests nothing


def test_without_a_prompt_or_with_both_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    for data in ({k: v for k, v in VALID.items() if k != "prompt"}, {**VALID, "completion": "x"}, {**VALID, "messages": [{"role": "user"}]}, [], "x"):
        assert _problems(data, True, monkeypatch) == _problems(data, False, monkeypatch)


@pytest.mark.parametrize("change", [{}, {"max_tokens": 1.0}, {"temperature": 2}, {"stratum": "stretch"}, {"vars": {"x": True}}, {"schema": False}])
def test_a_valid_case_is_valid_either_way(change: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """JSON Schema's edges: 1.0 is an integer, a bool is no number but is a var's value."""
    data = {**VALID, **change}
    assert _problems(data, True, monkeypatch) == _problems(data, False, monkeypatch) == []


CASE_VALUES = st.fixed_dictionaries({"id": TEXT}, optional={key: JSON for key in (
    "stratum", "prompt", "vars", "messages", "tags", "timeout_s", "max_tokens", "temperature", "stop", "schema", "max_chars", "assert", "recorded")})


@bounded(400)
@given(CASE_VALUES)
def test_any_case_gets_the_same_problems_either_way(data: dict[str, Any]) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        assert _problems(data, True, monkeypatch) == _problems(data, False, monkeypatch)


# -- answers: the same schema messages ---------------------------------------------------------------


@bounded(300)
@given(SCHEMAS, ANSWERS)
def test_an_answer_gets_the_same_schema_messages_either_way(schema: Any, answer: Any) -> None:
    fast = is_json.compile_schema(schema)(answer)
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(is_json, "compile_check", lambda schema: None)
        is_json._compiled.cache_clear()
        try:
            slow = is_json.compile_schema(schema)(answer)
        finally:
            is_json._compiled.cache_clear()
    assert fast == slow


# -- not_json: the findings of the walk it replaced -----------------------------------------------


def _walked(value: Any, path: str = "") -> tuple[str, str] | None:
    """The walk ``not_json`` was before it spelled out paths only for a finding (the reference)."""
    why = "text holds a lone UTF-16 surrogate escape (e.g. \\ud800), which is not valid Unicode"
    if isinstance(value, str):
        return (path, why) if LONE_SURROGATE.search(value) else None
    if isinstance(value, float):
        return None if math.isfinite(value) else (path, f"{value} is not a JSON number (use null or a finite number)")
    if value is None or isinstance(value, (bool, int)):
        return None
    if not isinstance(value, (dict, list)):
        return path, f"a YAML {type(value).__name__} is not JSON: quote it"
    for key, item in value.items() if isinstance(value, dict) else enumerate(value):
        here = LONE_SURROGATE.sub("\ufffd", f"{path}.{key}" if path else str(key))
        if isinstance(value, dict) and not isinstance(key, str):
            return here, f"key {key!r} is not text: quote it"
        if isinstance(key, str) and LONE_SURROGATE.search(key):
            return here, why
        found = _walked(item, here)
        if found is not None:
            return found
    return None


ODD_TEXT = st.sampled_from(["", "a", "\ud800", "x\udfff", "\u00e9"])
ODD = st.recursive(
    SCALARS | ODD_TEXT | st.sampled_from([float("inf"), float("-inf"), b"bytes", frozenset({1})]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(ODD_TEXT | st.integers(0, 2) | st.none(), inner, max_size=3),
    max_leaves=8,
)


@bounded(1000)
@given(ODD)
def test_not_json_finds_what_the_old_walk_found(value: Any) -> None:
    assert not_json(value) == _walked(value)


# -- lines ---------------------------------------------------------------------------------------------


@bounded(800)
@given(st.text(alphabet="ab \t\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029", max_size=12), st.sampled_from([1, 2, 3, 5, parse.LINES_BLOCK]))
def test_numbered_lines_are_splitlines(text: str, block: int) -> None:
    """Cut in blocks of any size (a block ends after a "\\n"), the lines and their numbers are those of the whole text."""
    was, parse.LINES_BLOCK = parse.LINES_BLOCK, block
    try:
        assert list(numbered_lines(text)) == list(enumerate(text.splitlines(), start=1))
    finally:
        parse.LINES_BLOCK = was


# -- what the JSON parser vouches for ------------------------------------------------------------------

JSONL_LINES = [  # (a line, whether the parser vouches for it)
    (r'{"id": "ok", "prompt": "caf\u00e9 plain"}', True),
    (r'{"id": "pair", "prompt": "\ud83d\ude00"}', False),
    (r'{"id": "lone", "prompt": "a\ud800b"}', False),
    (r'{"id": "key", "prompt": "p", "expect_json": {"\udc00": 1}}', False),
    (r'{"id": "deep", "prompt": "p", "schema": {"properties": {"a": {"const": "\uDFFF"}}}}', False),
    (r'{"id": "escaped", "prompt": "not one: \\ud800"}', False),
]


@pytest.mark.parametrize(("line", "vouched"), JSONL_LINES)
def test_a_vouched_case_gets_the_same_problems_as_a_walked_one(line: str, vouched: bool, tmp_path: Any) -> None:
    """JSON cannot hold NaN (refused), non-text keys or other types: only a surrogate escape needs the walk."""
    path = tmp_path / "cases.jsonl"
    path.write_text(line + "\n", encoding="utf-8")
    (raw,) = parse_file(path, "cases.jsonl")
    assert raw.plain is vouched
    assert [str(p) for p in checked(raw).problems] == [str(p) for p in checked(dataclasses.replace(raw, plain=False)).problems]
