"""``openai-responses``: the request, the label table, output items, streams, errors and usage, as OpenAI's Responses
API documents them (docs/providers.md)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from envelope_ci.grading.envelope import classify
from envelope_ci.model import Envelope, Label
from envelope_ci.providers.openai_responses import OPENAI_RESPONSES, ResponseStream
from tests.support.fake_openai import Behaviour
from tests.support.fake_responses import FakeResponses
from tests.support.provider_suites import WEATHER_TOOL, live_labels
from tests.support.suites import make_case

TEXT = [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Paris."}]}]
CALL = [{"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city": "Edinburgh"}'}]
REFUSAL = [{"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "I can't."}]}]


def _response(output: list[dict[str, Any]], status: str = "completed", reason: str | None = None) -> Envelope:
    body = {"object": "response", "status": status, "model": "gpt-x", "output": output, "error": None,
            "incomplete_details": {"reason": reason} if reason else None,
            "usage": {"input_tokens": 12, "output_tokens": 4, "total_tokens": 16}}
    return Envelope(http_status=200, body=body, provider="openai-responses")


@pytest.mark.parametrize(("output", "status", "reason", "label"), [
    (TEXT, "completed", None, None),
    (CALL, "completed", None, None),
    (REFUSAL, "completed", None, None),  # a refusal speaks: graded, never empty
    ([{"type": "message", "content": [{"type": "output_text", "text": '{"a": '}]}], "incomplete", "max_output_tokens",
     Label.TRUNCATED),
    ([], "incomplete", "content_filter", None),  # the policy answered: graded, never empty
    ([], "completed", None, Label.EMPTY),
    # no answer however much output it holds: a drop, never graded
    (TEXT, "failed", None, Label.DROP),
    (TEXT, "cancelled", None, Label.DROP),
    # any other incomplete is a cut: a part of an answer is never graded as the whole
    (TEXT, "incomplete", None, Label.TRUNCATED),
    (TEXT, "incomplete", "some_future_reason", Label.TRUNCATED),
])
def test_every_status_has_its_label(output: list[dict[str, Any]], status: str, reason: str | None,
                                    label: Label | None) -> None:
    judged = classify(_response(output, status, reason))
    assert judged.label is label
    if reason == "max_output_tokens":
        assert judged.reasons == ("incomplete_details.reason is 'max_output_tokens' (cut before its end)",)


def test_an_unfinished_response_is_never_graded_on_its_output() -> None:
    for status in ("failed", "cancelled"):
        judged = classify(_response(TEXT, status))
        assert judged.label is Label.DROP and judged.reply is None
        assert judged.reasons == (f"HTTP 200 carrying an error: the response's status is '{status}'",)
    bare = {"object": "response", "status": "incomplete", "output": TEXT, "incomplete_details": None}
    judged = classify(Envelope(http_status=200, body=bare, provider="openai-responses"))
    assert judged.reasons == ("incomplete_details.reason is 'incomplete' (cut before its end)",)


def test_a_failed_response_and_an_http_error_are_drops() -> None:
    failed = {"object": "response", "status": "failed", "output": [],
              "error": {"code": "server_error", "message": "The model failed"}}
    assert classify(Envelope(http_status=200, body=failed, provider="openai-responses")).label is Label.DROP
    rejected = {"error": {"message": "Unknown parameter: 'stop'.", "type": "invalid_request_error"}}
    judged = classify(Envelope(http_status=400, body=rejected, provider="openai-responses"))
    assert judged.reasons == ("HTTP 400 (request rejected): Unknown parameter: 'stop'. | invalid_request_error",)


def test_output_items_become_content_tool_calls_refusal_and_usage() -> None:
    reply = OPENAI_RESPONSES.read_reply(_response(TEXT + CALL).body)
    assert reply is not None and reply.content == "Paris." and reply.finish_reason == "completed"
    assert reply.tool_calls == ({"id": "call_1", "type": "function",
                                 "function": {"name": "get_weather", "arguments": '{"city": "Edinburgh"}'}},)
    assert (reply.prompt_tokens, reply.completion_tokens) == (12, 4)
    refused = OPENAI_RESPONSES.read_reply(_response(REFUSAL).body)
    assert refused is not None and refused.refusal == "I can't." and refused.content is None


def test_the_request_uses_instructions_input_and_the_responses_names() -> None:
    case = make_case(messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather?"}],
                     tools=[WEATHER_TOOL], max_tokens=50, stop="END",
                     response_format={"type": "json_schema", "json_schema": {"name": "w", "schema": {}}})
    body = OPENAI_RESPONSES.request_body(case, "gpt-x", 0.0, stream=True)
    assert body["instructions"] == "Be brief." and body["input"] == [{"role": "user", "content": "Weather?"}]
    assert body["max_output_tokens"] == 50 and "stop" not in body and "max_tokens" not in body
    assert body["tools"] == [{"type": "function", **WEATHER_TOOL["function"]}]
    assert body["text"] == {"format": {"type": "json_schema", "name": "w", "schema": {}}}
    assert body["stream"] is True and body["store"] is False
    assert OPENAI_RESPONSES.url("https://api.openai.com/v1") == "https://api.openai.com/v1/responses"


def _events(*events: dict[str, Any]) -> ResponseStream:
    stream = ResponseStream()
    for event in events:
        stream.feed(json.dumps(event))
    return stream


CREATED = {"type": "response.created", "response": {"object": "response", "status": "in_progress", "model": "gpt-x",
                                                     "output": []}}


def test_a_stream_is_assembled_from_its_deltas_and_ends_at_a_terminal_event() -> None:
    stream = _events(CREATED,
                     {"type": "response.output_item.added", "output_index": 0,
                      "item": {"type": "message", "role": "assistant", "content": []}},
                     {"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": "Pa"},
                     {"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": "ris"},
                     {"type": "response.function_call_arguments.delta", "output_index": 1, "delta": '{"a":1}'},
                     {"type": "response.incomplete", "response": {"status": "incomplete", "model": "gpt-x",
                                                                  "incomplete_details": {"reason": "max_output_tokens"},
                                                                  "usage": {"input_tokens": 3, "output_tokens": 9}}})
    assert stream.complete
    reply = OPENAI_RESPONSES.read_reply(stream.body())
    assert reply is not None and reply.content == "Paris" and reply.finish_reason == "max_output_tokens"
    assert reply.tool_calls[0]["function"]["arguments"] == '{"a":1}' and reply.completion_tokens == 9


@pytest.mark.parametrize("content", [None, "Pa", ["Pa"], [{"type": "output_text", "text": None}],
                                     [{"type": "output_text"}], [7, {"type": "output_text", "text": 3}]])
def test_a_malformed_streamed_item_is_read_not_raised(content: Any) -> None:
    stream = _events(CREATED,
                     {"type": "response.output_item.added", "output_index": 0,
                      "item": {"type": "message", "role": "assistant", "content": content}},
                     {"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": "ris"},
                     {"type": "response.completed", "response": {"status": "completed", "model": "gpt-x"}})
    env = Envelope(http_status=200, body=stream.body(), stream_complete=stream.complete, provider="openai-responses")
    judged = classify(env)
    assert judged.label is None and judged.reply is not None and judged.reply.content in ("ris", "3ris")


def test_a_stream_cut_before_its_terminal_event_is_a_drop_and_an_error_event_too() -> None:
    cut = _events(CREATED, {"type": "response.output_text.delta", "output_index": 0, "delta": "Pa"})
    env = Envelope(http_status=200, body=cut.body(), stream_complete=cut.complete, provider="openai-responses")
    assert not cut.complete and classify(env).label is Label.DROP
    err = _events(CREATED, {"type": "error", "code": "server_error", "message": "boom", "sequence_number": 2})
    env = Envelope(http_status=200, body=err.body(), stream_complete=err.complete, provider="openai-responses")
    assert classify(env).reasons == ("HTTP 200 carrying an error: boom | server_error",)


def test_the_fake_sees_input_and_a_bearer_key_and_usage_reaches_the_report(tmp_path: Path) -> None:
    with FakeResponses() as fake:
        labels, report = live_labels(tmp_path, fake, "openai-responses", "--stream",
                                     table=(("plain", Behaviour.ok("The capital is Paris."), "right"),))
        sent = fake.all_requests[0]
    assert labels == {"plain": "right"}
    assert sent.path == "/v1/responses" and sent.headers["authorization"] == "Bearer sk-test-key-123"
    assert sent.body["instructions"] == "Answer in one sentence." and sent.body["max_output_tokens"] == 64
    row = report["cases"][0]
    assert row["tokens"] == 6 and row["tokens_estimated"] is False
    line = json.loads((tmp_path / "rec.jsonl").read_text("utf-8").splitlines()[0])
    assert line["recorded"]["provider"] == "openai-responses"
