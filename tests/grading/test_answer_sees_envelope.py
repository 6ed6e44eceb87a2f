"""What an assertion sees besides the text: the call's usage (reported or estimated, and which), the model id the
answer names, its times and its wire format; the size and time channels read what they read before."""
from __future__ import annotations

from typing import Any

import msgspec

from envelope_ci.grading.assertions.base import Answer, AssertionType, Expectation, Failure, Usage
from envelope_ci.model import Case, Label
from tests.support.suites import chat_body, grade, make_case, recorded


def _watching(case: Case, seen: list[Answer], check: Any = None) -> Case:
    """The case with one more assertion, a plug-in's: it keeps every Answer it is shown."""
    def look(answer: Answer, value: Any, case: Any) -> list[str]:
        seen.append(answer)
        return check(answer) if check else []

    kind = AssertionType(name="peek", failure=Failure.WRONG, check=look, value_schema={}, description="sees all")
    return msgspec.structs.replace(case, expectations=(*case.expectations, Expectation(kind, None)))


def test_an_assertion_sees_the_reported_usage_model_id_times_and_provider():
    seen: list[Answer] = []
    body = chat_body("Refunds take 5 days.", model="gpt-4o-mini-2024-07-18", usage=(31, 7))
    graded = grade(recorded(body, elapsed_ms=840.0, ttft_ms=120.0), _watching(make_case(), seen))
    assert graded.label is Label.RIGHT
    (answer,) = seen
    assert answer.text == "Refunds take 5 days."
    assert answer.usage == Usage(input_tokens=31, output_tokens=7, input_estimated=False, output_estimated=False)
    assert answer.model_id == "gpt-4o-mini-2024-07-18"
    assert (answer.elapsed_ms, answer.ttft_ms, answer.provider) == (840.0, 120.0, "openai-chat")


def test_usage_the_server_did_not_count_is_estimated_from_characters_and_says_which():
    seen: list[Answer] = []
    case = make_case(prompt="x" * 40)
    grade(recorded(chat_body("y" * 20, usage=None)), _watching(case, seen))
    (answer,) = seen
    assert answer.usage == Usage(input_tokens=10, output_tokens=5, input_estimated=True, output_estimated=True)
    assert answer.usage.estimated


def test_an_output_count_without_an_input_count_estimates_only_the_input():
    seen: list[Answer] = []
    body = chat_body("y" * 20, extra={"usage": {"completion_tokens": 9}})
    grade(recorded(body), _watching(make_case(prompt="x" * 8), seen))
    (answer,) = seen
    assert answer.usage == Usage(input_tokens=2, output_tokens=9, input_estimated=True, output_estimated=False)


def test_a_bare_completion_has_estimated_usage_and_no_model_time_or_provider():
    seen: list[Answer] = []
    grade("Refunds take 5 days.", _watching(make_case(prompt="How long?"), seen))
    (answer,) = seen
    assert answer.usage is not None and answer.usage.input_estimated and answer.usage.output_estimated
    assert (answer.model_id, answer.elapsed_ms, answer.ttft_ms, answer.provider) == (None, None, None, None)


def test_a_plug_in_may_fail_an_answer_on_its_usage():
    def too_long(answer: Answer) -> list[str]:
        assert answer.usage is not None
        return [f"{answer.usage.output_tokens} output tokens > 5"] if answer.usage.output_tokens > 5 else []

    graded = grade(recorded(chat_body("A long answer.", usage=(10, 40))), _watching(make_case(), [], too_long))
    assert (graded.label, graded.reasons) == (Label.WRONG, ("40 output tokens > 5",))
    assert grade(recorded(chat_body("Short.", usage=(10, 2))), _watching(make_case(), [], too_long)).label is Label.RIGHT


def test_the_size_channel_still_reads_the_output_side_of_usage():
    counted = grade(recorded(chat_body("Refunds take 5 days.", usage=(31, 7))), make_case())
    assert (counted.chars, counted.tokens, counted.tokens_estimated) == (20, 7, False)
    estimated = grade(recorded(chat_body("y" * 20, usage=None)), make_case())
    assert (estimated.tokens, estimated.tokens_estimated) == (5, True)
    dropped = grade(recorded(chat_body("y" * 20), status=503), make_case())
    assert (dropped.chars, dropped.tokens, dropped.tokens_estimated, dropped.cost_usd) == (None, None, False, None)


def test_an_envelope_the_transport_labels_shows_no_assertion_anything():
    seen: list[Answer] = []
    assert grade(recorded(chat_body("x"), status=503), _watching(make_case(), seen)).label is Label.DROP
    assert seen == []
