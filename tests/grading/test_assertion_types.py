"""The promptfoo-named assertions (text, json-path) and tool-call checks, each right, wrong, bad input
(with file, line and field) and negated; the python grader's files and failures."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from envelope_ci.errors import UsageError
from envelope_ci.grading import grade as grade_module
from envelope_ci.grading.assertions.json_path import json_equal, lookup, parse_path
from envelope_ci.model import Envelope, Label
from envelope_ci.sources.cases import checked, load_cases
from envelope_ci.sources.parse import RawCase
from envelope_ci.sources.recordings import envelope_from_raw
from tests.support.fake_openai import Behaviour, FakeOpenAI
from tests.support.suites import chat_body, grade, make_case, make_suite, recorded, run_cli, run_report, tool_call

LOOKUP_TOOL = {"type": "function", "function": {"name": "lookup_order", "parameters": {"type": "object"}}}


def label_of(answer: str | dict, *entries: dict, **fields) -> tuple[Label, tuple[str, ...]]:
    """The label and reasons of one answer (text, or a whole response body) under these assertions."""
    body = answer if isinstance(answer, dict) else chat_body(answer)
    g = grade(recorded(body), make_case(**{"assert": list(entries)}, **fields))
    return g.label, g.reasons


def problems_of(*entries: dict) -> list[str]:
    """Load-time problems of a case with these assertions (its `assert` key on line 4 of cases.yaml)."""
    raw = RawCase({"id": "c", "prompt": "p", "assert": list(entries)}, "cases.yaml", 3, {"assert": 4})
    return [str(p) for p in checked(raw).problems]


# -- text assertions ------------------------------------------------------------------------------------

# (type, value, answers meeting it, answers that do not, a reason the failing one gives)
TEXT = [
    ("equals", "Refunded.", ["Refunded."], ["Refunded. ", "refunded.", "Refunded.\n"], "answer is not exactly 'Refunded.'"),
    ("icontains", "Refund", ["a REFUND", "refund"], ["a credit"], "missing 'Refund' (ignoring case)"),
    ("contains-any", ["NW-1", "NW-2"], ["order NW-2", "NW-1 and NW-2"], ["order nw-1"], "contains none of ['NW-1', 'NW-2']"),
    ("contains-all", ["NW-1", "NW-2"], ["NW-2, NW-1"], ["NW-1 only", "nw-1 NW-2"], "missing 'NW-"),
    ("starts-with", "Dear", ["Dear Ann,"], [" Dear Ann,", "dear Ann,", "Hi Dear"], "does not start with 'Dear'"),
    ("regex", r"\bNW-\d{3}\b", ["order NW-123 ships", "NW-999"], ["order NW-12", "NW-1234"], "no match for regex"),
    ("regex", r"(?i)^sorry", ["Sorry, no.", "SORRY"], ["I am sorry"], "no match for regex"),
]


@pytest.mark.parametrize(("kind", "value", "good", "bad", "why"), TEXT, ids=[f"{t[0]}-{i}" for i, t in enumerate(TEXT)])
def test_text_assertion_right_wrong_and_negated(kind, value, good, bad, why):
    for answer in good:
        assert label_of(answer, {"type": kind, "value": value})[0] is Label.RIGHT, answer
        label, reasons = label_of(answer, {"type": "not-" + kind, "value": value})
        assert label is Label.WRONG and reasons, answer
    for answer in bad:
        label, reasons = label_of(answer, {"type": kind, "value": value})
        assert label is Label.WRONG and why in reasons[0], (answer, reasons)
        assert label_of(answer, {"type": "not-" + kind, "value": value})[0] is Label.RIGHT, answer


def test_negated_reasons_name_what_was_forbidden():
    assert label_of("Refunded.", {"type": "not-equals", "value": "Refunded."})[1] == ("answer is exactly the forbidden 'Refunded.'",)
    assert label_of("a Refund", {"type": "not-icontains", "value": "refund"})[1] == ("contains forbidden 'refund' (ignoring case)",)
    assert label_of("NW-1, NW-2", {"type": "not-contains-any", "value": ["NW-1", "NW-2", "NW-3"]})[1] == (
        "contains forbidden 'NW-1'", "contains forbidden 'NW-2'")
    assert label_of("NW-1, NW-2", {"type": "not-contains-all", "value": ["NW-1", "NW-2"]})[1] == ("contains all of ['NW-1', 'NW-2']",)
    assert label_of("Dear Ann", {"type": "not-starts-with", "value": "Dear"})[1] == ("starts with forbidden 'Dear'",)
    assert label_of("call 555-0100 now", {"type": "not-regex", "value": r"\d{3}-\d{4}"})[1] == (r"matches forbidden regex '\\d{3}-\\d{4}': '555-0100'",)


def test_text_assertions_read_the_message_not_a_tool_call():
    body = chat_body("Looking it up.", finish_reason="tool_calls", tool_calls=[tool_call("lookup_order", {"order_id": "NW-1"})])
    assert label_of(body, {"type": "icontains", "value": "NW-1"}, tools=[LOOKUP_TOOL])[0] is Label.WRONG
    assert label_of(body, {"type": "equals", "value": "Looking it up."}, tools=[LOOKUP_TOOL])[0] is Label.RIGHT


@pytest.mark.parametrize(("entry", "field", "words"), [
    ({"type": "regex", "value": "(unclosed"}, "assert.0.value", "invalid regular expression: missing ), unterminated subpattern"),
    ({"type": "not-regex", "value": "[z-a]"}, "assert.0.value", "invalid regular expression: bad character range"),
    ({"type": "regex", "value": ["a"]}, "assert.0.value", "is not of type 'string'"),
    ({"type": "equals", "value": 3}, "assert.0.value", "is not of type 'string'"),
    ({"type": "icontains", "value": ["a"]}, "assert.0.value", "is not of type 'string'"),
    ({"type": "contains-any", "value": []}, "assert.0.value", "should be non-empty"),
    ({"type": "contains-all", "value": "NW-1"}, "assert.0.value", "is not of type 'array'"),
    ({"type": "starts-with", "value": ""}, "assert.0.value", "should be non-empty"),
    ({"type": "json-path", "value": {"path": "items[0]", "equals": 1}}, "assert.0.value.path", "a path starts with $"),
    ({"type": "json-path", "value": {"path": "$.items[x]", "equals": 1}}, "assert.0.value.path", "cannot read the path at char 7"),
    ({"type": "json-path", "value": {"path": "$.a", "matches": "("}}, "assert.0.value.matches", "invalid regular expression"),
    ({"type": "json-path", "value": {"path": "$.a"}}, "assert.0.value", "give either 'equals'"),
    ({"type": "json-path", "value": {"path": "$.a", "equals": 1, "matches": "1"}}, "assert.0.value", "give either 'equals'"),
    ({"type": "json-path", "value": {"path": "$.a", "equal": 1}}, "assert.0.value.equal", "unknown key (did you mean 'equals'?)"),
    ({"type": "python", "value": "graders/refund.py"}, "assert.0.value", "expected FILE.py:FUNCTION"),
    ({"type": "python", "value": "graders/refund.js:check"}, "assert.0.value", "expected FILE.py:FUNCTION"),
    ({"type": "not-python", "value": "graders/refund.py:check"}, "assert.0.type", "is not one of"),
    ({"type": "tool-call", "value": "lookup_order"}, "assert.0.value", "is not of type 'object', 'array'"),
    ({"type": "tool-call", "value": {"arguments": {}}}, "assert.0.value", "'name' is a required property"),
    ({"type": "tool-call", "value": {"name": "x", "args": {}}}, "assert.0.value.args", "unknown key (did you mean 'arguments'?)"),
    ({"type": "tool-call", "value": {"name": "x", "arguments": "{}"}}, "assert.0.value.arguments", "is not of type 'object'"),
    ({"type": "tool-call", "value": [{"name": "x"}, {"name": 3}]}, "assert.0.value.1.name", "is not of type 'string'"),
    ({"type": "tool-call", "value": []}, "assert.0.value", "should be non-empty"),
])
def test_bad_values_are_named_with_file_line_and_field(entry, field, words):
    found = problems_of(entry)
    assert any(p.startswith(f"cases.yaml:4: {field}: ") and words in p for p in found), found


def test_an_invalid_regex_stops_the_run_before_any_call(tmp_path):
    suite = make_suite(tmp_path, [{"id": "r", "prompt": "p", "completion": "x", "assert": [{"type": "regex", "value": "a{2,1}"}]}])
    result = run_cli(["run", suite, "--out", tmp_path / "out"])
    assert result.code == 2
    assert "cases.yaml" in result.err and "assert.0.value: invalid regular expression" in result.err
    assert not (tmp_path / "out" / "report.json").exists()


# -- json-path -----------------------------------------------------------------------------------------

ORDER = '{"items": [{"sku": "A-1", "qty": 2}, {"sku": "B-7", "qty": 1}], "ship to": {"city": "Denver"}, "gift": false, "note": null}'


@pytest.mark.parametrize(("value", "holds"), [
    ({"path": "$.items[0].qty", "equals": 2}, True),
    ({"path": "$.items[0].qty", "equals": 2.0}, True),
    ({"path": "$.items[0].qty", "equals": "2"}, False),
    ({"path": "$.items[-1].sku", "equals": "B-7"}, True),
    ({"path": '$["ship to"].city', "equals": "Denver"}, True),
    ({"path": "$['ship to']['city']", "matches": "^Den"}, True),
    ({"path": "$.items[1]", "equals": {"qty": 1, "sku": "B-7"}}, True),
    ({"path": "$.items[1]", "equals": {"qty": 1}}, False),
    ({"path": "$.gift", "equals": False}, True),
    ({"path": "$.gift", "equals": 0}, False),
    ({"path": "$.note", "equals": None}, True),
    ({"path": "$.items[0].qty", "matches": r"^\d+$"}, True),
    ({"path": "$.items", "matches": '"sku": "B-7"'}, True),
    ({"path": "$.items[0].sku", "matches": "^B"}, False),
])
def test_json_path_equals_or_matches(value, holds):
    label, reasons = label_of(ORDER, {"type": "json-path", "value": value})
    assert (label is Label.RIGHT) is holds, reasons
    negated, _ = label_of(ORDER, {"type": "not-json-path", "value": value})
    assert (negated is Label.WRONG) is holds


@pytest.mark.parametrize(("path", "why"), [
    ("$.items[2].qty", "json-path no $.items[2]: $.items has 2 items"),
    ("$.items[0].price", "json-path no $.items[0].price: $.items[0] has no such key"),
    ("$.gift.wrap", "json-path no $.gift.wrap: $.gift is a boolean, not an object"),
    ("$[0]", "json-path no $[0]: $ is an object, not a list"),
    ('$["ship to"].zip', 'json-path no $["ship to"].zip: $["ship to"] has no such key'),
])
def test_a_missing_path_is_wrong_and_named(path, why):
    label, reasons = label_of(ORDER, {"type": "json-path", "value": {"path": path, "equals": 1}})
    assert (label, reasons) == (Label.WRONG, (why,))
    assert label_of(ORDER, {"type": "not-json-path", "value": {"path": path, "equals": 1}})[0] is Label.RIGHT


def test_json_path_reasons_and_shape():
    assert label_of(ORDER, {"type": "json-path", "value": {"path": "$.items[0].qty", "equals": 3}})[1] == (
        "json-path $.items[0].qty: expected a value equal to 3, got 2",)
    assert label_of(ORDER, {"type": "not-json-path", "value": {"path": "$.items[0].qty", "matches": "2"}})[1] == (
        "json-path $.items[0].qty: 2 is matching '2', which it must not be",)
    # The answer must be JSON: prose is a shape failure, before any path is read.
    assert label_of("two of A-1", {"type": "json-path", "value": {"path": "$.items", "equals": 1}})[0] is Label.SCHEMA
    assert label_of("two of A-1", {"type": "not-json-path", "value": {"path": "$.items", "equals": 1}})[0] is Label.RIGHT


def test_path_syntax():
    assert parse_path("$") == ()
    assert parse_path('$.a[0]["b c"][\'d\'][-1]._e-f') == ("a", 0, "b c", "d", -1, "_e-f")
    assert parse_path('$["quote \\" inside"]') == ('quote " inside',)
    for bad in ("a.b", "$.", "$.a b", "$[", "$[0", "$..a", "$.a[1.5]"):
        with pytest.raises(ValueError):
            parse_path(bad)
    assert lookup({"a": [1, {"b": None}]}, ("a", 1, "b")) == (None, None)
    assert json_equal([1, {"a": 2.0}], [1.0, {"a": 2}]) and not json_equal(True, 1) and not json_equal([1], [1, 1]) and not json_equal("1", 1)


# -- tool-call -----------------------------------------------------------------------------------------

def calls(*made: tuple[str, dict | str], content: str | None = None) -> dict:
    """A response body making these tool calls (arguments a dict, or raw text as the model sent it)."""
    return chat_body(content, finish_reason="tool_calls", tool_calls=[tool_call(name, args) for name, args in made])


def tool_label(body: dict, value, negated: bool = False) -> tuple[Label, tuple[str, ...]]:
    return label_of(body, {"type": ("not-" if negated else "") + "tool-call", "value": value}, tools=[LOOKUP_TOOL])


LOOKUP = {"name": "lookup_order", "arguments": {"order_id": "NW-1"}}


@pytest.mark.parametrize(("body", "label", "why"), [
    (calls(("lookup_order", {"order_id": "NW-1"})), Label.RIGHT, None),
    (calls(("lookup_order", {"order_id": "NW-1", "verbose": True})), Label.RIGHT, None),  # arguments are a subset
    (calls(("get_customer", {}), ("lookup_order", {"order_id": "NW-1"})), Label.RIGHT, None),  # anywhere among the calls
    (calls(("lookup_order", {"order_id": "NW-1"}), content="Let me check."), Label.RIGHT, None),
    (calls(("cancel_order", {"order_id": "NW-1"})), Label.WRONG, "no call to lookup_order (called: cancel_order)"),
    (calls(("lookup_order", {"order_id": "NW-2"})), Label.WRONG, 'tool call lookup_order: arguments $.order_id: expected "NW-1", got "NW-2"'),
    (calls(("lookup_order", {"id": "NW-1"})), Label.WRONG, "tool call lookup_order: arguments $.order_id: missing"),
    (calls(("lookup_order", "")), Label.WRONG, "tool call lookup_order: arguments $.order_id: missing"),  # "" is no arguments
    (chat_body("Your order NW-1 shipped."), Label.WRONG, "no tool call (expected lookup_order)"),
    (calls(("lookup_order", '{"order_id": NW-1}')), Label.SCHEMA, "tool call 1: lookup_order: arguments are not JSON: Expecting value at char 13"),
    (calls(("lookup_order", '["NW-1"]')), Label.SCHEMA, "tool call 1: lookup_order: arguments are JSON but not an object"),
    (calls(("get_customer", "{}"), ("cancel_order", "{oops}")), Label.SCHEMA, "tool call 2: cancel_order: arguments are not JSON"),
])
def test_tool_call_one_expected(body, label, why):
    got, reasons = tool_label(body, LOOKUP)
    assert got is label, reasons
    if why:
        assert reasons[0].startswith(why), reasons


def test_tool_call_without_a_name_or_with_object_arguments_is_schema():
    nameless = chat_body(None, finish_reason="tool_calls", tool_calls=[{"id": "c1", "type": "function", "function": {"arguments": "{}"}}])
    assert tool_label(nameless, LOOKUP) == (Label.SCHEMA, ("tool call 1: has no function name",))
    parsed = chat_body(None, finish_reason="tool_calls", tool_calls=[{"id": "c1", "type": "function", "function": {"name": "lookup_order", "arguments": {"order_id": "NW-1"}}}])
    assert tool_label(parsed, LOOKUP) == (Label.SCHEMA, ("tool call 1: lookup_order: arguments are not a JSON string (OpenAI sends one)",))


def test_tool_calls_in_order():
    wanted = [{"name": "get_customer"}, LOOKUP]
    assert tool_label(calls(("get_customer", {"email": "a@b.c"}), ("lookup_order", {"order_id": "NW-1"})), wanted)[0] is Label.RIGHT
    assert tool_label(calls(("get_customer", {}), ("log", {}), ("lookup_order", {"order_id": "NW-1"})), wanted)[0] is Label.RIGHT
    assert tool_label(calls(("lookup_order", {"order_id": "NW-1"}), ("get_customer", {})), wanted) == (
        Label.WRONG, ("no call to lookup_order after get_customer (expected in this order; called: lookup_order, get_customer)",))
    assert tool_label(calls(("get_customer", {})), wanted) == (Label.WRONG, ("no call to lookup_order (called: get_customer)",))
    twice = [LOOKUP, {"name": "lookup_order", "arguments": {"order_id": "NW-2"}}]
    assert tool_label(calls(("lookup_order", {"order_id": "NW-1"}), ("lookup_order", {"order_id": "NW-2"})), twice)[0] is Label.RIGHT
    assert tool_label(calls(("lookup_order", {"order_id": "NW-2"}), ("lookup_order", {"order_id": "NW-1"})), twice)[0] is Label.WRONG


def test_not_tool_call_forbids_a_call():
    forbidden = {"name": "refund_order"}
    assert tool_label(calls(("lookup_order", {"order_id": "NW-1"})), forbidden, negated=True)[0] is Label.RIGHT
    assert tool_label(chat_body("No refund."), forbidden, negated=True)[0] is Label.RIGHT
    assert tool_label(calls(("refund_order", {"order_id": "NW-1"})), forbidden, negated=True) == (Label.WRONG, ("made the forbidden tool call refund_order",))
    pair = [{"name": "refund_order"}, {"name": "lookup_order", "arguments": {"order_id": "NW-1"}}]
    assert tool_label(calls(("refund_order", {}), ("lookup_order", {"order_id": "NW-1"})), pair, negated=True)[1] == (
        'made the forbidden tool calls refund_order, lookup_order({"order_id": "NW-1"})',)
    # Arguments that are not JSON are a shape failure in either form.
    assert tool_label(calls(("refund_order", "{oops}")), forbidden, negated=True)[0] is Label.SCHEMA


def test_tool_call_shape_comes_before_content_assertions():
    body = calls(("lookup_order", "{bad"), content="Sorry!")
    label, reasons = label_of(body, {"type": "tool-call", "value": LOOKUP}, {"type": "not-icontains", "value": "sorry"}, tools=[LOOKUP_TOOL])
    assert label is Label.SCHEMA and len(reasons) == 1 and "arguments are not JSON" in reasons[0]


def test_tool_calls_graded_offline_from_recorded_envelopes(tmp_path):
    expect = {"assert": [{"type": "tool-call", "value": LOOKUP}], "tools": [LOOKUP_TOOL]}
    suite = make_suite(tmp_path, [
        {"id": "t-right", "prompt": "Where is NW-1?", "recorded": recorded(calls(("lookup_order", {"order_id": "NW-1"}))), **expect},
        {"id": "t-wrong", "prompt": "Where is NW-1?", "recorded": recorded(calls(("cancel_order", {"order_id": "NW-1"}))), **expect},
        {"id": "t-schema", "prompt": "Where is NW-1?", "recorded": recorded(calls(("lookup_order", '{"order_id": "NW-1"'))), **expect},
        {"id": "t-prose", "prompt": "Where is NW-1?", "completion": "It shipped.", **expect},
    ])
    result, report = run_report(suite, tmp_path / "out")
    assert report is not None, result.err
    got = {c["id"]: (c["label"], c["reasons"]) for c in report["cases"]}
    assert got["t-right"] == ("right", [])
    assert got["t-wrong"] == ("wrong", ["no call to lookup_order (called: cancel_order)"])
    assert got["t-schema"][0] == "truncated"  # JSON cut at its end is a truncation, judged before any assertion
    assert got["t-prose"] == ("wrong", ["no tool call (expected lookup_order)"])


# -- python --------------------------------------------------------------------------------------------

REFUND_GRADER = '''\
import json


def check(answer, case):
    """Pass answers that mention a refund; say which case missed it."""
    if "boom" in answer:
        raise ValueError(f"cannot grade {answer!r}")
    if "pid" in answer:
        raise RuntimeError(f"in process {__import__('os').getpid()}")
    if "dump" in answer:
        return json.dumps(case, sort_keys=True)
    return None if "refund" in answer.lower() else f"{case['id']}: no refund mentioned"


def says_yes(answer, case):
    return answer == "yes"


def short_and_quick(answer, case):
    """A budget on the envelope: fail past 20 output tokens or 1 s, and say what was seen."""
    seen = case["envelope"]
    usage = seen["usage"]
    if usage["output_tokens"] > 20 or (seen["elapsed_ms"] or 0) > 1000:
        return json.dumps(seen, sort_keys=True)
    return None


NOT_A_FUNCTION = 3
'''


def grader_suite(tmp_path: Path, cases: list[dict], grader: str = REFUND_GRADER, where: str = "graders/refund.py") -> Path:
    """A suite whose cases name a grader file (a repository of its own, so `/` paths resolve to tmp_path)."""
    (tmp_path / ".git").mkdir(parents=True, exist_ok=True)
    suite = make_suite(tmp_path, cases)
    target = (tmp_path / where.lstrip("/")) if where.startswith("/") else suite / where
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(grader, "utf-8")
    return suite


def py_case(case_id: str, answer: str, value: str = "graders/refund.py:check", **fields) -> dict:
    return {"id": case_id, "prompt": "Can I get my money back?", "completion": answer, "assert": [{"type": "python", "value": value}], **fields}


def grade_suite(suite: Path, answers: dict[str, Envelope] | None = None) -> dict[str, tuple[Label, tuple[str, ...]]]:
    """Each case graded on its bare completion, or on the envelope ``answers`` holds for it."""
    cases = load_cases(suite, set())
    answers = answers or {}
    graded = grade_module.grade_all(cases, {c.id: [answers.get(c.id) or Envelope(completion=c.completion)] for c in cases})
    return {cid: (g[0].label, g[0].reasons) for cid, g in graded.items()}


def test_python_grader_right_and_wrong_and_hashed(tmp_path):
    suite = grader_suite(tmp_path, [py_case("p-right", "A refund is on its way."), py_case("p-wrong", "We shipped it.")])
    assert grade_suite(suite) == {"p-right": (Label.RIGHT, ()), "p-wrong": (Label.WRONG, ("graders/refund.py:check: p-wrong: no refund mentioned",))}
    cases = {c.id: c for c in load_cases(suite, set())}
    assert list(cases["p-right"].files) == ["graders/refund.py"]
    before = cases["p-right"].digest
    (suite / "graders" / "refund.py").write_text(REFUND_GRADER + "\n# edited\n", "utf-8")
    assert {c.id: c.digest for c in load_cases(suite, set())}["p-right"] != before


def test_python_grader_from_the_repository_root(tmp_path):
    suite = grader_suite(tmp_path, [py_case("p-root", "refund", "/tools/graders.py:check")], where="/tools/graders.py")
    assert grade_suite(suite) == {"p-root": (Label.RIGHT, ())}
    assert list(load_cases(suite, set())[0].files) == ["/tools/graders.py"]


def test_python_grader_receives_the_answer_text_and_a_plain_case(tmp_path):
    suite = grader_suite(tmp_path, [py_case("p-dump", "dump", stratum="medium", tools=[LOOKUP_TOOL], temperature=0)])
    label, (reason,) = grade_suite(suite)["p-dump"]
    assert label is Label.WRONG
    assert json.loads(reason.removeprefix("graders/refund.py:check: ")) == {
        "id": "p-dump", "stratum": "medium", "file": (suite / "cases.yaml").as_posix(), "line": 1,
        "messages": [{"role": "user", "content": "Can I get my money back?"}], "request": {"tools": [LOOKUP_TOOL], "temperature": 0},
        "envelope": {"usage": {"input_tokens": 6, "output_tokens": 1, "input_estimated": True, "output_estimated": True},
                     "model": None, "elapsed_ms": None, "ttft_ms": None, "provider": None}}


def test_python_grader_sees_the_envelope_every_assertion_sees(tmp_path):
    """Usage as reported, the model id, both times and the wire format, under the case's ``envelope``."""
    value = "graders/refund.py:short_and_quick"
    suite = grader_suite(tmp_path, [py_case("p-long", "x", value), py_case("p-slow", "x", value), py_case("p-ok", "x", value)])
    body = chat_body("Refunds take 5 days.", model="gpt-4o-mini-2024-07-18", usage=(31, 7))
    answers = {"p-long": envelope_from_raw(recorded(chat_body("Refunds take 5 days.", usage=(31, 40)))),
               "p-slow": envelope_from_raw(recorded(body, elapsed_ms=1840.0, ttft_ms=120.0)),
               "p-ok": envelope_from_raw(recorded(body, elapsed_ms=840.0, ttft_ms=120.0))}
    graded = grade_suite(suite, answers)
    assert graded["p-ok"] == (Label.RIGHT, ())
    assert graded["p-long"][0] is Label.WRONG and graded["p-slow"][0] is Label.WRONG
    seen = json.loads(graded["p-slow"][1][0].removeprefix(f"{value}: "))
    assert seen == {"usage": {"input_tokens": 31, "output_tokens": 7, "input_estimated": False, "output_estimated": False},
                    "model": "gpt-4o-mini-2024-07-18", "elapsed_ms": 1840.0, "ttft_ms": 120.0, "provider": "openai-chat"}


@pytest.mark.parametrize(("value", "grader", "words"), [
    ("graders/missing.py:check", REFUND_GRADER, "assert.0.value: graders/missing.py: file not found"),
    ("graders/refund.py:absent", REFUND_GRADER, "graders/refund.py: no function 'absent'"),
    ("graders/refund.py:NOT_A_FUNCTION", REFUND_GRADER, "graders/refund.py: no function 'NOT_A_FUNCTION'"),
    ("graders/refund.py:check", "def check(answer, case)\n", "graders/refund.py: importing it raised SyntaxError"),
    ("graders/refund.py:check", "import no_such_module_anywhere\n", "graders/refund.py: importing it raised ModuleNotFoundError"),
    ("graders/refund.py:check", "raise SystemExit(1)\n", "graders/refund.py: importing it raised SystemExit"),
    ("../../outside.py:check", REFUND_GRADER, "assert.0.value: ../../outside.py: outside the repository"),
], ids=["no-file", "no-function", "not-callable", "syntax-error", "import-error", "exit-on-import", "outside"])
def test_a_grader_that_cannot_be_loaded_is_bad_input_on_its_line(tmp_path, value, grader, words):
    """A file that is not there is found as the fixtures load; what is in it only when a case is graded (its code runs then)."""
    (tmp_path / "outside.py").write_text(REFUND_GRADER, "utf-8")
    suite = grader_suite(tmp_path / "repo", [py_case("p-1", "refund"), py_case("p-bad", "refund", value)], grader)
    with pytest.raises(UsageError) as err:
        grade_suite(suite)
    problems = [str(p) for p in err.value.problems]
    assert any(p.startswith(f"{(suite / 'cases.yaml').as_posix()}:") and words in p for p in problems), problems
    result = run_cli(["run", suite, "--out", tmp_path / "out"])
    assert result.code == 2 and words in result.err


def test_a_grader_that_raises_is_a_usage_error_naming_it(tmp_path):
    suite = grader_suite(tmp_path, [py_case("p-ok", "refund"), py_case("p-boom", "boom")])
    with pytest.raises(UsageError) as err:
        grade_suite(suite)
    assert str(err.value) == "graders/refund.py:check raised ValueError: cannot grade 'boom' (graders/refund.py line 7, case p-boom)"
    result = run_cli(["run", suite, "--out", tmp_path / "out"])
    assert result.code == 2, result.err
    assert result.err_lines == ["error: graders/refund.py:check raised ValueError: cannot grade 'boom' (graders/refund.py line 7, case p-boom)"]


def test_a_grader_returning_neither_none_nor_a_reason_is_a_usage_error(tmp_path):
    suite = grader_suite(tmp_path, [py_case("p-bool", "yes", "graders/refund.py:says_yes")])
    with pytest.raises(UsageError, match=r"graders/refund.py:says_yes returned True for case p-bool: a grader returns None \(pass\) or a reason string \(fail\)"):
        grade_suite(suite)


def test_a_grader_raising_in_a_live_run_is_exit_2_not_a_drop(tmp_path):
    suite = grader_suite(tmp_path, [{"id": "p-live", "prompt": "Money back? [[p-live]]", "assert": [{"type": "python", "value": "graders/refund.py:check"}]}])
    with FakeOpenAI() as srv:
        srv.plant("p-live", Behaviour.ok("boom"))
        result = run_cli(["run", suite, "--out", tmp_path / "out", "--base-url", srv.url, "--model", "m",
                          "--record", tmp_path / "rec.jsonl", "--max-attempts", "2"])
        assert srv.attempts("p-live") == 1  # a grader's failure is no reason to call again
    assert result.code == 2, result.err
    assert "error: graders/refund.py:check raised ValueError: cannot grade 'boom'" in result.err
    (line,) = [json.loads(x) for x in (tmp_path / "rec.jsonl").read_text("utf-8").splitlines()]
    assert line["attempt_log"][0]["label"] == "grader-error"  # the recording is kept: fix the grader, then --replay it
