"""Every built-in assertion: its schema fragment is in the case schema, and its flat shorthand
and its `assert:` form grade the same answer the same way."""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from envelope_ci.grading.assertions.base import Answer, Expectation, Failure
from envelope_ci.grading.assertions.registry import BUILTIN, assertion_types, lookup, shorthands, type_names
from envelope_ci.model import Case, Label
from envelope_ci.sources.cases import build_case, case_schema, checked
from envelope_ci.sources.parse import RawCase
from tests.support.suites import chat_body, grade, make_case, recorded, tool_call

LOOKUP_TOOL = {"type": "function", "function": {"name": "lookup_order", "parameters": {"type": "object"}}}


def _calls(name: str, **arguments) -> dict:
    """A reply that only calls one tool."""
    return chat_body(None, finish_reason="tool_calls", tool_calls=[tool_call(name, arguments)])


# type name -> (a value, an answer that meets it, an answer that does not, the label it fails with);
# an answer is the message text, or a whole response body.
SAMPLES = {
    "contains": ("Denver", "Ship to Denver.", "Ship to Boulder.", Label.WRONG),
    "icontains-all": (["refund", "order"], "Your ORDER refund is on its way.", "Your order ships today.", Label.WRONG),
    "icontains-any": (["refund", "credit"], "We issued a CREDIT.", "We shipped it.", Label.WRONG),
    "is-json": ({"type": "object", "required": ["order_id"]}, '{"order_id": "NW-1"}', '{"status": "shipped"}', Label.SCHEMA),
    "json-subset": ({"intent": "refund"}, '{"intent": "refund", "p": 1}', '{"intent": "status"}', Label.WRONG),
    "max-chars": (10, "short", "far too long an answer", Label.RIGHT),  # size channel, not a label
    "equals": ("Refunded.", "Refunded.", "Refunded. ", Label.WRONG),
    "icontains": ("refund", "Your REFUND is on its way.", "We shipped it.", Label.WRONG),
    "contains-any": (["Denver", "Boulder"], "Ship to Boulder.", "Ship to denver.", Label.WRONG),
    "contains-all": (["order", "refund"], "Your order refund is on its way.", "Your ORDER refund is on its way.", Label.WRONG),
    "starts-with": ("Dear", "Dear customer, ...", "Hello. Dear customer, ...", Label.WRONG),
    "regex": (r"NW-\d+", "Order NW-12 ships today.", "Order NW-x ships today.", Label.WRONG),
    "json-path": ({"path": "$.items[0].qty", "equals": 2}, '{"items": [{"qty": 2}]}', '{"items": [{"qty": 3}]}', Label.WRONG),
    "python": ("graders/sample.py:mentions_refund", "Your refund is on its way.", "We shipped it.", Label.WRONG),
    "tool-call": ({"name": "lookup_order", "arguments": {"order_id": "NW-1"}}, _calls("lookup_order", order_id="NW-1", verbose=True),
                  _calls("cancel_order", order_id="NW-1"), Label.WRONG),
}
# What a sample's case needs besides its assertion: a tool call answers only a case that offers tools.
CASE_FIELDS = {"tool-call": {"tools": [LOOKUP_TOOL]}}


def test_every_builtin_has_a_sample():
    # llm-rubric needs a judge's recorded verdict beside the answer: tests/grading/test_judge.py; similar an
    # embedding (tests/grading/test_similar.py); cost and latency are budgets on the median of repeats
    # (tests/grading/test_cost.py, tests/grading/test_latency.py)
    elsewhere = {"llm-rubric", "similar", "cost", "latency"}
    assert sorted(SAMPLES) == sorted(kind.name for kind in BUILTIN if kind.name not in elsewhere)


@pytest.mark.parametrize("kind", BUILTIN, ids=lambda k: k.name)
def test_fragment_is_in_the_case_schema(kind):
    schema = case_schema()
    items = schema["properties"]["assert"]["items"]
    assert kind.name in items["properties"]["type"]["enum"]
    (then,) = [b["then"] for b in items["allOf"] if b["if"]["properties"] == {"type": {"const": kind.name}}]
    assert then["properties"]["value"] == kind.value_schema
    required = [k for k in kind.entry_keys if k not in kind.optional_keys]
    assert then.get("required", []) == ([] if kind.value_optional else ["value"]) + required
    assert all(then["properties"][k] == schema for k, schema in kind.entry_keys.items())
    if kind.shorthand:
        assert {k: v for k, v in schema["properties"][kind.shorthand].items() if k != "description"} == dict(kind.value_schema)
    if kind.check_not is not None:
        assert "not-" + kind.name in type_names()


def _both_forms(name: str, value):
    """The same expectation written as a flat key and as an `assert:` entry (None when there is no shorthand)."""
    flat = next((key for key, (kind, negated) in shorthands().items() if (("not-" if negated else "") + kind.name) == name), None)
    return ({flat: value} if flat else None), {"assert": [{"type": name, "value": value}]}


@pytest.mark.parametrize("name", sorted(SAMPLES))
@pytest.mark.parametrize("negated", [False, True])
def test_shorthand_and_list_form_grade_the_same(name, negated, monkeypatch):
    monkeypatch.chdir(Path(__file__).parents[1] / "support")  # the python sample: tests/support/graders/sample.py
    value, good, bad, fail_label = SAMPLES[name]
    kind, _ = lookup(name)
    if negated and kind.check_not is None:
        assert lookup("not-" + name) is None
        return
    full = ("not-" if negated else "") + name
    flat, listed = _both_forms(full, value)
    extra = CASE_FIELDS.get(name, {})
    good, bad = (recorded(a if isinstance(a, dict) else chat_body(a)) for a in (good, bad))
    for body in (good, bad):
        by_list = grade(body, make_case(**listed, **extra))
        if flat is not None:
            by_flat = grade(body, make_case(**flat, **extra))
            assert (by_flat.label, by_flat.reasons) == (by_list.label, by_list.reasons)
    if not negated:
        assert grade(good, make_case(**listed, **extra)).label is Label.RIGHT
        assert grade(bad, make_case(**listed, **extra)).label is fail_label
    elif fail_label is Label.WRONG:  # the not- form flips a content verdict
        assert grade(good, make_case(**listed, **extra)).label is Label.WRONG
        assert grade(bad, make_case(**listed, **extra)).label is Label.RIGHT


def test_shorthands_keep_their_old_meaning():
    got = {key: ("not-" if negated else "") + kind.name for key, (kind, negated) in shorthands().items()}
    assert got == {"expect_fragment": "contains", "must_include": "icontains-all", "must_not_include": "not-icontains-any",
                   "schema": "is-json", "expect_json": "json-subset", "max_chars": "max-chars"}


def test_not_is_json_passes_prose_and_fails_json():
    case = make_case(**{"assert": [{"type": "not-is-json"}]})
    assert grade(recorded(chat_body("plain words")), case).label is Label.RIGHT
    assert grade(recorded(chat_body('{"a": 1}')), case).label is Label.SCHEMA


def test_max_chars_in_list_form_is_a_size_budget():
    case = make_case(**{"assert": [{"type": "max-chars", "value": 30}, {"type": "max-chars", "value": 10}]})
    assert case.max_chars == 10


@pytest.mark.parametrize(("entry", "field", "words"), [
    ({"type": "contains-whatever", "value": "x"}, "assert.0.type", "is not one of"),
    ({"type": "contains"}, "assert.0", "'value' is a required property"),
    ({"type": "icontains-all", "value": "refund"}, "assert.0.value", "is not of type 'array'"),
    ({"type": "not-max-chars", "value": 3}, "assert.0.type", "is not one of"),
    ({"type": "is-json", "value": {"type": "objekt"}}, "assert.0.value.type", "invalid JSON Schema"),
    ({"type": "contains", "value": "x", "weight": 2}, "assert.0.weight", "unknown key"),
])
def test_bad_assertions_are_named(entry, field, words):
    raw = RawCase({"id": "c", "prompt": "p", "assert": [entry]}, "cases.yaml", 3, {"assert": 4})
    problems = checked(raw).problems
    assert problems, entry
    assert any(p.field == field and words in p.message and p.line == 4 for p in problems), [str(p) for p in problems]


def test_a_case_builds_its_expectations_in_order():
    raw = RawCase({"id": "c", "prompt": "p", "must_not_include": ["sorry"], "expect_fragment": "a",
                   "assert": [{"type": "not-contains", "value": "b"}]}, "f.yaml", 1, {})
    assert not checked(raw).problems
    assert [e.name for e in build_case(raw).expectations] == ["contains", "not-icontains-any", "not-contains"]
    not_a_list = checked(RawCase({"id": "c", "prompt": "p", "assert": "x"}, "f.yaml", 1, {})).problems
    assert [(p.field, p.message) for p in not_a_list] == [("assert", "'x' is not of type 'array'")]


def test_grading_asks_an_assertion_only_for_the_failures_it_can_give():
    """``_label`` skips an expectation whose ``kind.judged_as`` lacks the failure asked: it would answer nothing."""
    answers = [Answer("hello"), Answer('{"a": 1}', {"a": 1}, True), Answer('{"a"', None, False),
               Answer("", None, False, ({"type": "function", "function": {"name": "f", "arguments": "{not json"}},))]
    values = {"is-json": None, "max-chars": 3, "tool-call": [{"name": "f"}], "llm-rubric": None, "python": None}
    asked = 0
    for kind in assertion_types().values():
        assert kind.judged_as == {kind.failure, *([Failure.SCHEMA] if kind.check_shape else [])}
        if kind.name not in values and kind.prepare is not None:
            continue  # its value must be prepared from a fixture: covered by its own tests
        for failure in Failure:
            if failure in kind.judged_as:
                continue
            for answer in answers:
                for negated in (False, True) if kind.check_not else (False,):
                    expectation = Expectation(kind, values.get(kind.name, "x"), negated)
                    assert expectation.failures_as(failure, answer, None) == []
                    asked += 1
    assert asked > 50


@given(budgets=st.lists(st.tuples(st.integers(0, 500), st.booleans()), max_size=4))
def test_a_case_budget_is_its_tightest_size_assertion(budgets):
    kinds = assertion_types()
    expectations = tuple(Expectation(kinds["max-chars"], value, negated) for value, negated in budgets)
    case = Case("c", None, (), "f", 1, "d", (*expectations, Expectation(kinds["contains"], "x")))
    kept = [value for value, negated in budgets if not negated]
    assert case.max_chars == (min(kept) if kept else None)
