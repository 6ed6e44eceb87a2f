"""Hostile fixture, settings, pins and recordings files are bounded, clean, located errors; any bytes load or are
refused, never a traceback."""
from __future__ import annotations

import json
import socket
import tempfile
import time
import tracemalloc
from pathlib import Path

import jsonschema_rs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envelope_ci.errors import UsageError
from envelope_ci.grading.assertions.is_json import compile_schema
from envelope_ci.grading.grade import grade
from envelope_ci.sources.cases import load_cases
from envelope_ci.sources.parse import MAX_ALIAS_BYTES, MAX_DEPTH, parse_json, parse_jsonl
from envelope_ci.sources.recordings import envelope_from_raw
from tests.support.strategies import JSON
from tests.support.suites import case, chat_body, connected, make_case, make_suite, recorded, run_cli

pytestmark = pytest.mark.usefixtures("clean_env")

OK = "- id: a\n  prompt: p\n  completion: ok\n"


def bad_input(tmp_path: Path, files: dict[str, str], where: str, *args: str | Path) -> str:
    """Run the suite: exit 2, naming ``where`` (file:line), never an internal error. The error text."""
    suite = make_suite(tmp_path, files=files)
    result = run_cli(["run", suite, "--out", tmp_path / "out", *args])
    assert result.code == 2, result.err
    assert "internal error" not in result.err and "Traceback" not in result.err
    assert where in result.err, result.err
    return result.err


# -- item 3: YAML aliases are bounded by what they expand to ---------------------------------------

def alias_bomb(text_kb: int = 97) -> str:
    """About 100 KB with 40 aliases that expand to about 1 GB: ten copies of ten copies... of one long string."""
    return "\n".join([
        "- id: a", "  prompt: p", "  recorded:", "    http_status: 200", "    body:",
        f"      s: &s \"{'x' * text_kb * 1000}\"",
        "      l1: &l1 [" + ", ".join(["*s"] * 10) + "]",
        "      l2: &l2 [" + ", ".join(["*l1"] * 10) + "]",
        "      l3: &l3 [" + ", ".join(["*l2"] * 10) + "]",
        "      l4: [" + ", ".join(["*l3"] * 10) + "]",
    ]) + "\n"


def test_an_alias_bomb_is_refused_by_size_before_it_is_built(tmp_path):
    """Before: 47 s and 2.2 GB peak (the expansion was hashed); after: refused on the alias that passes the budget."""
    text = alias_bomb()
    assert len(text) < 100_000 and text.count("*") == 40
    suite = make_suite(tmp_path, files={"c.yaml": text})
    tracemalloc.start()
    start = time.perf_counter()
    with pytest.raises(UsageError) as info:
        load_cases(suite, set())
    elapsed = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    (problem,) = info.value.problems
    assert (problem.file, problem.line) == ((suite / "c.yaml").as_posix(), 9)  # the first *l2 list: 10 x 1 MB is past 16 MiB
    assert "alias bomb" in problem.message and f"{MAX_ALIAS_BYTES // 2**20} MiB" in problem.message
    assert elapsed < 5 and peak < 50 * 2**20


def test_the_cli_names_the_file_and_line(tmp_path):
    err = bad_input(tmp_path, {"c.yaml": alias_bomb()}, "c.yaml:9")
    assert "alias bomb" in err


def test_aliases_within_the_budget_load_expanded(tmp_path):
    """A long system prompt shared by 50 cases through one anchor is ordinary use (1 MB expanded)."""
    prompt = "Be brief. " * 2000
    text = "".join(f"- id: c{i}\n  system: {'&s ' + json.dumps(prompt) if i == 0 else '*s'}\n  prompt: p\n  completion: ok\n" for i in range(50))
    cases = load_cases(make_suite(tmp_path, files={"c.yaml": text}), set())
    assert len(cases) == 50 and all(c.messages[0]["content"] == prompt for c in cases)


def test_an_alias_inside_what_it_names_is_refused(tmp_path):
    """A value that contains itself: before, refused only after walking 200,000 nodes of it; now on its line."""
    err = bad_input(tmp_path, {"c.yaml": "- &a\n  id: a\n  prompt: p\n  completion: ok\n  vars: {x: *a}\n"}, "c.yaml:5")
    assert "contains itself" in err


# -- item 4: one pass over a .json file for every case's line --------------------------------------

def test_json_line_lookup_is_linear(tmp_path):
    """40,000 cases in one .json file: before, 239 s in parse_json (a rescan per case); now as fast as .jsonl."""
    cases = [{"id": f"case-{i:05d}", "prompt": f"say {i}", "completion": "ok"} for i in range(40_000)]
    as_json, as_jsonl = json.dumps(cases, indent=2), "".join(json.dumps(c) + "\n" for c in cases)
    start = time.perf_counter()
    raws = parse_json(as_json, "c.json")
    json_s = time.perf_counter() - start
    start = time.perf_counter()
    parse_jsonl(as_jsonl, "c.jsonl")
    jsonl_s = time.perf_counter() - start
    assert [r.line for r in raws[:2]] == [3, 8] and raws[-1].line == 3 + 5 * 39_999
    assert json_s < 3 * jsonl_s + 1, (json_s, jsonl_s)


def test_a_duplicate_id_is_reported_on_its_own_line(tmp_path):
    text = '[\n {"id": "a", "prompt": "p", "completion": "ok"},\n {"id": "\\u00e9", "prompt": "say \\"id\\": \\"a\\"", "completion": "ok"},\n {"id": "a", "prompt": "p", "completion": "ok"}\n]\n'
    raws = parse_json(text, "c.json")
    assert [r.line for r in raws] == [2, 3, 4]  # an escaped id is found too; an "id" inside a string is not a key
    err = bad_input(tmp_path, {"c.json": text}, "c.json:4")
    assert "duplicate id 'a'" in err and "c.json:2" in err


# -- item 12: what ended as "internal error" is exit 2 naming the file and line ---------------------

def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


HOSTILE = {
    "yaml-control-byte": ({"c.yaml": "- id: a\n  prompt: \x01p\n  completion: ok\n"}, "c.yaml:2", "U+0001"),
    "yaml-deep": ({"c.yaml": OK + f"  vars: {{x: {nested(2000)}}}\n"}, "c.yaml:4", f"deeper than {MAX_DEPTH}"),
    "json-deep": ({"c.json": '[{"id": "a",\n "prompt": "p", "completion": "ok", "vars": {"x": ' + nested(1000) + "}}]"}, "c.json:2", f"deeper than {MAX_DEPTH}"),
    "jsonl-deep": ({"c.jsonl": '{"id": "b", "prompt": "p", "completion": "ok"}\n{"id": "a", "vars": {"x": ' + nested(1000) + "}}\n"}, "c.jsonl:2", "deeper"),
    "json-huge-int": ({"c.json": '[{"id": "a", "prompt": "p",\n "completion": "ok", "max_tokens": ' + "9" * 5000 + "}]"}, "c.json:2", "4300 digits"),
    "jsonl-huge-int": ({"c.jsonl": '{"id": "a", "prompt": "p", "completion": "ok", "max_tokens": ' + "9" * 5000 + "}\n"}, "c.jsonl:1", "4300 digits"),
    "yaml-huge-int": ({"c.yaml": OK + "  max_tokens: " + "9" * 5000 + "\n"}, "c.yaml:4", "4300 digits"),
    "yaml-huge-hex-int": ({"c.yaml": OK + "  max_tokens: 0x" + "f" * 4000 + "\n"}, "c.yaml:4", "4300 digits"),
    "json-overflowing-float": ({"c.json": '[{"id": "a", "prompt": "p",\n "completion": "ok", "temperature": 1e999}]'}, "c.json:2", "1e999 is not a JSON number"),
    "schema-ref-loop": ({"c.yaml": "- id: a\n  prompt: p\n  completion: '{}'\n  schema: {$ref: '#'}\n"}, "c.yaml:4", "loop"),
    "schema-ref-mutual-loop": ({"c.yaml": "- id: a\n  prompt: p\n  completion: '{}'\n  schema:\n    $defs: {a: {$ref: '#/$defs/b'}, b: {allOf: [{$ref: '#/$defs/a'}]}}\n"
                                          "    $ref: '#/$defs/a'\n"}, "c.yaml:4", "loop"),
    "schema-ref-nowhere": ({"c.yaml": "- id: a\n  prompt: p\n  completion: '{}'\n  schema: {$ref: '#/$defs/gone'}\n"}, "c.yaml:4", "not inside this schema"),
    "schema-$schema-not-text": ({"c.yaml": "- id: a\n  prompt: p\n  completion: '{}'\n  schema: {$schema: true}\n"},
                                "c.yaml:4", 'not of type "string"'),
    "schema-$id-not-a-uri": ({"c.yaml": "- id: a\n  prompt: p\n  completion: '{}'\n  schema: {$id: 'http://[::1'}\n"},
                             "c.yaml:4", "Invalid URI reference 'http://[::1'"),
    "config-control-byte": ({"c.yaml": OK, "envelope-ci.yaml": "size_slack: 2\nthin_below: \x01\n"}, "envelope-ci.yaml:2", "U+0001"),
    "config-deep": ({"c.yaml": OK, "envelope-ci.yaml": f"headers: {nested(2000)}\n"}, "envelope-ci.yaml:1", "deeper"),
    "config-infinity": ({"c.yaml": OK, "envelope-ci.yaml": "size_slack: .inf\n"}, "envelope-ci.yaml:1", "not a JSON number"),
    "config-header-key-not-text": ({"c.yaml": OK, "envelope-ci.yaml": "size_slack: 2\nheaders:\n  1: x\n"}, "envelope-ci.yaml:2", "not text"),
}


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_fixtures_and_settings_are_located_bad_input(tmp_path, name):
    files, where, why = HOSTILE[name]
    assert why in bad_input(tmp_path, files, where)


def pins_text(ms: str) -> str:
    return ('{"format":"envelope-ci/pins","version":1,"fixtures_hash":"x","fingerprint":null,"files":{},"cases":{\n'
            f'"a":{{"hash":"h","label":"right","channel":"correctness","ms":{ms}}}\n}}}}\n')


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_pins_with_nan_or_infinity_are_located_bad_input(tmp_path, value):
    """Before: "internal error: Out of range float values are not JSON compliant" when the run wrote its reports."""
    err = bad_input(tmp_path, {"c.yaml": OK, "envelope-pins.json": pins_text(value)}, "envelope-pins.json:2")
    assert "not" in err and "JSON" in err


@pytest.mark.parametrize("line", [
    '{"id": "a", "recorded": {"http_status": 200, "body": {"x": ' + nested(1000) + "}}}",
    '{"id": "a", "recorded": {"http_status": 200, "elapsed_ms": 1' + "0" * 5000 + ', "body": {}}}',
    '{"id": "a", "recorded": {"http_status": 200, "elapsed_ms": 1e999, "body": {}}}',
], ids=["deep", "huge-integer", "overflowing-float"])
def test_hostile_recordings_are_located_bad_input(tmp_path, line):
    replay = tmp_path / "r.jsonl"
    replay.write_text('{"id": "a", "recorded": {"http_status": 200, "body": {}}}\n' + line + "\n", "utf-8")
    bad_input(tmp_path, {"c.yaml": OK}, f"{replay.as_posix()}:2", "--replay", replay)


def test_a_hostile_sidecar_is_located_bad_input(tmp_path):
    sidecar = '{"id": "a", "recorded": {"http_status": 200, "body": ' + nested(500) + "}}\n"
    bad_input(tmp_path, {"c.yaml": "- id: a\n  prompt: p\n", "c.yaml.recorded.jsonl": sidecar}, "c.yaml.recorded.jsonl:1")


def url_of(server: socket.socket) -> str:
    return f"http://127.0.0.1:{server.getsockname()[1]}/schema.json"




def test_a_remote_ref_is_bad_input_and_never_fetched(tmp_path, listener):
    url = url_of(listener)
    err = bad_input(tmp_path, {"c.yaml": f"- id: a\n  prompt: p\n  completion: '{{}}'\n  schema: {{$ref: '{url}'}}\n"}, "c.yaml:4")
    assert "never fetches" in err and url in err
    assert not connected(listener)


def test_no_validator_fetches_at_grading_time_either(listener):
    """A schema that reached grading without the load-time check still cannot make a request."""
    url = url_of(listener)
    with pytest.raises(jsonschema_rs.ValidationError, match="never fetches"):
        compile_schema({"$ref": url})({})
    assert not connected(listener)


def test_refs_inside_the_schema_and_to_metaschemas_still_work():
    tree = {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}}
    either = {"$defs": {"n": {"anyOf": [{"type": "integer"}, {"type": "array", "items": {"$ref": "#/$defs/n"}}]}}, "$ref": "#/$defs/n"}
    meta = {"$ref": "https://json-schema.org/draft/2020-12/schema"}
    checks = [(tree, {"kids": [{"kids": []}]}, {"kids": [{"kids": 1}]}), (either, [1, [2, [3]]], [1, ["2"]]), (meta, {"type": "string"}, {"type": 5})]
    for schema, right, wrong in checks:
        for answer, label in ((right, "right"), (wrong, "schema")):
            assert grade(envelope_from_raw(recorded(chat_body(json.dumps(answer)))), make_case(schema=schema)).label.value == label


def test_a_deep_answer_under_a_recursive_schema_is_graded_not_raised():
    schema = {"anyOf": [{"type": "integer"}, {"type": "array", "items": {"$ref": "#"}}]}
    satisfies = chat_body(nested(900)[:900] + "1" + nested(900)[900:])
    fails = chat_body(nested(900)[:900] + '"x"' + nested(900)[900:])
    assert grade(envelope_from_raw(recorded(satisfies)), make_case(schema=schema)).label.value == "right"
    got = grade(envelope_from_raw(recorded(fails)), make_case(schema=schema))
    assert got.label.value == "schema" and len(got.reasons) == 1 and "does not satisfy this schema" in got.reasons[0]
    negated = make_case(**{"assert": [{"type": "not-is-json", "value": schema}]})
    assert grade(envelope_from_raw(recorded(fails)), negated).label.value == "right"
    got = grade(envelope_from_raw(recorded(satisfies)), negated)
    assert got.label.value == "schema" and got.reasons == ("schema: the answer satisfies a schema it must not",)


@pytest.mark.parametrize("extra, loads", [(0, True), (1, False)])
def test_nesting_up_to_the_limit_loads(tmp_path, extra, loads):
    lists = MAX_DEPTH - 4 + extra  # the file's list, the case, recorded and its body are four levels
    text = json.dumps([case("a", recorded=recorded({"x": json.loads(nested(lists))}))])
    suite = make_suite(tmp_path, files={"c.json": text})
    if loads:
        assert load_cases(suite, set())[0].id == "a"
    else:
        bad_input(tmp_path, {}, "c.json:1")


# -- any bytes: a case list or a located UsageError, never a traceback --------------------------------

# Pieces a fixture is made of, and the ones that broke loaders before: aliases, tags, tabs, control
# bytes, deep brackets, huge numbers, NaN, a remote $ref, duplicate keys.
YAML_PIECES = st.sampled_from([
    "- ", "  ", "\n", "\t", "id: a", "id: b", "prompt: p", "completion: ok", "completion: '{}'", "schema: ",
    "{$ref: '#'}", "{$ref: 'http://127.0.0.1:9/x'}", "expect_json: ", "&a ", "*a", "<<: *a",
    "!!python/object:os.system", "!!binary aGk=", "!!set {a}", "[", "]", "{", "}", ": ", ", ", "9" * 4400,
    "0x" + "f" * 3700, ".nan", ".inf", "1e999", "\x01", "\x00", "\ud7ff", "'", '"', "#", "?", "|", ">",
    "%YAML 1.1\n", "---\n", "...\n", "defaults:", "cases:", "vars: {x: 1}", "stratum: easy", "[" * 120,
])
JSON_PIECES = st.sampled_from([
    "[", "]", "{", "}", ",", ":", '"id"', '"a"', '"prompt"', '"p"', '"completion"', '"ok"', '"schema"',
    '{"$ref": "#"}', "NaN", "Infinity", "-Infinity", "1e999", "9" * 4400, "true", "null", "0", "-", '"\\u00e9"',
    '"\\ud800"', '"\\x"', "\n", " ", "[" * 120, '"defaults"', '"cases"', '"recorded"',
    '{"http_status": 200, "body": {}}', "\x01",
])
CASE_DICT = st.fixed_dictionaries({"id": st.sampled_from(["a", "b", "a b", ""]) | JSON}, optional={
    "prompt": JSON, "completion": JSON, "schema": JSON, "expect_json": JSON, "vars": JSON, "stratum": JSON,
    "assert": JSON, "recorded": JSON, "messages": JSON, "tags": JSON, "max_tokens": JSON,
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


@settings(max_examples=150)
@given(data=documents(YAML_PIECES))
def test_the_loader_answers_any_yaml_bytes(data):
    load("c.yaml", data)


@settings(max_examples=150)
@given(data=documents(JSON_PIECES))
def test_the_loader_answers_any_json_bytes(data):
    load("c.json", data)


@settings(max_examples=100)
@given(lines=st.lists(documents(JSON_PIECES), max_size=3))
def test_the_loader_answers_any_jsonl_bytes(lines):
    load("c.jsonl", b"\n".join(data.replace(b"\n", b" ") for data in lines))
