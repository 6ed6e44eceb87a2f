"""Issue 11, item 18: properties over arbitrary input, checked with hypothesis (derandomized, so CI is deterministic).

The grader labels any body and status; the fixture loader answers any bytes with a case list or a
UsageError, and any JSON Schema in a case with a load-time problem or a check that never raises; SSE
framing and the stream assembler take any bytes; escaped cell and inline text never breaks a table,
opens a fence, a mention or raw HTML as GitHub's parser reads it.
"""
from __future__ import annotations

import html
import json
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
from conftest import make_case
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_checks import fences_are_ours, gfm
from msgspec.structs import astuple

from envelope_ci.analysis.cases import measure_of
from envelope_ci.canonical import LONE_SURROGATE, canonical_json
from envelope_ci.errors import UsageError
from envelope_ci.formats.escape import cell, inline
from envelope_ci.formats.markdown import table
from envelope_ci.grading.assertions import is_json
from envelope_ci.grading.assertions.is_json import compile_schema, schema_problem
from envelope_ci.grading.grade import grade
from envelope_ci.model import Envelope, Grade, Label
from envelope_ci.providers.openai_chat import OPENAI_CHAT, error_payload, read_reply
from envelope_ci.providers.sse import flush_sse, iter_sse_data
from envelope_ci.report.build import scrub
from envelope_ci.sources.cases import load_cases

pytestmark = pytest.mark.usefixtures("clean_env")


def bounded(examples: int) -> settings:
    """A few seconds per property, the same examples on every run, and no example database left in the tree."""
    return settings(max_examples=examples, derandomize=True, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# -- strategies -------------------------------------------------------------------------------------

TEXT = st.text(max_size=40)
SCALARS = st.none() | st.booleans() | st.integers(-(2**64), 2**64) | st.floats(allow_nan=False, allow_infinity=False) | TEXT
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4), max_leaves=10)


def anything_or(value: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly the expected shape, sometimes any JSON: a hostile server's body keeps most of its shape."""
    return st.one_of(value, value, JSON)


CONTENT = st.one_of(TEXT, st.just('{"answer": 42}'), st.just("```json\n{\"a\": 1}\n```"), JSON.map(json.dumps), st.none())
TOOL_CALL = st.fixed_dictionaries({}, optional={
    "id": anything_or(TEXT), "type": anything_or(st.just("function")), "index": anything_or(st.integers(0, 3)),
    "function": anything_or(st.fixed_dictionaries({}, optional={"name": anything_or(TEXT), "arguments": anything_or(JSON.map(json.dumps))})),
})
MESSAGE = st.fixed_dictionaries({}, optional={
    "role": anything_or(st.just("assistant")), "content": anything_or(CONTENT), "refusal": anything_or(TEXT | st.none()),
    "tool_calls": anything_or(st.lists(anything_or(TOOL_CALL), max_size=3)), "function_call": JSON,
})
CHOICE = st.fixed_dictionaries({}, optional={
    "index": anything_or(st.integers(0, 2)), "message": anything_or(MESSAGE), "delta": anything_or(MESSAGE),
    "finish_reason": anything_or(st.sampled_from(["stop", "length", "tool_calls", "content_filter", None])),
})
CHAT_BODY = st.fixed_dictionaries({}, optional={
    "id": anything_or(TEXT), "object": anything_or(st.just("chat.completion")), "model": anything_or(TEXT),
    "choices": anything_or(st.lists(anything_or(CHOICE), max_size=3)), "error": JSON,
    "usage": anything_or(st.fixed_dictionaries({}, optional={"completion_tokens": anything_or(st.integers(-5, 10**6)), "prompt_tokens": JSON})),
})
BODY = st.one_of(CHAT_BODY, CHAT_BODY, JSON, TEXT)
STATUS = st.one_of(st.sampled_from([200, 200, 201, 204, 400, 401, 404, 408, 429, 500, 503]), st.integers(100, 599), st.none())


# -- the grader ----------------------------------------------------------------------------------------

SCHEMA = {"type": "object", "required": ["answer"], "properties": {"answer": {"type": "integer"}}}
CASES = [
    make_case(id="text", expect_fragment="42", must_not_include=["sorry"]),
    make_case(id="schema", schema=SCHEMA),
    make_case(id="expect-json", expect_json={"answer": 42}),
    make_case(id="tool", tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
              **{"assert": [{"type": "tool-call", "value": {"name": "f"}}]}),
]


@bounded(300)
@given(status=STATUS, body=BODY, stream_complete=st.sampled_from([None, True, False]), which=st.sampled_from(CASES))
def test_item_18_the_grader_labels_any_body_and_status(status, body, stream_complete, which):
    got = grade(Envelope(http_status=status, body=body, stream_complete=stream_complete), which)
    assert got.label in set(Label) and len(Label) == 6
    assert all(isinstance(reason, str) for reason in got.reasons)


# -- the fixture loader --------------------------------------------------------------------------------

# Pieces a fixture is made of, and the ones that broke loaders before: aliases, tags, tabs, control
# bytes, deep brackets, huge numbers, NaN, a remote $ref, duplicate keys.
YAML_PIECES = st.sampled_from([
    "- ", "  ", "\n", "\t", "id: a", "id: b", "prompt: p", "completion: ok", "completion: '{}'", "schema: ", "{$ref: '#'}",
    "{$ref: 'http://127.0.0.1:9/x'}", "expect_json: ", "&a ", "*a", "<<: *a", "!!python/object:os.system", "!!binary aGk=",
    "!!set {a}", "[", "]", "{", "}", ": ", ", ", "9" * 4400, "0x" + "f" * 3700, ".nan", ".inf", "1e999", "\x01", "\x00", "\ud7ff",
    "'", '"', "#", "?", "|", ">", "%YAML 1.1\n", "---\n", "...\n", "defaults:", "cases:", "vars: {x: 1}", "stratum: easy", "[" * 120,
])
JSON_PIECES = st.sampled_from([
    "[", "]", "{", "}", ",", ":", '"id"', '"a"', '"prompt"', '"p"', '"completion"', '"ok"', '"schema"', '{"$ref": "#"}', "NaN",
    "Infinity", "-Infinity", "1e999", "9" * 4400, "true", "null", "0", "-", '"\\u00e9"', '"\\ud800"', '"\\x"', "\n", " ", "[" * 120,
    '"defaults"', '"cases"', '"recorded"', '{"http_status": 200, "body": {}}', "\x01",
])
CASE_DICT = st.fixed_dictionaries({"id": st.sampled_from(["a", "b", "a b", ""]) | JSON}, optional={
    "prompt": JSON, "completion": JSON, "schema": JSON, "expect_json": JSON, "vars": JSON, "stratum": JSON, "assert": JSON,
    "recorded": JSON, "messages": JSON, "tags": JSON, "max_tokens": JSON,
})


def documents(pieces: st.SearchStrategy[str]) -> st.SearchStrategy[bytes]:
    """Bytes a fixture file might hold: fragments of the format, valid documents, cut documents, any bytes."""
    valid = st.lists(CASE_DICT, max_size=3).map(lambda cases: json.dumps(cases, indent=1))
    return st.one_of(
        st.lists(pieces, max_size=30).map("".join).map(lambda t: t.encode("utf-8", "surrogatepass")),
        valid.map(str.encode),
        st.tuples(valid, st.integers(0, 400)).map(lambda pair: pair[0][: pair[1]].encode()),
        st.binary(max_size=200),
    )


def load(name: str, data: bytes) -> None:
    """A case list or a UsageError; anything else escaping is the failure."""
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, name).write_bytes(data)
        try:
            cases = load_cases(Path(tmp), set())
        except UsageError as exc:
            assert exc.problems and all(p.file for p in exc.problems)
        else:
            assert all(case.id for case in cases)


@bounded(150)
@given(data=documents(YAML_PIECES))
def test_item_18_the_loader_answers_any_yaml_bytes(data):
    load("c.yaml", data)


@bounded(150)
@given(data=documents(JSON_PIECES))
def test_item_18_the_loader_answers_any_json_bytes(data):
    load("c.json", data)


@bounded(100)
@given(lines=st.lists(documents(JSON_PIECES), max_size=3))
def test_item_18_the_loader_answers_any_jsonl_bytes(lines):
    load("c.jsonl", b"\n".join(data.replace(b"\n", b" ") for data in lines))


# The keywords and references that broke schema loading before: a $schema or $id that is not a URI, remote refs, loops.
SCHEMA_KEYS = st.sampled_from(["$ref", "$id", "id", "$anchor", "$dynamicAnchor", "$dynamicRef", "$recursiveRef", "$defs", "definitions", "allOf",
                               "anyOf", "oneOf", "not", "if", "then", "else", "items", "properties", "$schema", "type", "dependentSchemas", "enum"])
SCHEMA_LEAVES = st.one_of(st.booleans(), st.integers(), st.sampled_from([
    "#", "#/$defs/a", "#/definitions/a", "#a", "a.json", "http://127.0.0.1:9/x", "https://json-schema.org/draft/2020-12/schema", "#/items", "urn:x",
    "", "http://[::1", "http://json-schema.org/draft-04/schema#", "http://json-schema.org/draft-07/schema#", "object", "string"]))
SCHEMA_VALUES = st.recursive(
    st.booleans() | st.dictionaries(SCHEMA_KEYS, SCHEMA_LEAVES, max_size=3),
    lambda inner: st.dictionaries(SCHEMA_KEYS, inner | SCHEMA_LEAVES | st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("ab"), inner, max_size=2), max_size=4),
    max_leaves=12)


@bounded(300)
@given(schema=SCHEMA_VALUES, answer=JSON)
def test_item_18_any_schema_is_a_load_time_problem_or_a_check_that_never_raises(schema, answer):
    if schema_problem(schema) is None:
        assert all(isinstance(error, str) for error in compile_schema(schema)(answer))


# -- SSE framing and the stream assembler -----------------------------------------------------------

SSE_LINES = st.one_of(
    st.binary(max_size=60),
    CHAT_BODY.map(lambda chunk: b"data: " + json.dumps(chunk).encode()),
    st.sampled_from([b"data: [DONE]", b": ping", b"event: x", b"error: {\"message\": \"boom\"}", b"error: not json", b"data:", b"", b"\r"]),
)


@bounded(200)
@given(lines=st.lists(SSE_LINES, max_size=12), cuts=st.lists(st.integers(0, 2000), max_size=6), ends=st.sampled_from([b"\n", b"\r\n"]))
def test_item_18_sse_framing_and_the_stream_assembler_take_any_bytes(lines, cuts, ends):
    stream = ends.join(lines)
    pieces = [stream[a:b] for a, b in zip([0, *sorted(cuts)], [*sorted(cuts), len(stream)], strict=True)]
    buffer, payloads = bytearray(), []
    for piece in pieces:
        payloads += iter_sse_data(buffer, piece, OPENAI_CHAT.sse_fields)
    payloads += flush_sse(buffer)
    assembler = OPENAI_CHAT.new_stream()
    for payload in payloads:
        assert isinstance(payload, str)
        assembler.feed(payload)
    body = assembler.body()
    json.dumps(body)  # the assembled body is recorded as JSON
    read_reply(body)
    assert isinstance(assembler.complete, bool)


@bounded(200)
@given(text=st.text(max_size=80))
def test_item_18_an_error_line_becomes_an_error_payload(text):
    assert "error" in json.loads(error_payload(text))


# -- Markdown: escaped text stays in its cell, and inert -----------------------------------------------

# Text that tries: fences, pipes, HTML, mentions, references, links, emphasis, entities, line breaks.
NASTY = st.sampled_from(["```", "~~~", "|", "\\|", "\\", "<!--", "-->", "<b>", "</td>", "<img src=x>", "@octocat", "@org/team", "#12",
                         "GH-7", "gh-1", "https://x.example", "www.x.example", "[a](b)", "![i](u)", "*", "_", "~", "$", "&amp;", "&#64;",
                         "\n", "\r\n", "\u2028", "\u202e", "\x00", "\ud800", "`", "    ", "\t", "- ", "1. ", "> ", "=", "#", "@"])
CELL_TEXT = st.one_of(st.lists(NASTY | st.text(max_size=4), max_size=12).map("".join), st.text(max_size=60))
ALLOWED_TAGS = {"table", "thead", "tbody", "tr", "th", "td"}
TAG = re.compile(r"<(/?)([a-zA-Z0-9!?-]+)")
# What would link or ping if GitHub saw it unescaped in rendered text (ZWJ is what the escaper inserts).
LIVE_REFERENCE = re.compile(r"@[A-Za-z0-9]|#[0-9]|(?i:\bgh-[0-9])")


def inert(rendered_text: str) -> None:
    """No mention, issue reference or GH- reference survives in what the reader sees."""
    assert not LIVE_REFERENCE.search(html.unescape(rendered_text)), rendered_text


@bounded(150)
@given(rows=st.lists(st.lists(CELL_TEXT, min_size=3, max_size=3), min_size=1, max_size=4))
def test_item_18_tables_stay_rectangular_and_inert_for_any_cell_text(rows):
    markdown = table(["case", "why", "answer"], [[cell(text) for text in row] for row in rows])
    fences_are_ours(markdown)
    out = gfm(markdown)
    assert {tag for _, tag in TAG.findall(out)} <= ALLOWED_TAGS, out
    body = re.findall(r"<tr>(.*?)</tr>", out, re.DOTALL)
    assert len(body) == len(rows) + 1
    assert all(len(re.findall(r"<t[dh]>", row)) == 3 for row in body), out
    inert(re.sub(r"<[^>]+>", "", out))


@bounded(150)
@given(text=CELL_TEXT)
def test_item_18_inline_text_stays_one_plain_list_item(text):
    markdown = f"- {inline(text)}\n"
    fences_are_ours(markdown)
    out = gfm(markdown)
    assert out.startswith("<ul>\n<li>") and out.endswith("</li>\n</ul>\n"), out
    inner = out[len("<ul>\n<li>"): -len("</li>\n</ul>\n")]
    assert "<" not in inner, out  # no element at all: no link, image, emphasis, code span or raw HTML
    inert(inner)


# -- fast paths agree with the general ones -----------------------------------------------------------

SURROGATE_TEXT = st.lists(st.sampled_from(["a", " ", "\u00e9", "\ud800", "\udc00", "\U0001f600", "\ufffd"]), max_size=8).map("".join)
MILLISECONDS = st.none() | st.integers(0, 10**6) | st.floats(0, 1e6, allow_nan=False)


@bounded(400)
@given(label=st.sampled_from(list(Label)), chars=st.none() | st.integers(0, 10**6), tokens=st.none() | st.integers(0, 10**5),
       estimated=st.booleans(), ms=MILLISECONDS)
def test_the_measure_of_one_repeat_is_that_of_three_alike(label, chars, tokens, estimated, ms):
    """One repeat's figures are taken as they are; three alike take the general path (medians and p95 of three equal values)."""
    one = Grade(label, (), None, None, None, 200, chars, tokens, estimated, ms, None, 1)
    fast, general = measure_of([one]), measure_of([one] * 3)
    assert fast == general and [type(v) for v in astuple(fast)] == [type(v) for v in astuple(general)]  # 400 stays 400, not 400.0


@bounded(400)
@given(text=SURROGATE_TEXT | st.lists(SURROGATE_TEXT, max_size=3))
def test_scrub_replaces_exactly_the_lone_surrogates(text):
    """ASCII text is given back as it is; any other has each lone surrogate replaced, and nothing else changed."""
    texts = [text] if isinstance(text, str) else text
    scrubbed = scrub(text)
    assert (list(scrubbed) if not isinstance(text, str) else [scrubbed]) == [LONE_SURROGATE.sub("\ufffd", t) for t in texts]


@bounded(400)
@given(first=JSON, second=JSON)
def test_a_schemas_key_is_its_canonical_json_whatever_it_was_seen_as_before(first, second):
    """The schema caches find a value's canonical text by its marshalled bytes: never another value's (1, 1.0, true, -0.0)."""
    for value in (first, second, [first, first], {"a": second, "b": second}):
        assert is_json._schema_text(value) == canonical_json(value)
