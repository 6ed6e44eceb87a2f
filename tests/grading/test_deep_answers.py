"""A model's answer nested past any sane depth is graded like any other bad answer, never an internal error."""
from __future__ import annotations

import json

import pytest

from envelope_ci.grading.envelope import MAX_ANSWER_DEPTH
from envelope_ci.model import Label
from tests.support.suites import chat_body, grade, make_suite, recorded, run_report, tool_call

DEEP = "[" * 5000 + "]" * 5000


def test_an_answer_nested_1000_levels_where_json_is_asked_is_a_schema_failure_saying_how_deep():
    graded = grade(recorded(chat_body(DEEP)), schema={"type": "array"})
    assert graded.label is Label.SCHEMA
    assert graded.reasons == (f"answer is not JSON that can be graded: the answer nests too deep to read as JSON "
                              f"(at most {MAX_ANSWER_DEPTH} levels)",)


def test_a_deep_answer_to_a_text_assertion_is_graded_on_its_text():
    assert grade(recorded(chat_body(DEEP)), **{"assert": [{"type": "contains", "value": "[["}]}).label is Label.RIGHT
    assert grade(recorded(chat_body(DEEP)), **{"assert": [{"type": "contains", "value": "no"}]}).label is Label.WRONG


def test_an_answer_deep_but_within_the_depth_is_read_as_json():
    within = "[" * 400 + "]" * 400
    assert grade(recorded(chat_body(within)), schema={"type": "array"}).label is Label.RIGHT


def test_deep_tool_call_arguments_are_unusable_arguments_not_a_crash():
    body = chat_body(None, tool_calls=[tool_call("lookup", "{\"a\": " + DEEP + "}")], finish_reason="tool_calls")
    graded = grade(recorded(body), tools=[{"type": "function", "function": {"name": "lookup"}}],
                   **{"assert": [{"type": "tool-call", "value": {"name": "lookup"}}]})
    assert graded.label is Label.SCHEMA
    assert any("nests too deep" in reason for reason in graded.reasons)


@pytest.mark.parametrize("depth", [MAX_ANSWER_DEPTH + 1, 5000])
def test_a_run_whose_recording_holds_a_deep_answer_writes_its_reports(tmp_path, depth):
    deep = "{\"a\": " + "[" * depth + "]" * depth + "}"
    suite = make_suite(tmp_path, [{"id": "deep", "prompt": "p", "expect_json": {"a": []},
                                             "recorded": recorded(chat_body(deep))}])
    result, report = run_report(suite, tmp_path / "out")
    assert result.code == 1, result.err
    assert report is not None and [(c["id"], c["label"]) for c in report["cases"]] == [("deep", "schema")]
    assert json.loads((tmp_path / "out" / "report.json").read_text("utf-8"))["verdict"] == "fail"
