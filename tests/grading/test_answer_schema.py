"""``is-json`` checks answers with jsonschema-rs (issue #23 item 3).

One engine checks a case's schema at load time and gives an answer both its verdict and its
reasons; patterns are ECMA-262; nothing is ever fetched for a ``$ref``; the formats listed in
docs/assertions.md are asserted.
"""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema_rs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envelope_ci.canonical import canonical_json
from envelope_ci.grading.assertions import is_json
from envelope_ci.grading.assertions.base import Answer
from envelope_ci.grading.assertions.is_json import (
    ASSERTED_FORMATS,
    MAX_ANSWER_DEPTH,
    TOO_DEEP,
    compile_schema,
    schema_problem,
)
from tests.support.strategies import JSON as ANY_JSON
from tests.support.suites import case, chat_body, connected, grade, make_suite, recorded, run_cli

pytestmark = pytest.mark.usefixtures("clean_env")

DRAFT4 = "http://json-schema.org/draft-04/schema#"
DRAFT6 = "http://json-schema.org/draft-06/schema#"
DRAFT7 = "http://json-schema.org/draft-07/schema#"
DRAFT2019 = "https://json-schema.org/draft/2019-09/schema"
DRAFT2020 = "https://json-schema.org/draft/2020-12/schema"


def is_json_and_not(schema: Any, answer: Any) -> tuple[list[str], list[str]]:
    """The reasons ``is-json`` and ``not-is-json`` give a JSON answer, through the assertion type itself."""
    check = is_json.ASSERTION.prepare(schema, None)
    parsed = Answer(text="", parsed=answer, has_json=True)  # the text is not read: the parsed answer is
    return list(is_json.ASSERTION.check(parsed, check, None)), list(is_json.ASSERTION.check_not(parsed, check, None))


def nested(depth: int, leaf: Any = 1) -> Any:
    """``depth`` lists, one inside the other, around ``leaf`` (built in Python: json.loads stops near 1000)."""
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


# -- the schema is checked at load time ---------------------------------------------------------


@pytest.mark.parametrize("pattern", ["(unclosed", "a{2,1}", "[z-a]", "a\\Z", "(?>a)", "a{,3}"])
def test_a_pattern_that_cannot_compile_is_a_load_problem(pattern):
    schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": pattern}}}
    where, why = schema_problem(schema) or ("", "")
    assert where == "properties.code.pattern"
    assert why.startswith("invalid JSON Schema: ") and "regex" in why
    in_a_key = schema_problem({"patternProperties": {pattern: {"type": "string"}}})
    assert in_a_key is not None and in_a_key[0].startswith("patternProperties")


def test_a_bad_pattern_stops_the_run_under_not_is_json_too(tmp_path):
    """Never a silent pass: a not-is-json whose schema cannot compile would otherwise pass every answer."""
    schema = {"properties": {"code": {"pattern": "(?>a)"}}}
    suite = make_suite(
        tmp_path, [case("a", completion='{"code": "a"}', **{"assert": [{"type": "not-is-json", "value": schema}]})]
    )
    result = run_cli(["run", suite, "--out", tmp_path / "out"])
    assert result.code == 2, result.err
    assert "cases.yaml:" in result.err and "assert.0.value.properties.code.pattern: invalid JSON Schema" in result.err
    assert "Traceback" not in result.err


@pytest.mark.parametrize(
    "schema, where, says",
    [
        ({"type": "objekt"}, "type", '"objekt" is not valid under any of the schemas'),
        ({"required": "notalist"}, "required", '"notalist" is not of type "array"'),
        ({"properties": {"a": {"minLength": -1}}}, "properties.a.minLength", "-1 is less than the minimum of 0"),
        ({"$schema": True}, "$schema", 'true is not of type "string"'),
        (
            {"$schema": DRAFT2020, "maximum": 5, "exclusiveMaximum": True},
            "exclusiveMaximum",
            'true is not of type "number"',
        ),
    ],
)
def test_a_schema_its_metaschema_rejects_is_a_load_problem_naming_where(schema, where, says):
    problem = schema_problem(schema)
    assert problem is not None and problem[0] == where and problem[1].startswith(f"invalid JSON Schema: {says}")


@pytest.mark.parametrize("ref", ["#/$defs/gone", "#nowhere", "other.json", "other.json#/$defs/a"])
def test_a_ref_to_nothing_in_the_schema_is_a_load_problem_naming_the_ref(ref):
    problem = schema_problem({"$defs": {"a": {"type": "integer"}}, "properties": {"x": {"$ref": ref}}})
    assert problem == (
        "",
        f"invalid JSON Schema: $ref {ref!r} is not inside this schema, and envelope-ci never fetches one "
        "(copy what it names under $defs)",
    )


# -- nothing is ever fetched ----------------------------------------------------------------------




@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The URIs jsonschema-rs asked envelope-ci's retriever for (each refused)."""
    seen: list[str] = []
    refuse = is_json._refuse

    def spy(uri: str) -> Any:
        seen.append(uri)
        return refuse(uri)

    monkeypatch.setattr(is_json, "_refuse", spy)
    return seen


def test_a_remote_ref_is_refused_at_load_and_the_server_never_hears_of_it(listener, asked):
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/order.json"
    schema = {"$comment": "remote", "properties": {"order": {"$ref": url}}}
    assert schema_problem(schema) == (
        "",
        f"invalid JSON Schema: $ref {url!r} is not inside this schema, and envelope-ci "
        "never fetches one (copy what it names under $defs)",
    )
    with pytest.raises(jsonschema_rs.ValidationError, match="never fetches"):
        compile_schema(schema)  # a schema that skipped the load-time check cannot fetch either
    assert asked and set(asked) == {url}  # jsonschema-rs asked the refusing retriever, not its own
    assert not connected(listener)


def test_a_file_ref_is_refused_and_the_file_is_never_read(tmp_path, asked):
    integer = tmp_path / "integer.json"
    integer.write_text('{"type": "integer"}', "utf-8")
    uri = integer.as_uri()
    own = jsonschema_rs.validator_for({"$ref": uri})  # jsonschema-rs's own retriever reads files:
    assert own.is_valid(1) and not own.is_valid("x")  # what is_json must never let it do
    problem = schema_problem({"$ref": uri})
    assert problem is not None and repr(uri) in problem[1] and "never fetches" in problem[1]
    with pytest.raises(jsonschema_rs.ValidationError, match="never fetches"):
        compile_schema({"$ref": uri})  # had it read the file, this would be the integer schema
    assert set(asked) == {uri}


def test_refs_inside_the_schema_and_to_metaschemas_are_followed_offline(listener):
    tree = {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}}
    anchored = {"$defs": {"qty": {"$anchor": "qty", "type": "integer"}}, "properties": {"qty": {"$ref": "#qty"}}}
    embedded = {
        "$id": "https://example.com/order.json",
        "$defs": {"line": {"$id": "line.json", "required": ["sku"]}},
        "items": {"$ref": "line.json"},
    }
    meta = {"$ref": DRAFT2020}
    for schema, right, wrong in [
        (tree, {"kids": [{"kids": []}]}, {"kids": [{"kids": 1}]}),
        (anchored, {"qty": 2}, {"qty": "2"}),
        (embedded, [{"sku": "A-1"}], [{}]),
        (meta, {"type": "string"}, {"type": 5}),
    ]:
        assert schema_problem(schema) is None
        assert compile_schema(schema)(right) == [] and compile_schema(schema)(wrong) != []
    assert not connected(listener)


# -- $ref loops ------------------------------------------------------------------------------------

LOOP = (
    "invalid JSON Schema: its $refs loop back to where they start without reading deeper into the answer: "
    "checking it would never end"
)


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "#"},
        {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"},
        {
            "$defs": {"a": {"not": {"$ref": "#/$defs/a"}}},
            "$ref": "#/$defs/a",
        },  # jsonschema-rs alone calls every answer valid
        {"$dynamicAnchor": "node", "anyOf": [{"$dynamicRef": "#node"}]},
        {"$id": "https://example.com/a.json", "$defs": {"b": {"$id": "b.json", "$ref": "a.json"}}, "$ref": "b.json"},
        {"$schema": DRAFT7, "definitions": {"a": {"$ref": "#"}}, "$ref": "#/definitions/a"},
    ],
)
def test_refs_that_loop_in_place_are_a_load_problem(schema):
    assert schema_problem(schema) == ("", LOOP)


@pytest.mark.parametrize(
    "schema",
    [
        {"properties": {"next": {"$ref": "#"}}},
        {
            "$defs": {"n": {"anyOf": [{"type": "integer"}, {"type": "array", "items": {"$ref": "#/$defs/n"}}]}},
            "$ref": "#/$defs/n",
        },
        {
            "$schema": DRAFT7,
            "$ref": "#/definitions/a",
            "definitions": {"a": {"type": "integer"}},
            "allOf": [{"$ref": "#"}],
        },
        {"$schema": DRAFT6, "if": {"$ref": "#"}},  # if: from draft 7
        {"dependencies": {"a": {"$ref": "#"}}},  # dependencies: up to draft 7
    ],
)
def test_recursion_that_reads_deeper_into_the_answer_is_no_loop(schema):
    """Each step through properties or items reads a part of the answer; a keyword the draft lacks is ignored."""
    assert schema_problem(schema) is None
    compile_schema(schema)([[1, [2]], {"next": {"next": {}}}])


# -- drafts -------------------------------------------------------------------------------------------


def test_the_draft_is_the_one_schema_names():
    draft4 = {"$schema": DRAFT4, "maximum": 5, "exclusiveMaximum": True}  # a boolean: draft 4 only
    assert schema_problem(draft4) is None
    assert compile_schema(draft4)(4) == [] and compile_schema(draft4)(5) != []
    tuples = {"prefixItems": [{"type": "integer"}]}  # 2020-12 only: draft 7 ignores it
    assert compile_schema({"$schema": DRAFT7, **tuples})(["x"]) == []
    for unknown in ("http://example.com/my-schema", "http://json-schema.org/draft-03/schema#"):  # read as 2020-12
        assert schema_problem({"$schema": unknown, **tuples}) is None
        assert compile_schema({"$schema": unknown, **tuples})(["x"]) == ['0: "x" is not of type "integer"']


# -- patterns are ECMA-262, as docs/assertions.md says ---------------------------------------------


def test_an_ecma_digit_is_ascii_so_arabic_indic_digits_fail_where_python_re_would_match():
    arabic_indic = "\u0661\u0662\u0663"  # ١٢٣
    assert re.fullmatch(r"\d+", arabic_indic)
    schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^\\d+$"}}}
    assert compile_schema(schema)({"code": "123"}) == []
    assert compile_schema(schema)({"code": arabic_indic}) == [f'code: "{arabic_indic}" does not match "^\\d+$"']
    got = grade(recorded(chat_body(json.dumps({"code": arabic_indic}, ensure_ascii=False))), schema=schema)
    assert got.label.value == "schema" and got.reasons == (f'schema: code: "{arabic_indic}" does not match "^\\d+$"',)


@pytest.mark.parametrize(
    "pattern, text, ecma",
    [
        ("^\\d+$", "\uff11\uff12", False),  # full-width digits
        ("^\\w+$", "é", False),
        ("^\\w+$", "ß", False),
        ("^\\w+$", "abc_1", True),
        ("^\\s$", "\u00a0", True),
        ("^\\s$", "\u2028", True),
        ("^\\s$", "\ufeff", True),  # Python's \s: no
        ("^\\s$", "\u0085", False),  # Python's \s: yes
        ("^a$", "a\n", False),  # Python's $: also before a final newline
        ("a.c", "a\rc", False),
        ("a.c", "a\u2028c", False),
        ("^\\p{L}$", "é", True),  # Python's re: an error
    ],
)
def test_patterns_differ_from_python_re_as_documented(pattern, text, ecma):
    assert (compile_schema({"pattern": pattern})(text) == []) is ecma


def test_a_pattern_cannot_hang_grading():
    evil = {"pattern": "^(a+)+$"}  # catastrophic for a backtracking engine such as Python's re
    assert compile_schema(evil)("a" * 50_000 + "!") != []
    looking = {"pattern": "^(a|aa)+(?=b)c"}  # look-ahead: backtracking, up to a limit, then a failure
    assert len(compile_schema(looking)("a" * 40 + "!")) == 1


# -- formats ----------------------------------------------------------------------------------------

FORMATS = {  # format: (a valid value, an invalid one): every format jsonschema-rs knows
    "date": ("2024-02-29", "2024-02-30"),
    "date-time": ("2024-02-29T12:00:00Z", "2024-02-29 12:00"),
    "time": ("12:00:00Z", "25:00:00Z"),
    "duration": ("P1D", "1 day"),
    "email": ("a@example.com", "a@@example.com"),
    "idn-email": ("δοκιμή@παράδειγμα.δοκιμή", "no-at-sign"),
    "hostname": ("example.com", "-bad-.com"),
    "idn-hostname": ("bücher.de", "-bad-.com"),
    "ipv4": ("192.168.0.1", "256.0.0.1"),
    "ipv6": ("::1", "1::2::3"),
    "uri": ("https://example.com/a", "relative/path"),
    "uri-reference": ("/relative", "http://[::1"),
    "iri": ("https://bücher.de/ä", "relative"),
    "iri-reference": ("ä/b", "http://[::1"),
    "uri-template": ("https://example.com/{id}", "https://example.com/{id"),
    "json-pointer": ("/a/b", "a/b"),
    "relative-json-pointer": ("0/a", "/a"),
    "regex": ("^a+$", "(?P<name>a)"),  # ECMA-262: Python's named group is not one
    "uuid": ("123e4567-e89b-12d3-a456-426614174000", "123e4567e89b12d3a456426614174000"),
}


@pytest.mark.parametrize("fmt", ASSERTED_FORMATS[jsonschema_rs.Draft202012Validator])
def test_each_asserted_format_rejects_a_bad_value(fmt):
    good, bad = FORMATS[fmt]
    schema = {"type": "object", "properties": {"v": {"type": "string", "format": fmt}}}
    assert compile_schema(schema)({"v": good}) == []
    assert compile_schema(schema)({"v": bad}) == [f'v: {json.dumps(bad, ensure_ascii=False)} is not a "{fmt}"']


@pytest.mark.parametrize("fmt", sorted(set(FORMATS) - set(ASSERTED_FORMATS[jsonschema_rs.Draft202012Validator])))
def test_a_format_not_asserted_before_is_still_an_annotation_only(fmt):
    _, bad = FORMATS[fmt]
    assert compile_schema({"type": "string", "format": fmt})(bad) == []


# What jsonschema's FORMAT_CHECKER asserted before, with what `pip install envelope-ci` brings (idna, not fqdn & co).
ASSERTED_BEFORE = {
    DRAFT4: ["email", "idn-email", "ipv4", "ipv6", "regex"],
    DRAFT6: ["email", "idn-email", "ipv4", "ipv6", "regex"],
    DRAFT7: ["date", "email", "idn-email", "idn-hostname", "ipv4", "ipv6", "regex"],
    DRAFT2019: ["date", "email", "idn-email", "idn-hostname", "ipv4", "ipv6", "regex", "uuid"],
    DRAFT2020: ["date", "email", "idn-email", "idn-hostname", "ipv4", "ipv6", "regex", "uuid"],
}


@pytest.mark.parametrize("draft, fmt", [(d, f) for d, formats in ASSERTED_BEFORE.items() for f in formats])
def test_every_format_asserted_before_still_is(draft, fmt):
    good, bad = FORMATS[fmt]
    check = compile_schema({"$schema": draft, "format": fmt})
    assert check(good) == [] and check(bad) != []


def test_email_is_stricter_than_an_at_sign():
    check = compile_schema({"format": "email"})
    assert [check(v) == [] for v in ("a@b", "@", "a@", "a@@b", "a b@c.com")] == [True, False, False, False, False]


# -- the verdict and the reasons come from one engine and agree -----------------------------------


SCHEMAS = [
    {
        "type": "object",
        "required": ["a"],
        "properties": {"a": {"type": "integer", "minimum": 0}},
        "additionalProperties": {"type": "string", "pattern": "^\\w*$"},
    },
    {
        "type": "array",
        "items": {"anyOf": [{"type": "string", "maxLength": 2}, {"type": "number", "multipleOf": 0.5}]},
        "uniqueItems": True,
    },
    {
        "$defs": {"n": {"anyOf": [{"type": "null"}, {"type": "array", "items": {"$ref": "#/$defs/n"}}]}},
        "$ref": "#/$defs/n",
    },
    {"oneOf": [{"type": "string", "format": "date"}, {"const": [1, 2]}, {"enum": [True, None, 0]}]},
    {"if": {"type": "string"}, "then": {"format": "email"}, "else": {"not": {"type": "object", "minProperties": 1}}},
    True,
    False,
]
TEXT = st.text(max_size=6) | st.sampled_from(["2024-02-29", "a@b.co", "\ud800", "x\udfff", "\u0661", "a"])
SCALARS = (
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False) | TEXT
)
JSON = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3), max_leaves=10
)


@settings(max_examples=400)
@given(schema=st.sampled_from(SCHEMAS), answer=JSON)
def test_the_verdict_and_the_reasons_agree(schema, answer):
    check = compile_schema(schema)
    reasons = check(answer)
    assert check.holds(answer) is (reasons == [])  # a failure always says why; a pass says nothing
    assert all(isinstance(r, str) and r for r in reasons)
    is_reasons, not_reasons = is_json_and_not(schema, answer)
    assert is_reasons == [f"schema: {r}" for r in reasons[: is_json.MAX_SCHEMA_ERRORS]]
    assert (is_reasons == []) is (not_reasons != [])  # exactly one of is-json and not-is-json passes


def test_reasons_are_sorted_by_where_and_at_most_three_are_shown():
    schema = {
        "type": "object",
        "required": ["a", "b"],
        "properties": {"z": {"type": "string"}, "m": {"type": "string"}},
    }
    answer = {"z": 1, "m": 2}
    assert compile_schema(schema)(answer) == [
        '(root): "a" is a required property',
        '(root): "b" is a required property',
        'm: 2 is not of type "string"',
        'z: 1 is not of type "string"',
    ]
    assert is_json_and_not(schema, answer)[0] == [
        'schema: (root): "a" is a required property',
        'schema: (root): "b" is a required property',
        'schema: m: 2 is not of type "string"',
    ]


def test_a_lone_surrogate_in_an_answer_is_graded_as_u_fffd_not_raised():
    lone = json.loads('"\\ud800"')
    assert compile_schema({"type": "string", "maxLength": 1})(lone) == []
    assert compile_schema({"type": "object", "properties": {"a": {"type": "integer"}}})({"a": lone}) == [
        'a: "\ufffd" is not of type "integer"'
    ]


# -- deep answers: graded, never a crash ---------------------------------------------------------------

RECURSIVE = {"anyOf": [{"type": "integer"}, {"type": "array", "items": {"$ref": "#"}}]}


def test_a_deep_answer_is_graded_by_its_verdict():
    check = compile_schema(RECURSIVE)
    assert check(nested(MAX_ANSWER_DEPTH)) == [] and check.holds(nested(MAX_ANSWER_DEPTH)) is True
    fails = check(nested(MAX_ANSWER_DEPTH, "x"))  # jsonschema-rs decides, but past 255 levels cannot say where
    assert len(fails) == 1 and fails[0].startswith("(root): the answer does not satisfy this schema")
    assert is_json_and_not(RECURSIVE, nested(MAX_ANSWER_DEPTH, "x"))[1] == []  # so not-is-json passes it


@pytest.mark.parametrize("depth", [MAX_ANSWER_DEPTH + 1, 100_000])  # 100 000 levels overflow jsonschema-rs's stack
def test_an_answer_too_deep_to_check_fails_either_form_and_never_crashes(depth):
    for schema in (RECURSIVE, {"type": "string"}, {"items": {"$ref": "#"}}):
        assert compile_schema(schema)(nested(depth)) == [TOO_DEEP]
        assert compile_schema(schema).holds(nested(depth)) is None
        assert is_json_and_not(schema, nested(depth)) == ([f"schema: {TOO_DEEP}"], [f"schema: {TOO_DEEP}"])


# -- any schema: a load-time problem or a check that never raises -------------------------------------

# The keywords and references that broke schema loading before: a $schema or $id that is not a URI, remote refs, loops.
SCHEMA_KEYS = st.sampled_from([
    "$ref", "$id", "id", "$anchor", "$dynamicAnchor", "$dynamicRef", "$recursiveRef", "$defs", "definitions", "allOf",
    "anyOf", "oneOf", "not", "if", "then", "else", "items", "properties", "$schema", "type", "dependentSchemas", "enum",
])
SCHEMA_LEAVES = st.one_of(st.booleans(), st.integers(), st.sampled_from([
    "#", "#/$defs/a", "#/definitions/a", "#a", "a.json", "http://127.0.0.1:9/x",
    "https://json-schema.org/draft/2020-12/schema", "#/items", "urn:x", "", "http://[::1",
    "http://json-schema.org/draft-04/schema#", "http://json-schema.org/draft-07/schema#", "object", "string"]))
SCHEMA_VALUES = st.recursive(
    st.booleans() | st.dictionaries(SCHEMA_KEYS, SCHEMA_LEAVES, max_size=3),
    lambda inner: st.dictionaries(SCHEMA_KEYS, inner | SCHEMA_LEAVES | st.lists(inner, max_size=3)
                                  | st.dictionaries(st.sampled_from("ab"), inner, max_size=2), max_size=4),
    max_leaves=12)


@settings(max_examples=300)
@given(schema=SCHEMA_VALUES, answer=ANY_JSON)
def test_any_schema_is_a_load_time_problem_or_a_check_that_never_raises(schema, answer):
    if schema_problem(schema) is None:
        assert all(isinstance(error, str) for error in compile_schema(schema)(answer))


@settings(max_examples=400)
@given(first=ANY_JSON, second=ANY_JSON)
def test_a_schemas_key_is_its_canonical_json_whatever_it_was_seen_as_before(first, second):
    """The schema caches find a value's canonical text by its marshalled bytes: never another value's
    (1, 1.0, true, -0.0)."""
    for value in (first, second, [first, first], {"a": second, "b": second}):
        assert is_json._schema_text(value) == canonical_json(value)
