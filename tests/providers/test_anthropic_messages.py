"""``anthropic-messages``: the request, auth, label table, streams, errors, retries, rate-limit headers, usage and
recordings, as Anthropic's Messages API documents them (docs/providers.md)."""
from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import pytest

from envelope_ci.grading.envelope import classify
from envelope_ci.model import Envelope, Label
from envelope_ci.providers.anthropic_messages import ANTHROPIC_MESSAGES, MessageStream, rate_limits, seconds_until
from envelope_ci.transport.retry_after import rate_limit, rate_limit_reset_s
from tests.support.fake_anthropic import FakeAnthropic, overloaded, rate_limited, ratelimit_headers
from tests.support.fake_openai import Behaviour
from tests.support.provider_suites import WEATHER_TOOL, live_labels
from tests.support.suites import make_case, make_suite, run_report

KEY = "sk-ant-test-key-123"


def _message(content: list[dict[str, Any]], stop_reason: str | None) -> Envelope:
    body = {"type": "message", "role": "assistant", "model": "claude-x", "content": content,
            "stop_reason": stop_reason, "usage": {"input_tokens": 11, "output_tokens": 7}}
    return Envelope(http_status=200, body=body, provider="anthropic-messages")


TEXT = [{"type": "text", "text": "Paris."}]


@pytest.mark.parametrize(("content", "stop_reason", "label"), [
    (TEXT, "end_turn", None),
    (TEXT, "stop_sequence", None),
    ([{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Edinburgh"}}], "tool_use", None),
    (TEXT, "pause_turn", Label.TRUNCATED),  # a paused turn is unfinished: part of an answer, never the whole
    ([{"type": "text", "text": '{"capital": "Par'}], "max_tokens", Label.TRUNCATED),
    (TEXT, "model_context_window_exceeded", Label.TRUNCATED),
    ([], "refusal", None),  # the policy answered: graded (on no text), never empty
    (TEXT, "refusal", None),
    ([], "end_turn", Label.EMPTY),
    ([{"type": "text", "text": "  "}], "end_turn", Label.EMPTY),
])
def test_every_stop_reason_has_its_label(content: list[dict[str, Any]], stop_reason: str, label: Label | None) -> None:
    judged = classify(_message(content, stop_reason))
    assert judged.label is label
    if stop_reason == "max_tokens":
        assert judged.reasons == ("stop_reason is 'max_tokens' (cut before its end)",)
    if stop_reason == "refusal":
        assert "stop_reason is 'refusal' (the provider's policy answered)" in judged.reasons


@pytest.mark.parametrize(("status", "body", "reason"), [
    (529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
     "HTTP 529 (transient): Overloaded | overloaded_error"),
    (400, {"type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens: Field required"}},
     "HTTP 400 (request rejected): max_tokens: Field required | invalid_request_error"),
    (200, {"type": "error", "error": {"type": "api_error", "message": "boom"}}, "HTTP 200 carrying an error: boom"),
])
def test_errors_are_drops_in_anthropics_words(status: int, body: dict[str, Any], reason: str) -> None:
    judged = classify(Envelope(http_status=status, body=body, provider="anthropic-messages"))
    assert judged.label is Label.DROP and judged.reasons[0].startswith(reason)


def test_a_tool_use_block_is_the_tool_call_the_assertion_grades() -> None:
    reply = ANTHROPIC_MESSAGES.read_reply(_message(
        [{"type": "text", "text": "Checking."},
         {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Édimbourg"}}], "tool_use").body)
    assert reply is not None and reply.content == "Checking."
    assert reply.tool_calls == ({"id": "toolu_1", "type": "function",
                                 "function": {"name": "get_weather", "arguments": '{"city": "Édimbourg"}'}},)
    assert (reply.prompt_tokens, reply.completion_tokens) == (11, 7)


def test_the_request_puts_system_apart_sends_max_tokens_and_tools_in_anthropics_shape() -> None:
    case = make_case(messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather?"}],
                     tools=[WEATHER_TOOL], tool_choice="required", stop="END", response_format={"type": "json_object"})
    body = ANTHROPIC_MESSAGES.request_body(case, "claude-x", 0.0, stream=True)
    assert body["system"] == "Be brief." and body["messages"] == [{"role": "user", "content": "Weather?"}]
    assert body["max_tokens"] == 4096 and body["stream"] is True and body["stop_sequences"] == ["END"]
    assert body["tools"] == [{"name": "get_weather", "description": "The weather in a city.",
                              "input_schema": WEATHER_TOOL["function"]["parameters"]}]
    assert body["tool_choice"] == {"type": "any"} and "response_format" not in body


def test_a_case_max_tokens_is_sent_as_given() -> None:
    assert ANTHROPIC_MESSAGES.request_body(make_case(max_tokens=12), "m", 0.0, False)["max_tokens"] == 12


@pytest.mark.parametrize("base", ["https://api.anthropic.com", "https://api.anthropic.com/", "https://api.anthropic.com/v1",
                                  "https://api.anthropic.com/v1/"])
def test_a_base_url_with_or_without_v1_is_the_same_place(base: str) -> None:
    assert ANTHROPIC_MESSAGES.url(base) == "https://api.anthropic.com/v1/messages"


def test_the_key_goes_as_x_api_key_beside_the_version_and_never_as_bearer(tmp_path: Path) -> None:
    with FakeAnthropic() as fake:
        labels, _ = live_labels(tmp_path, fake, "anthropic-messages", table=(("plain", Behaviour.ok("Paris"), "right"),))
        sent = fake.all_requests[0]
    assert labels == {"plain": "right"}
    assert sent.path == "/v1/messages" and sent.headers["x-api-key"] == "sk-test-key-123"
    assert sent.headers["anthropic-version"] == "2023-06-01" and "authorization" not in sent.headers
    assert "sk-test-key-123" not in (tmp_path / "rec.jsonl").read_text("utf-8")


def test_a_base_url_copied_with_v1_reaches_the_messages_endpoint(tmp_path: Path) -> None:
    with FakeAnthropic() as fake:
        fake.plant("plain", Behaviour.ok("Paris"))
        suite = make_suite(tmp_path, [{"id": "plain", "prompt": "[[plain]]", "assert": [{"type": "contains", "value": "Paris"}]}])
        _, report = run_report(suite, tmp_path / "out", "--base-url", fake.base_url + "/v1", "--model", "m",
                               "--provider", "anthropic-messages")
    assert report is not None and report["cases"][0]["label"] == "right"


def _events(*events: dict[str, Any]) -> MessageStream:
    stream = MessageStream()
    for event in events:
        stream.feed(json.dumps(event))
    return stream


START = {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [],
                                               "model": "claude-x", "usage": {"input_tokens": 9, "output_tokens": 1}}}


def test_a_stream_is_assembled_into_the_message_a_plain_call_returns() -> None:
    stream = _events(START, {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                     {"type": "ping"},
                     {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Par"}},
                     {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "is"}},
                     {"type": "content_block_start", "index": 1,
                      "content_block": {"type": "tool_use", "id": "t1", "name": "f", "input": {}}},
                     {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta",
                                                                           "partial_json": '{"a": '}},
                     {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta",
                                                                           "partial_json": "1}"}},
                     {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 5}},
                     {"type": "message_stop"})
    assert stream.complete
    reply = ANTHROPIC_MESSAGES.read_reply(stream.body())
    assert reply is not None and reply.content == "Paris" and reply.finish_reason == "tool_use"
    assert reply.tool_calls[0]["function"] == {"name": "f", "arguments": '{"a": 1}'}
    assert (reply.prompt_tokens, reply.completion_tokens) == (9, 5)


def test_a_stream_cut_before_message_stop_is_a_drop() -> None:
    stream = _events(START, {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Pa"}})
    env = Envelope(http_status=200, body=stream.body(), stream_complete=stream.complete, provider="anthropic-messages")
    assert not stream.complete and classify(env).label is Label.DROP


def test_an_error_event_in_a_stream_is_a_drop() -> None:
    stream = _events(START, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    env = Envelope(http_status=200, body=stream.body(), stream_complete=stream.complete, provider="anthropic-messages")
    assert classify(env).reasons == ("HTTP 200 carrying an error: Overloaded | overloaded_error",)


def test_529_overloaded_is_retried_like_503(tmp_path: Path) -> None:
    with FakeAnthropic() as fake:
        fake.plant("busy", [overloaded(), overloaded(), Behaviour.ok("Paris")])
        suite = make_suite(tmp_path, [{"id": "busy", "prompt": "[[busy]]", "assert": [{"type": "contains", "value": "Paris"}]}])
        # two 529s count one attempt between them, as 503s do: --max-attempts 2 still reaches the third
        _, report = run_report(suite, tmp_path / "out", "--base-url", fake.url, "--model", "m", "--provider",
                               "anthropic-messages", "--max-attempts", "2")
        assert fake.attempts("busy") == 3
    assert report is not None and report["cases"][0]["label"] == "right"


def test_a_429_waits_for_retry_after_then_answers(tmp_path: Path) -> None:
    with FakeAnthropic() as fake:
        fake.plant("limited", [rate_limited(retry_after=0.2), Behaviour.ok("Paris")])
        suite = make_suite(tmp_path, [{"id": "limited", "prompt": "[[limited]]", "assert": [{"type": "contains", "value": "Paris"}]}])
        _, report = run_report(suite, tmp_path / "out", "--base-url", fake.url, "--model", "m", "--provider",
                               "anthropic-messages")
        gap = fake.requests("limited")[1].t - fake.requests("limited")[0].t
    assert report is not None and report["cases"][0]["label"] == "right" and gap >= 0.2


def test_rfc_3339_resets_become_the_durations_the_pacer_reads() -> None:
    now = datetime.datetime(2025, 1, 15, 14, 23, 0, tzinfo=datetime.timezone.utc).timestamp()
    headers = {"anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-requests-remaining": "0",
               "anthropic-ratelimit-requests-reset": "2025-01-15T14:24:00Z",
               "anthropic-ratelimit-tokens-limit": "40000", "anthropic-ratelimit-tokens-remaining": "39000",
               "anthropic-ratelimit-tokens-reset": "2025-01-15T14:23:15.500+00:00"}
    mapped = rate_limits(headers, now)
    assert mapped == {"x-ratelimit-limit-requests": "50", "x-ratelimit-remaining-requests": "0",
                      "x-ratelimit-reset-requests": "60.000", "x-ratelimit-limit-tokens": "40000",
                      "x-ratelimit-remaining-tokens": "39000", "x-ratelimit-reset-tokens": "15.500"}
    limit = rate_limit(mapped)
    assert limit is not None and limit.size == 50 and limit.remaining == 0 and limit.next_in_s == pytest.approx(1.2)
    assert rate_limit_reset_s(mapped) == pytest.approx(1.2)  # one request refilled, not the whole minute


@pytest.mark.parametrize("value", [None, "", "soon", "2025-13-45T00:00:00Z"])
def test_an_unreadable_reset_is_no_reset(value: str | None) -> None:
    assert seconds_until(value) is None


def test_anthropic_request_limit_headers_pace_the_run(tmp_path: Path) -> None:
    """A 20-request bucket, all spent, full again in 2 s (10 a second): the next starts are spaced, not fired into
    429s."""
    with FakeAnthropic() as fake:
        fake.default = Behaviour.ok("Paris", headers=ratelimit_headers(20, 0, 2.0))
        cases = [{"id": f"c{i}", "prompt": f"[[c{i}]]", "assert": [{"type": "contains", "value": "Paris"}]} for i in range(3)]
        result, report = run_report(make_suite(tmp_path, cases), tmp_path / "out", "--base-url", fake.url, "--model",
                                    "m", "--provider", "anthropic-messages", "--concurrency", "1")
        times = sorted(r.t for r in fake.all_requests)
    assert report is not None and {c["label"] for c in report["cases"]} == {"right"}
    assert times[2] - times[1] >= 0.1  # paced at the refill rate (two requests' refill: one kept in hand)


def test_a_recording_names_its_provider_and_its_request_record_does_too(tmp_path: Path) -> None:
    with FakeAnthropic() as fake:
        live_labels(tmp_path, fake, "anthropic-messages", table=(("plain", Behaviour.ok("Paris"), "right"),))
    line = json.loads((tmp_path / "rec.jsonl").read_text("utf-8").splitlines()[0])
    assert line["recorded"]["provider"] == "anthropic-messages"
    assert line["recorded"]["request"]["provider"] == "anthropic-messages"
    assert "system" in line["recorded"]["request"]["parts"]


def test_a_repeat_no_provider_answered_does_not_change_the_fingerprint(tmp_path: Path) -> None:
    """Pinned on three good Anthropic repeats, replayed with one an internal error: the same experiment, exit 3."""
    case = {"id": "plain", "prompt": "[[plain]]", "assert": [{"type": "contains", "value": "Paris"}]}
    suite = make_suite(tmp_path, [case])
    with FakeAnthropic() as fake:
        fake.plant("plain", Behaviour.ok("Paris"))
        pinned, _ = run_report(suite, tmp_path / "pin-out", "--base-url", fake.url, "--model", "m", "--provider",
                               "anthropic-messages", "--repeats", "3", "--record", tmp_path / "rec.jsonl",
                               "--lane", "adjudication", "--write-pins")
    assert pinned.code == 0, pinned.err
    lines = [json.loads(line) for line in (tmp_path / "rec.jsonl").read_text("utf-8").splitlines()]
    lines[1]["recorded"] = {"error": "envelope-ci internal error: KeyError: 'x'"}  # as an older run recorded it
    (tmp_path / "rec.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines), "utf-8")
    replayed, report = run_report(suite, tmp_path / "out", "--replay", tmp_path / "rec.jsonl", "--repeats", "3")
    assert report is not None, replayed.err
    assert report["alerts"] == [], report["alerts"]
    assert replayed.code == 3, replayed.err  # inconclusive: a repeat was lost; not failed on another experiment
    assert report["cases"][0]["label"] == "right" and "provider anthropic-messages" not in replayed.out
