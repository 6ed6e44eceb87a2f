"""``anthropic-messages`` against the Messages API's real wire shapes that test_anthropic_messages.py leaves out:
thinking blocks, pings, error events after the answer, tool input streamed in pieces, several text blocks, every
stop reason through a stream, where usage is counted, a stream that stops short of ``message_stop``, a streamed 529.

Each shape is cited where it is written. The live tests run the real CLI against the fake server on 127.0.0.1.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from envelope_ci.grading.envelope import STREAM_CUT, EnvelopeClass, classify
from envelope_ci.model import Envelope, Label
from envelope_ci.providers.anthropic_messages import ANTHROPIC_MESSAGES, MessageStream
from tests.support.fake_anthropic import FakeAnthropic, scripted
from tests.support.fake_openai import Behaviour
from tests.support.provider_suites import fed, judged, live_labels

PROVIDER = "anthropic-messages"
# "Event streams may also include any number of ping events": docs.claude.com/en/api/messages-streaming
PING = {"type": "ping"}
# An error event in a 200 stream, "which would normally correspond to an HTTP 529": the same page.
OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


def _start(input_tokens: int = 25, **usage: int) -> dict[str, Any]:
    """``message_start``: a Message with empty content; its usage counts the input, output_tokens a placeholder
    (docs.claude.com/en/api/messages-streaming; the captures in deepnoodle-ai/dive providers/anthropic/reference.md)."""
    return {"type": "message_start", "message": {
        "id": "msg_01", "type": "message", "role": "assistant", "content": [], "model": "claude-x",
        "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": 1, **usage}}}


def _text(index: int, *pieces: str) -> list[dict[str, Any]]:
    """A text block: start, one ``text_delta`` per piece, stop (docs.claude.com/en/api/messages-streaming)."""
    return [{"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
            *({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": p}}
              for p in pieces),
            {"type": "content_block_stop", "index": index}]


def _thinking(index: int, thinking: str) -> list[dict[str, Any]]:
    """A thinking block: ``thinking_delta`` then ``signature_delta`` (anthropic-sdk-python
    src/anthropic/types/raw_content_block_delta_event.py; captured in deepnoodle-ai/dive
    providers/anthropic/reference.md)."""
    return [{"type": "content_block_start", "index": index,
             "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
            {"type": "content_block_delta", "index": index, "delta": {"type": "thinking_delta", "thinking": thinking}},
            {"type": "content_block_delta", "index": index,
             "delta": {"type": "signature_delta", "signature": "ErUBCkYI"}},
            {"type": "content_block_stop", "index": index}]


def _redacted(index: int) -> list[dict[str, Any]]:
    """A ``redacted_thinking`` block: opaque ``data``, no text (anthropic-sdk-python
    src/anthropic/types/redacted_thinking_block.py)."""
    return [{"type": "content_block_start", "index": index,
             "content_block": {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"}},
            {"type": "content_block_stop", "index": index}]


def _tool(index: int, tool_id: str, name: str, *partials: str) -> list[dict[str, Any]]:
    """A tool_use block whose input arrives as ``input_json_delta`` pieces of one JSON text, the first often empty
    (docs.claude.com/en/api/messages-streaming "Input JSON delta"; deepnoodle-ai/dive
    providers/anthropic/reference.md)."""
    return [{"type": "content_block_start", "index": index,
             "content_block": {"type": "tool_use", "id": tool_id, "name": name, "input": {}}},
            *({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": p}}
              for p in partials),
            {"type": "content_block_stop", "index": index}]


def _end(stop_reason: str, output_tokens: int = 12, **usage: int) -> list[dict[str, Any]]:
    """``message_delta`` (the stop reason; cumulative usage, output_tokens always) then ``message_stop``
    (anthropic-sdk-python src/anthropic/types/message_delta_usage.py)."""
    return [{"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None},
             "usage": {"output_tokens": output_tokens, **usage}},
            {"type": "message_stop"}]


def _message(content: list[dict[str, Any]], stop_reason: str, output_tokens: int = 12) -> dict[str, Any]:
    """The body a plain call returns (platform.claude.com/docs/en/build-with-claude/handling-stop-reasons.md)."""
    return {"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-x", "content": content,
            "stop_reason": stop_reason, "stop_sequence": None,
            "usage": {"input_tokens": 25, "output_tokens": output_tokens}}


def _stream(events: list[dict[str, Any]]) -> MessageStream:
    return fed(MessageStream(), events)


def _judged(stream: MessageStream) -> EnvelopeClass:
    return judged(stream, PROVIDER)


def _row(tmp_path: Path, behaviour: Behaviour | list[Behaviour], *args: str, case_id: str = "plain",
         fake: FakeAnthropic | None = None) -> dict[str, Any]:
    """The report row of one case planted with ``behaviour`` (a list: one per attempt), from a live run of the CLI
    against ``fake`` (a fresh fake server when None)."""
    if fake is None:
        with FakeAnthropic() as fresh:
            return _row(tmp_path, behaviour, *args, case_id=case_id, fake=fresh)
    table = ((case_id, behaviour, ""),)  # live_labels plants what the table holds: a list too
    _, report = live_labels(tmp_path, fake, PROVIDER, *args, table=table)  # type: ignore[arg-type]
    return dict(report["cases"][0])


THINKING_ROME = [_start(), *_thinking(0, "The capital is Paris."), *_redacted(1), *_text(2, "The capital ", "is Rome."),
                 *_end("end_turn")]
ROME_MESSAGE = _message([{"type": "thinking", "thinking": "The capital is Paris.", "signature": "ErUBCkYI"},
                         {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
                         {"type": "text", "text": "The capital is Rome."}], "end_turn")


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_thinking_and_redacted_thinking_never_become_answer_text(tmp_path: Path, stream: bool) -> None:
    """The thinking says Paris, the answer Rome: graded on the answer alone, so wrong."""
    row = _row(tmp_path, scripted(THINKING_ROME, ROME_MESSAGE), *(["--stream"] if stream else []))
    assert row["label"] == "wrong" and row["finish_reason"] == "end_turn"
    reply = ANTHROPIC_MESSAGES.read_reply(_stream(THINKING_ROME).body() if stream else ROME_MESSAGE)
    assert reply is not None and reply.content == "The capital is Rome."


def test_pings_between_any_events_change_nothing(tmp_path: Path) -> None:
    events = [PING, _start(), PING, *_text(0, "The capital ", "is Paris.")[:2], PING,
              *_text(0, "The capital ", "is Paris.")[2:], PING, *_end("end_turn")[:1], PING, *_end("end_turn")[1:]]
    stream = _stream(events)
    assert stream.complete and stream.bad_lines == 0
    reply = ANTHROPIC_MESSAGES.read_reply(stream.body())
    assert reply is not None and reply.content == "The capital is Paris."
    assert _row(tmp_path, scripted(events), "--stream")["label"] == "right"


def test_an_overloaded_error_event_after_the_whole_answer_is_a_drop_never_right(tmp_path: Path) -> None:
    """Every word of a right answer arrived, then ``event: error``: the server says the call failed, so a drop."""
    events = [_start(), PING, *_text(0, "The capital ", "is Paris."), OVERLOADED]
    row = _row(tmp_path, scripted(events), "--stream")
    assert row["label"] == "drop"
    assert row["reasons"][0] == "HTTP 200 carrying an error: Overloaded | overloaded_error"


def test_an_error_event_after_the_stop_reason_is_a_drop_too() -> None:
    """``message_delta`` said end_turn, then the error came instead of ``message_stop``."""
    judged = _judged(_stream([_start(), *_text(0, "The capital is Paris."), *_end("end_turn")[:1], OVERLOADED]))
    assert judged.label is Label.DROP and judged.reply is None


def test_a_call_whose_stream_errs_is_retried_and_the_retry_graded(tmp_path: Path) -> None:
    with FakeAnthropic() as fake:
        events = [_start(), *_text(0, "The capital is Rome."), OVERLOADED]  # a wrong answer the server disowned
        row = _row(tmp_path, [scripted(events), Behaviour.ok("The capital is Paris.")], "--stream",
                   "--max-attempts", "2", fake=fake)
        assert fake.attempts("plain") == 2
    assert row["label"] == "right" and row["attempts"] == 2


def test_a_stream_missing_only_message_stop_is_a_drop(tmp_path: Path) -> None:
    """The whole answer and its stop reason arrived; ``message_stop`` did not: the server cut the stream."""
    events = [_start(), *_text(0, "The capital is Paris."), *_end("end_turn")[:1]]
    assert not _stream(events).complete
    row = _row(tmp_path, scripted(events), "--stream")
    assert row["label"] == "drop" and row["reasons"][0] == STREAM_CUT


def test_input_json_deltas_are_assembled_into_the_tool_calls_arguments(tmp_path: Path) -> None:
    events = [_start(), *_text(0, "Let me check."), *_tool(1, "toolu_01", "get_weather", "", '{"ci', 'ty": "Edin',
                                                         'burgh"}'), *_end("tool_use")]
    row = _row(tmp_path, scripted(events), "--stream", case_id="tool-call")
    assert row["label"] == "right" and row["finish_reason"] == "tool_use"


def test_two_tool_use_blocks_become_two_tool_calls_in_order() -> None:
    """Parallel tool use: one block after the other, each with its own pieces; one with no input at all is ``{}``."""
    stream = _stream([_start(), *_tool(0, "toolu_a", "get_weather", '{"city": ', '"Paris"}'),
                      *_tool(1, "toolu_b", "get_time", ""), *_end("tool_use")])
    reply = ANTHROPIC_MESSAGES.read_reply(stream.body())
    assert reply is not None and reply.content is None
    assert [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in reply.tool_calls] == [
        ("toolu_a", "get_weather", '{"city": "Paris"}'), ("toolu_b", "get_time", "{}")]


# Text split into several blocks, as citations split it, with a citations_delta between
# (docs.claude.com/en/api/messages-streaming "Content block delta types"; anthropic-sdk-python
# src/anthropic/lib/streaming/_messages.py, accumulate_event: citations go to the block, never its text).
CITATION = {"type": "citations_delta", "citation": {"type": "char_location", "cited_text": "Rome is the capital",
                                                    "document_index": 0, "start_char_index": 0, "end_char_index": 19}}
SPLIT = [_start(), *_text(0, "The capital "), *_text(1, "is Paris")[:2],
         {"type": "content_block_delta", "index": 1, "delta": CITATION}, *_text(1, "is Paris")[2:], *_text(2, "."),
         *_end("end_turn")]
SPLIT_MESSAGE = _message([{"type": "text", "text": "The capital "},
                          {"type": "text", "text": "is Paris", "citations": [CITATION["citation"]]},
                          {"type": "text", "text": "."}], "end_turn")


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_several_text_blocks_are_one_answer_in_order(tmp_path: Path, stream: bool) -> None:
    reply = ANTHROPIC_MESSAGES.read_reply(_stream(SPLIT).body() if stream else SPLIT_MESSAGE)
    assert reply is not None and reply.content == "The capital is Paris."
    assert _row(tmp_path, scripted(SPLIT, SPLIT_MESSAGE), *(["--stream"] if stream else []))["label"] == "right"


# The stop reasons the SDK knows (anthropic-sdk-python src/anthropic/types/stop_reason.py), and the label each gets.
STOPS = [
    ("end_turn", "The capital is Paris.", None),
    ("stop_sequence", "The capital is Paris", None),
    ("tool_use", None, None),
    ("pause_turn", "The capital is", Label.TRUNCATED),
    ("max_tokens", "The capital is", Label.TRUNCATED),
    ("model_context_window_exceeded", "The capital is", Label.TRUNCATED),
    ("refusal", "I can't help with that.", None),
]


@pytest.mark.parametrize(("stop_reason", "text", "label"), STOPS, ids=[s[0] for s in STOPS])
def test_each_stop_reason_streamed_gets_the_label_of_the_same_message_sent_whole(stop_reason: str, text: str | None,
                                                                               label: Label | None) -> None:
    blocks = _text(0, text) if text else _tool(0, "toolu_01", "get_weather", '{"city": "Paris"}')
    streamed = _judged(_stream([_start(), *blocks, *_end(stop_reason)]))
    content = [{"type": "text", "text": text}] if text else [
        {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Paris"}}]
    whole = classify(Envelope(http_status=200, body=_message(content, stop_reason), provider=PROVIDER))
    assert streamed.label is label and whole.label is label
    assert streamed.reasons == whole.reasons and streamed.reply == whole.reply


@pytest.mark.parametrize(("stop_reason", "text", "label"), [
    ("stop_sequence", "The capital is Paris", "right"),
    ("pause_turn", "The capital is Paris", "truncated"),  # the turn is not over: never graded as a whole answer
    ("max_tokens", "The capital is", "truncated"),
    ("refusal", "I can't help with that.", "wrong"),  # the policy answered: graded on what it said, never empty
])
def test_streamed_stop_reasons_reach_the_report_as_their_labels(tmp_path: Path, stop_reason: str, text: str,
                                                                label: str) -> None:
    row = _row(tmp_path, scripted([_start(), *_text(0, text), *_end(stop_reason)]), "--stream")
    assert (row["label"], row["finish_reason"]) == (label, stop_reason)


def test_output_tokens_are_message_deltas_count_not_message_starts_placeholder(tmp_path: Path) -> None:
    """``message_start`` says output_tokens 1; the count is in ``message_delta`` (cumulative). Input tokens, cache
    reads and writes included, come from ``message_start``."""
    events = [_start(25, cache_read_input_tokens=100, cache_creation_input_tokens=10),
              *_text(0, "The capital is Paris."), *_end("end_turn", output_tokens=42)]
    reply = ANTHROPIC_MESSAGES.read_reply(_stream(events).body())
    assert reply is not None and (reply.prompt_tokens, reply.completion_tokens) == (135, 42)
    row = _row(tmp_path, scripted(events), "--stream")
    assert (row["tokens"], row["tokens_estimated"]) == (42, False)


def test_cumulative_input_tokens_in_message_delta_replace_message_starts() -> None:
    """``message_delta`` usage may carry every count, each cumulative (anthropic-sdk-python
    src/anthropic/types/message_delta_usage.py): the SDK keeps the last (src/anthropic/lib/streaming/_messages.py)."""
    events = [_start(25), *_text(0, "Paris."), *_end("end_turn", output_tokens=9, input_tokens=30,
                                                   cache_read_input_tokens=5)]
    reply = ANTHROPIC_MESSAGES.read_reply(_stream(events).body())
    assert reply is not None and (reply.prompt_tokens, reply.completion_tokens) == (35, 9)


def test_a_streamed_request_answered_529_is_retried_then_graded(tmp_path: Path) -> None:
    """529 ``overloaded_error`` before the stream began, in the error shape with its ``request_id``
    (https://docs.llmgateway.io/troubleshooting/anthropic-529-overloaded; the body's request_id:
    https://learn.microsoft.com/zh-cn/microsoft-cloud/dev/dev-proxy/concepts/anthropic-529-overloaded-error)."""
    busy = Behaviour.status(529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"},
                                  "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy"})
    with FakeAnthropic() as fake:
        row = _row(tmp_path, [busy, Behaviour.ok("The capital is Paris.")], "--stream", "--max-attempts", "2",
                   fake=fake)
        assert fake.attempts("plain") == 2 and all(r.body.get("stream") is True for r in fake.requests("plain"))
    assert row["label"] == "right"
    judged = classify(Envelope(http_status=529, body=busy.body, provider=PROVIDER))
    assert judged.label is Label.DROP and judged.reasons == ("HTTP 529 (transient): Overloaded | overloaded_error",)
