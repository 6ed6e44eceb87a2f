"""Fixtures: loading every format, validation problems located by file/line/field, recordings."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from envelope_ci.errors import Problem, UsageError
from envelope_ci.grading.envelope import classify
from envelope_ci.grading.grade import grade
from envelope_ci.model import Envelope, Label
from envelope_ci.sources.cases import build_case, case_schema, checked, load_cases, raw_cases
from envelope_ci.sources.files import fixture_digests, hash_of_digests
from envelope_ci.sources.parse import MAX_YAML_ALIASES, RawCase
from envelope_ci.sources.recordings import Replay, envelope_from_raw, offline_envelopes, read_replay
from tests.support.suites import (
    EXAMPLES,
    case,
    chat_body,
    make_case,
    make_suite,
    recorded,
    transport_error,
    write_replay,
)

pytestmark = pytest.mark.usefixtures("clean_env")


def fixtures_hash(root, exclude):
    """The hash over the fixtures directory's own files."""
    return hash_of_digests(fixture_digests(root, exclude))


def problems_of(root: Path, exclude: set[Path] | None = None) -> list[Problem]:
    with pytest.raises(UsageError) as info:
        load_cases(root, exclude or set())
    return info.value.problems


def only_problem(root: Path) -> Problem:
    found = problems_of(root)
    assert len(found) == 1, [str(p) for p in found]
    return found[0]


# -- loading ---------------------------------------------------------------------------------

def test_every_format_recursively(tmp_path):
    root = make_suite(tmp_path, files={
        "a.yaml": "- id: y1\n  prompt: p\n  completion: ok\n- id: y2\n  prompt: p\n  completion: ok\n",
        "sub/b.yml": "cases:\n  - id: yml1\n    prompt: p\n    completion: ok\n",
        "sub/deeper/c.json": json.dumps([{"id": "j1", "prompt": "p", "completion": "ok"}, {"id": "j2", "prompt": "p", "completion": "ok"}], indent=2),
        "d.json": json.dumps({"id": "single", "prompt": "p", "completion": "ok"}),
        "e.jsonl": '{"id": "l1", "prompt": "p", "completion": "ok"}\n\n{"id": "l2", "prompt": "p", "completion": "ok"}\n',
        "empty.yaml": "# nothing here yet\n",
        "README.md": "# not a case\n",
        "envelope-ci.yaml": "easy_floor: 1.0\n",
        "envelope-pins.json": '{"format": "envelope-ci/pins"}',
        ".hidden/x.yaml": "not: [valid",
    })
    cases = load_cases(root, {(root / "envelope-pins.json").resolve()})
    assert sorted(c.id for c in cases) == ["j1", "j2", "l1", "l2", "single", "y1", "y2", "yml1"]
    by_id = {c.id: c for c in cases}
    assert by_id["y2"].line == 4 and by_id["l2"].line == 3 and by_id["j2"].line == 8
    assert by_id["yml1"].file.endswith("sub/b.yml")


def test_case_fields_are_built(tmp_path):
    root = make_suite(tmp_path, [
        {"id": "p", "stratum": "easy", "system": "Be brief.", "prompt": "hi", "completion": "hello", "must_include": ["HELLO"],
         "must_not_include": ["sorry"], "expect_fragment": "hel", "max_chars": 40, "timeout_s": 5, "max_tokens": 64, "temperature": 0.2, "tags": ["x"]},
        {"id": "m", "messages": [{"role": "user", "content": "hi"}], "recorded": [recorded(chat_body("a")), transport_error()], "expect_json": None},
    ])
    p, m = load_cases(root, set())
    assert p.messages == ({"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"})
    assert (p.stratum, p.completion, p.max_chars, p.timeout_s) == ("easy", "hello", 40, 5)
    assert [(e.name, e.value) for e in p.expectations] == [("contains", "hel"), ("icontains-all", ["HELLO"]), ("not-icontains-any", ["sorry"]), ("max-chars", 40)]
    assert p.request == {"max_tokens": 64, "temperature": 0.2}
    assert p.recorded is None and not p.wants_json
    assert m.messages == ({"role": "user", "content": "hi"},) and m.stratum is None
    assert len(m.recorded) == 2 and m.wants_json and [(e.name, e.value) for e in m.expectations] == [("json-subset", None)]
    assert p.digest.startswith("sha256:") and p.digest != m.digest


def test_yaml_anchors_in_moderation_are_fine(tmp_path):
    text = "- id: a\n  system: &sys Be brief.\n  prompt: p\n  completion: ok\n- id: b\n  system: *sys\n  prompt: p\n  completion: ok\n"
    cases = load_cases(make_suite(tmp_path, files={"c.yaml": text}), set())
    assert cases[1].messages[0]["content"] == "Be brief."


def test_case_schema_is_published():
    schema = case_schema()
    assert schema["additionalProperties"] is False
    assert {"id", "stratum", "prompt", "messages", "expect_fragment", "must_include", "must_not_include", "expect_json", "schema",
            "max_chars", "timeout_s", "completion", "recorded"} <= set(schema["properties"])


# -- problems: file, line, field, one per problem --------------------------------------------

def test_malformed_yaml_names_the_line(tmp_path):
    p = only_problem(make_suite(tmp_path, files={"c.yaml": "- id: x\n  prompt: p\n  completion: ok\n- id: y\n  prompt: [unclosed\n  completion: z\n"}))
    assert p.file.endswith("c.yaml") and p.line in (5, 6) and "malformed YAML" in p.message


def test_malformed_json_names_the_line(tmp_path):
    p = only_problem(make_suite(tmp_path, files={"c.json": '[\n  {"id": "x", "prompt": "p",\n   "completion": }\n]\n'}))
    assert (p.line, p.field) == (3, None) and "malformed JSON" in p.message


def test_malformed_jsonl_names_every_bad_line(tmp_path):
    text = '{"id": "a", "prompt": "p", "completion": "ok"}\n{"id": "b", bad}\n{"id": "c", "prompt": "p", "completion": "ok"}\n{oops\n'
    found = problems_of(make_suite(tmp_path, files={"c.jsonl": text}))
    assert [(p.line, "malformed JSON" in p.message) for p in found] == [(2, True), (4, True)]


def test_unknown_key_on_its_line_with_did_you_mean(tmp_path):
    text = "- id: x\n  prompt: p\n  completion: ok\n  expect_fragmnt: ok\n  musst_include: [a]\n  zzz: 1\n"
    found = problems_of(make_suite(tmp_path, files={"c.yaml": text}))
    assert [(p.line, p.field) for p in found] == [(4, "expect_fragmnt"), (5, "musst_include"), (6, "zzz")]
    assert "did you mean 'expect_fragment'?" in found[0].message
    assert "did you mean 'must_include'?" in found[1].message
    assert "did you mean" not in found[2].message
    assert str(found[0]).endswith("c.yaml:4: expect_fragmnt: unknown key (did you mean 'expect_fragment'?)")


def test_unknown_key_inside_a_recorded_envelope(tmp_path):
    text = "- id: x\n  prompt: p\n  recorded:\n    http_status: 200\n    elapsd_ms: 3\n"
    p = only_problem(make_suite(tmp_path, files={"c.yaml": text}))
    assert (p.line, p.field) == (3, "recorded.elapsd_ms")
    assert "did you mean 'elapsed_ms'?" in p.message


@pytest.mark.parametrize(
    "extra,line,field,needle",
    [
        ("  max_chars: ten\n", 4, "max_chars", "is not of type 'integer'"),
        ("  must_include: Northwind\n", 4, "must_include", "is not of type 'array'"),
        ("  must_include: [1]\n", 4, "must_include.0", "is not of type 'string'"),
        ("  stratum: hard\n", 4, "stratum", "is not one of ['easy', 'medium', 'stretch']"),
        ("  timeout_s: 0\n", 4, "timeout_s", "less than or equal to the minimum of 0"),
        ("  schema: {type: objekt}\n", 4, "schema.type", "invalid JSON Schema"),
        ("  schema: {required: notalist}\n", 4, "schema.required", "invalid JSON Schema"),
    ],
)
def test_wrong_types_and_values(tmp_path, extra, line, field, needle):
    p = only_problem(make_suite(tmp_path, files={"c.yaml": "- id: x\n  prompt: p\n  completion: ok\n" + extra}))
    assert (p.line, p.field) == (line, field)
    assert needle in p.message


def test_recorded_envelope_wrong_type_points_inside(tmp_path):
    text = "- id: x\n  prompt: p\n  recorded:\n    http_status: '200'\n"
    p = only_problem(make_suite(tmp_path, files={"c.yaml": text}))
    assert (p.line, p.field) == (3, "recorded.http_status")
    assert "is not of type 'integer', 'null'" in p.message


def test_no_prompt_nor_messages(tmp_path):
    p = only_problem(make_suite(tmp_path, files={"c.yaml": "- id: x\n  prompt: p\n  completion: ok\n- id: y\n  completion: ok\n"}))
    assert (p.line, p.field, p.message) == (4, None, "a case needs a 'prompt' or 'messages'")


def test_completion_and_recorded_both(tmp_path):
    p = only_problem(make_suite(tmp_path, [{"id": "x", "prompt": "p", "completion": "ok", "recorded": recorded(chat_body("ok"))}]))
    assert p.message == "give either 'completion' or 'recorded', not both" and p.line == 1


def test_case_not_a_mapping_and_file_not_cases(tmp_path):
    found = problems_of(make_suite(tmp_path, files={"a.yaml": "- just a string\n", "b.yaml": "42\n"}))
    assert [p.file.rsplit("/", 1)[-1] for p in found] == ["a.yaml", "b.yaml"]
    assert "a case must be a mapping" in found[0].message
    assert "expected a case, a list of cases" in found[1].message


def test_duplicate_ids_across_files_name_both_locations(tmp_path):
    root = make_suite(tmp_path, files={
        "a.yaml": "- id: first\n  prompt: p\n  completion: ok\n- id: dup\n  prompt: p\n  completion: ok\n",
        "b.json": '[\n  {"id": "other", "prompt": "p", "completion": "ok"},\n  {"id": "dup", "prompt": "p", "completion": "ok"}\n]\n',
    })
    p = only_problem(root)
    assert p.file.endswith("b.json") and p.line == 3 and p.field == "id"
    assert "duplicate id 'dup'" in p.message and "a.yaml:4" in p.message


def test_non_utf8_file(tmp_path):
    p = only_problem(make_suite(tmp_path, files={"c.yaml": b"- id: x\n  prompt: p\n  completion: caf\xe9\n"}))
    assert p.line == 3 and "not UTF-8" in p.message and "0xe9" in p.message


def test_utf8_bom_is_fine(tmp_path):
    cases = load_cases(make_suite(tmp_path, files={"c.yaml": "\ufeff- id: x\n  prompt: p\n  completion: ok\n".encode("utf-8")}), set())
    assert cases[0].id == "x"


def test_lone_surrogate_is_a_problem_not_a_traceback(tmp_path):
    p = only_problem(make_suite(tmp_path, files={"c.jsonl": '{"id": "x", "prompt": "p", "completion": "ok \\ud800"}\n'}))
    assert (p.line, p.field) == (1, "completion") and "surrogate" in p.message


def test_empty_and_missing_directory(tmp_path):
    empty = make_suite(tmp_path, files={"notes.txt": "nothing"})
    p = only_problem(empty)
    assert "no cases found" in p.message
    with pytest.raises(UsageError) as info:
        load_cases(tmp_path / "missing", set())
    assert "not a directory" in str(info.value)


def test_python_tags_are_refused(tmp_path):
    p = only_problem(make_suite(tmp_path, files={"c.yaml": "- !!python/object/apply:os.system ['echo pwned']\n"}))
    assert p.line == 1 and "malformed YAML" in p.message and "constructor" in p.message


BILLION_LAUGHS = "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9) if prev else ', '.join(['lol'] * 9)}]\n"
    for prev, name in zip([None, "a", "b", "c", "d", "e", "f", "g", "h"], "abcdefghi", strict=False)
)


def test_alias_bomb_is_refused_quickly(tmp_path):
    assert BILLION_LAUGHS.count("*") < MAX_YAML_ALIASES  # the expansion check, not the alias count, catches it
    start = time.perf_counter()
    p = only_problem(make_suite(tmp_path, files={"c.yaml": BILLION_LAUGHS}))
    assert time.perf_counter() - start < 2.0
    assert "alias bomb" in p.message


def test_many_aliases_are_refused(tmp_path):
    text = "x: &x 1\nl: [" + ", ".join(["*x"] * (MAX_YAML_ALIASES + 1)) + "]\n"
    p = only_problem(make_suite(tmp_path, files={"c.yaml": text}))
    assert "alias" in p.message


def test_all_problems_reported_together(tmp_path):
    root = make_suite(tmp_path, files={"a.yaml": "- id: x\n  prompt: p\n  stratum: hard\n  completion: ok\n", "b.json": "{", "c.jsonl": "{}\n"})
    found = problems_of(root)
    assert [p.file.rsplit("/", 1)[-1] for p in found] == ["a.yaml", "b.json", "c.jsonl", "c.jsonl"]


# -- offline envelopes and recordings --------------------------------------------------------

def test_offline_envelopes_sources(tmp_path):
    root = make_suite(tmp_path, [
        {"id": "c", "prompt": "p", "completion": "text"},
        {"id": "r", "prompt": "p", "recorded": recorded(chat_body("one"))},
        {"id": "l", "prompt": "p", "recorded": [recorded(chat_body("one")), recorded(chat_body("two"))]},
    ])
    cases = load_cases(root, set())
    envs = offline_envelopes(cases, None)
    assert envs["c"] == [Envelope(completion="text")]
    assert envs["r"][0].body["choices"][0]["message"]["content"] == "one" and envs["r"][0].http_status == 200
    assert len(envs["l"]) == 2
    replayed = [envelope_from_raw(recorded(chat_body("replayed")))]
    given = offline_envelopes(cases, Replay({"c": list(replayed)}, {"c": [None]}))
    assert given["c"] == replayed
    with pytest.raises(KeyError):  # a replay gives each case's envelopes once, to grading, and lets them go
        given["c"]


def test_offline_envelopes_a_replay_of_every_case_and_a_replay_of_some(tmp_path):
    """The replay wins over a fixture's own recording; requests and the replayed count are the same either way round."""
    root = make_suite(tmp_path, [
        {"id": "a", "prompt": "p", "recorded": recorded(chat_body("fixture"))},
        {"id": "b", "prompt": "p", "completion": "hand-written"},
    ])
    cases = load_cases(root, set())
    line = [envelope_from_raw(recorded(chat_body("replayed")))]
    asked = {"digest": "sha256:x", "parts": {}}
    some = offline_envelopes(cases, Replay({"a": line}, {"a": [asked]}))
    assert (some.replayed, list(some), len(some)) == (1, ["a", "b"], 2)
    assert some["a"][0].body["choices"][0]["message"]["content"] == "replayed"
    assert some["b"] == [Envelope(completion="hand-written")]
    assert dict(some.requests) == {"a": [asked], "b": []}
    every = offline_envelopes(cases, Replay({"a": line, "b": line}, {"a": [asked], "b": [None, None]}))
    assert (every.replayed, list(every)) == (2, ["a", "b"])
    assert every["b"][0].body["choices"][0]["message"]["content"] == "replayed"
    assert dict(every.requests) == {"a": [asked], "b": [None, None]}
    # A replay that also holds cases a --filter left out: only the selected cases' requests.
    wider = offline_envelopes(cases[:1], Replay({"a": line, "b": line}, {"a": [asked], "b": [None]}))
    assert (wider.replayed, dict(wider.requests)) == (1, {"a": [asked]})
    with pytest.raises(KeyError):
        wider["no-such-case"]


def test_read_replay_keeps_each_cases_lines_in_file_order(tmp_path):
    path = tmp_path / "replay.jsonl"
    lines = [{"id": "a", "recorded": recorded(chat_body(f"answer {i}"))} for i in range(3)]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    replay = read_replay(path, {"a"})
    assert [classify(e).reply.content for e in replay.envelopes["a"]] == ["answer 0", "answer 1", "answer 2"]
    assert replay.requests["a"] == [None, None, None]


def test_case_with_nothing_to_grade_offline(tmp_path):
    cases = load_cases(make_suite(tmp_path, [{"id": "live-only", "prompt": "p", "must_include": ["x"]}]), set())
    with pytest.raises(UsageError) as info:
        offline_envelopes(cases, None)
    (p,) = info.value.problems
    assert (p.line, p.field) == (1, "completion") and "live-only" in p.message


def load_recordings(path, case_ids):
    return read_replay(path, case_ids)


def test_load_recordings(tmp_path):
    path = write_replay(tmp_path / "rec.jsonl", [("a", recorded(chat_body("x"), elapsed_ms=10.0)), ("a", transport_error()), ("b", [recorded(chat_body("y")), recorded(chat_body("z"))])])
    out = load_recordings(path, {"a", "b", "c"})
    assert [e.elapsed_ms for e in out.envelopes["a"]] == [10.0, 1.2]
    assert classify(out.envelopes["a"][1]).label is Label.DROP
    assert len(out.envelopes["b"]) == 2 and "c" not in out.envelopes and out.requests["b"] == [None, None]


def test_replay_lines_grade_as_the_envelopes_recorded(tmp_path):
    """Each envelope of a replay grades as the envelope itself, a judge's (an llm-rubric verdict) carried too."""
    kase = make_case(must_include=["x"])
    with_judge = {**recorded(chat_body("x")), "judgements": {"says x": recorded(chat_body('{"pass": true, "reason": "ok"}'))}}
    lines = [("a", recorded(chat_body("x"), elapsed_ms=10.0)), ("a", transport_error()),
             ("b", [recorded(chat_body("y")), recorded(chat_body("x", finish_reason="length"))]), ("c", with_judge), ("c", [recorded(chat_body("x")), with_judge])]
    path = write_replay(tmp_path / "rec.jsonl", lines)
    replay = read_replay(path, {"a", "b", "c"})
    got = [grade(e, kase) for case_id in "abc" for e in replay.envelopes[case_id]]
    expected = [grade(envelope_from_raw(env), kase) for _, value in lines for env in (value if isinstance(value, list) else [value])]
    assert got == expected and [g.label for g in got] == [Label.RIGHT, Label.DROP, Label.WRONG, Label.TRUNCATED, Label.RIGHT, Label.RIGHT, Label.RIGHT]


def test_recordings_problems_name_the_line(tmp_path):
    path = tmp_path / "rec.jsonl"
    path.write_text("\n".join([
        json.dumps({"id": "a", "recorded": recorded(chat_body("x"))}),
        json.dumps({"id": "nope", "recorded": recorded(chat_body("x"))}),
        json.dumps({"id": "a", "recorded": {"http_status": "200"}}),
        json.dumps({"id": "a"}),
        json.dumps({"id": "gone", "recorded": {"http_status": "200"}}),  # an unknown id is the one problem of its line
    ]) + "\n", "utf-8")
    with pytest.raises(UsageError) as info:
        load_recordings(path, {"a"})
    found = info.value.problems
    assert [(p.line, p.field) for p in found] == [(2, "id"), (3, "recorded.http_status"), (4, None), (5, "id")]
    assert "'nope' matches no case" in found[0].message
    path.write_text('{"id": "a", "recorded": \n', "utf-8")
    with pytest.raises(UsageError) as info:
        load_recordings(path, {"a"})
    assert info.value.problems[0].line == 1
    with pytest.raises(UsageError):
        load_recordings(tmp_path / "missing.jsonl", {"a"})


def test_fixtures_hash_excludes_and_hidden(tmp_path):
    root = make_suite(tmp_path, [{"id": "x", "prompt": "p", "completion": "ok"}])
    before = fixtures_hash(root, set())
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref", "utf-8")
    assert fixtures_hash(root, set()) == before
    (root / "envelope-pins.json").write_text("{}", "utf-8")
    assert fixtures_hash(root, {(root / "envelope-pins.json").resolve()}) == before
    assert fixtures_hash(root, set()) != before
    (root / "notes.md").write_text("x", "utf-8")
    assert fixtures_hash(root, {(root / "envelope-pins.json").resolve()}) != before


def test_examples_load():
    assert len(load_cases(EXAMPLES / "support-bot", {(EXAMPLES / "support-bot" / "envelope-pins.json").resolve()})) == 12
    assert len(load_cases(EXAMPLES / "planted", set())) == 24


def test_a_pins_file_is_never_a_case(tmp_path):
    root = make_suite(tmp_path, [{"id": "x", "prompt": "p", "completion": "ok"}],
                      files={"envelope-pins.json": '{"format": "envelope-ci/pins", "version": 1, "cases": {}}',
                             "sub/envelope-pins.json": "{}", "sub/envelope-ci.yml": "easy_floor: 1\n"})
    assert [c.id for c in load_cases(root, set())] == ["x"]


def test_duplicate_ids_in_one_json_file_name_both_lines(tmp_path):
    text = '[\n {"id": "a", "prompt": "p", "completion": "x"},\n {"id": "b", "prompt": "p", "completion": "x"},\n {"id": "a", "prompt": "p", "completion": "y"}\n]\n'
    p = only_problem(make_suite(tmp_path, files={"c.json": text}))
    assert p.line == 4 and p.message.endswith("c.json:2)")


def test_a_case_built_from_its_check_is_the_case_built_afresh():
    raw = RawCase(case("c1", schema={"type": "object"}, must_include=["x"]), "cases.yaml", 1, {})
    made = checked(raw)
    assert made.problems == [] and made.digest and sorted(where for where, _ in made.written or ()) == ["must_include", "schema"]
    assert build_case(raw, made.digest, written=made.written) == build_case(raw, made.digest)


# -- a broken file among good ones ---------------------------------------------------------

def _mixed_suite(tmp_path: Path) -> Path:
    """Cases in YAML with defaults, in JSONL, one naming a prompt file, one answered by a sidecar line."""
    root = make_suite(tmp_path, files={
        "a.yaml": "defaults:\n  max_chars: 90\ncases:\n  - {id: y1, prompt: one}\n  - {id: y2, prompt: two, max_chars: 20}\n",
        "b.jsonl": [case("j1", expect_json={"answer": 42}), {"id": "j2", "prompt_file": "p.txt"}],
        "b.jsonl.recorded.jsonl": json.dumps({"id": "j1", "recorded": recorded(chat_body("x"))}) + "\n",
        "p.txt": "a prompt from a file",
    })
    return root


def test_a_file_with_a_problem_gives_no_cases(tmp_path):
    """A file with a problem has no cases (the run stops on it): the other files' cases are read, in order."""
    root = _mixed_suite(tmp_path)
    (root / "c.jsonl").write_text(json.dumps(case("k1")) + "\n{not json\n" + json.dumps(case("k2")) + "\n", "utf-8")
    (root / "d.jsonl").write_text(json.dumps(case("m1")) + "\n", "utf-8")
    raws, problems = raw_cases(root, set())
    assert [p.line for p in problems] == [2] and [r.data["id"] for r in raws] == ["y1", "y2", "j1", "j2", "m1"]
