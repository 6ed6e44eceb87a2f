"""``openai-responses`` against the Responses API's real wire shapes that test_openai_responses.py leaves out:
reasoning items, several output_text parts, a refusal part streamed, function-call arguments streamed then done,
each incomplete reason plain and streamed, ``response.failed`` and ``error`` events after the answer, a stream cut
before its terminal event, usage from the terminal response.

Each shape is cited where it is written. The live tests run the real CLI against the fake server on 127.0.0.1.
"""
from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from envelope_ci.grading.envelope import STREAM_CUT, EnvelopeClass
from envelope_ci.model import Label
from envelope_ci.providers.openai_responses import OPENAI_RESPONSES, ResponseStream
from tests.support.fake_openai import Behaviour
from tests.support.fake_responses import FakeResponses, scripted
from tests.support.provider_suites import fed, judged, live_labels

PROVIDER = "openai-responses"
USAGE = {"input_tokens": 31, "output_tokens": 7, "total_tokens": 38}


def _response(output: list[dict[str, Any]] | None, status: str = "completed", reason: str | None = None,
              error: dict[str, Any] | None = None, usage: dict[str, Any] | None = USAGE) -> dict[str, Any]:
    """A Response object (openai-python src/openai/types/responses/response.py: ``status``, ``incomplete_details``
    with reason ``max_output_tokens`` or ``content_filter``, ``error``, ``output``, ``usage``); ``output=None``
    leaves the key out, as a terminal event may (src/openai/lib/streaming/responses/_responses.py recovers it)."""
    body: dict[str, Any] = {"id": "resp_01", "object": "response", "created_at": 1741290958, "status": status,
                            "error": error, "incomplete_details": {"reason": reason} if reason else None,
                            "model": "gpt-x", "usage": usage}
    if output is not None:
        body["output"] = output
    return body


def _message(*parts: dict[str, Any]) -> dict[str, Any]:
    """A ``message`` output item (openai-python src/openai/types/responses/response_output_message.py)."""
    return {"type": "message", "id": "msg_01", "status": "completed", "role": "assistant", "content": list(parts)}


def _text(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": []}


# A reasoning item: a summary and, from open-weight servers, reasoning_text content
# (openai-python src/openai/types/responses/response_reasoning_item.py).
REASONING = {"type": "reasoning", "id": "rs_01", "summary": [{"type": "summary_text", "text": "The capital is Paris."}],
             "content": [{"type": "reasoning_text", "text": "The capital is Paris."}]}
# A function call, its arguments one JSON string
# (openai-python src/openai/types/responses/response_function_tool_call.py).
CALL = {"type": "function_call", "id": "fc_01", "call_id": "call_01", "name": "get_weather",
        "arguments": '{"city":"Edinburgh"}', "status": "completed"}


class _Events:
    """Events as the Responses stream sends them, each with its ``sequence_number``
    (https://developers.openai.com/api/reference/resources/responses/streaming-events.md; the union of event types in
    openai-python src/openai/types/responses/response_stream_event.py)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self._seq = itertools.count()

    def add(self, kind: str, **payload: Any) -> _Events:
        self.events.append({"type": kind, "sequence_number": next(self._seq), **payload})
        return self

    def created(self) -> _Events:
        return self.add("response.created", response=_response([], "in_progress", usage=None)).add(
            "response.in_progress", response=_response([], "in_progress", usage=None))

    def item(self, index: int, item: dict[str, Any]) -> _Events:
        """``output_item.added`` (empty), then the item's content streamed part by part, then ``output_item.done``."""
        empty = {**item, "status": "in_progress", **({"content": []} if "content" in item else {}),
                 **({"arguments": ""} if "arguments" in item else {})}
        self.add("response.output_item.added", output_index=index, item=empty)
        if item["type"] == "function_call":
            self.arguments(index, item["arguments"][:9], item["arguments"][9:])
        for part_index, part in enumerate((item.get("content") or []) if item["type"] == "message" else []):
            self.part(index, part_index, part)
        return self.add("response.output_item.done", output_index=index, item=item)

    def part(self, index: int, part_index: int, part: dict[str, Any]) -> _Events:
        """``content_part.added``, the text's deltas, ``.done`` with the whole text, ``content_part.done``."""
        kind, key = ("response.refusal", "refusal") if part["type"] == "refusal" else ("response.output_text", "text")
        where = {"item_id": "msg_01", "output_index": index, "content_index": part_index}
        self.add("response.content_part.added", **where, part={**part, key: ""})
        words = part[key].split(" ")
        for n, word in enumerate(words):
            self.add(f"{kind}.delta", **where, delta=word if n == len(words) - 1 else word + " ")
        self.add(f"{kind}.done", **where, **{key: part[key]})
        return self.add("response.content_part.done", **where, part=part)

    def arguments(self, index: int, *pieces: str) -> _Events:
        """``function_call_arguments.delta`` per piece, then ``.done`` with them all
        (src/openai/types/responses/response_function_call_arguments_done_event.py)."""
        for piece in pieces:
            self.add("response.function_call_arguments.delta", item_id="fc_01", output_index=index, delta=piece)
        return self.add("response.function_call_arguments.done", item_id="fc_01", output_index=index,
                        arguments="".join(pieces))


def _stream(events: list[dict[str, Any]]) -> ResponseStream:
    return fed(ResponseStream(), events)


def _judged(stream: ResponseStream) -> EnvelopeClass:
    return judged(stream, PROVIDER)


def _row(tmp_path: Path, behaviour: Behaviour, *args: str, case_id: str = "plain") -> dict[str, Any]:
    """The report row of one case planted with ``behaviour``, from a live run of the CLI against the fake server."""
    with FakeResponses() as fake:
        _, report = live_labels(tmp_path, fake, PROVIDER, *args, table=((case_id, behaviour, ""),))
    return dict(report["cases"][0])


def _both(output: list[dict[str, Any]], status: str = "completed", reason: str | None = None) -> Behaviour:
    """The same response, plain or streamed: its items' events, then the terminal event carrying it."""
    events = _Events().created()
    for index, item in enumerate(output):
        events.item(index, item)
    terminal = {"completed": "response.completed", "incomplete": "response.incomplete"}[status]
    final = _response(output, status, reason)
    return scripted(events.add(terminal, response=final).events, final)


STREAMED = pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])


@STREAMED
def test_reasoning_items_never_become_answer_text(tmp_path: Path, stream: bool) -> None:
    """The reasoning says Paris, the message Rome: graded on the message alone, so wrong."""
    row = _row(tmp_path, _both([REASONING, _message(_text("The capital is Rome."))]), *(["--stream"] if stream else []))
    assert row["label"] == "wrong"


def test_reasoning_deltas_never_become_answer_text() -> None:
    """A reasoning item streamed (summary and reasoning_text deltas) before the message, no output on the terminal
    event: the text is the message's (response_reasoning_summary_text_delta_event.py,
    response_reasoning_text_delta_event.py in openai-python src/openai/types/responses/)."""
    where = {"item_id": "rs_01", "output_index": 0}
    events = (_Events().created()
              .add("response.output_item.added", output_index=0,
                   item={"type": "reasoning", "id": "rs_01", "summary": []})
              .add("response.reasoning_summary_part.added", **where, summary_index=0,
                   part={"type": "summary_text", "text": ""})
              .add("response.reasoning_summary_text.delta", **where, summary_index=0, delta="Paris")
              .add("response.reasoning_text.delta", **where, content_index=0, delta="Paris")
              .add("response.output_item.added", output_index=1,
                   item={"type": "message", "id": "msg_01", "status": "in_progress", "role": "assistant",
                         "content": []})
              .add("response.output_text.delta", item_id="msg_01", output_index=1, content_index=0, delta="Rome.")
              .add("response.completed", response=_response(None)))
    reply = OPENAI_RESPONSES.read_reply(_stream(events.events).body())
    assert reply is not None and reply.content == "Rome."


@STREAMED
def test_several_output_text_parts_are_one_answer_in_order(tmp_path: Path, stream: bool) -> None:
    behaviour = _both([_message(_text("The capital "), _text("is Paris."))])
    assert _row(tmp_path, behaviour, *(["--stream"] if stream else []))["label"] == "right"


def test_several_parts_streamed_without_a_final_output_are_put_together_from_their_deltas() -> None:
    """No ``output_item.done`` and a terminal event without ``output``: the deltas alone carry the answer."""
    events = _Events().created().add("response.output_item.added", output_index=0, item={
        "type": "message", "id": "msg_01", "status": "in_progress", "role": "assistant", "content": []})
    events.part(0, 0, _text("The capital ")).part(0, 1, _text("is Paris."))
    stream = _stream(events.add("response.completed", response=_response(None)).events)
    judged = _judged(stream)
    assert judged.label is None and judged.reply is not None and judged.reply.content == "The capital is Paris."


def test_a_streamed_refusal_part_is_graded_as_the_refusal_never_empty(tmp_path: Path) -> None:
    """``response.refusal.delta`` / ``.done``
    (openai-python src/openai/types/responses/response_refusal_delta_event.py)."""
    events = _Events().created().add("response.output_item.added", output_index=0, item={
        "type": "message", "id": "msg_01", "status": "in_progress", "role": "assistant", "content": []})
    events.part(0, 0, {"type": "refusal", "refusal": "I can't help with that."})
    events.add("response.completed", response=_response(None))
    judged = _judged(_stream(events.events))
    assert judged.label is None and judged.reply is not None
    assert (judged.reply.content, judged.reply.refusal) == (None, "I can't help with that.")
    row = _row(tmp_path, scripted(events.events), "--stream")
    assert row["label"] == "wrong" and "model refused: I can't help with that." in row["reasons"]


def test_streamed_function_call_arguments_are_whole_once_not_doubled_by_their_done_event(tmp_path: Path) -> None:
    events = _Events().created().add("response.output_item.added", output_index=0,
                                     item={**CALL, "arguments": "", "status": "in_progress"})
    events.arguments(0, '{"city"', ':"Edin', 'burgh"}').add("response.completed", response=_response(None))
    reply = OPENAI_RESPONSES.read_reply(_stream(events.events).body())
    assert reply is not None and reply.tool_calls == ({"id": "call_01", "type": "function",
                                                       "function": {"name": "get_weather",
                                                                    "arguments": '{"city":"Edinburgh"}'}},)
    assert _row(tmp_path, _both([CALL]), "--stream", case_id="tool-call")["label"] == "right"


# (output, incomplete_details.reason, label): openai-python src/openai/types/responses/response.py IncompleteDetails
INCOMPLETE = [
    ([_message(_text("The capital is"))], "max_output_tokens", "truncated"),
    # a reasoning model that spent every token thinking said nothing yet: cut, not empty
    ([REASONING], "max_output_tokens", "truncated"),
    ([], "content_filter", "wrong"),  # the policy answered: graded, never empty
    ([_message(_text("The capital is Paris"))], "content_filter", "right"),  # graded on what it said before
]


@STREAMED
@pytest.mark.parametrize(("output", "reason", "label"), INCOMPLETE, ids=["cut", "cut-reasoning", "filtered",
                                                                         "filtered-after-text"])
def test_each_incomplete_reason_gets_its_label_plain_or_streamed(tmp_path: Path, stream: bool,
                                                                 output: list[dict[str, Any]], reason: str,
                                                                 label: str) -> None:
    row = _row(tmp_path, _both(output, "incomplete", reason), *(["--stream"] if stream else []))
    assert (row["label"], row["finish_reason"]) == (label, reason)


def test_a_response_failed_after_the_whole_answer_is_a_drop_in_its_errors_words(tmp_path: Path) -> None:
    """``response.failed`` carries the Response with ``status: failed`` and its ``error``
    (openai-python src/openai/types/responses/response_failed_event.py, response_error.py)."""
    events = _Events().created().item(0, _message(_text("The capital is Paris.")))
    events.add("response.failed", response=_response([], "failed", error={"code": "server_error",
                                                                          "message": "The model failed"}))
    row = _row(tmp_path, scripted(events.events), "--stream")
    assert row["label"] == "drop" and row["reasons"][0] == "HTTP 200 carrying an error: The model failed | server_error"


# An ``error`` event: flat as openai-python documents it (src/openai/types/responses/response_error_event.py), or
# with the fields nested in ``error`` as the API has been seen to send it (github.com/openai/openai-dotnet/issues/881).
ERROR_EVENTS = {
    "flat": {"code": "rate_limit_exceeded", "message": "Too Many Requests", "param": None},
    "nested": {"error": {"type": "too_many_requests", "code": "rate_limit_exceeded", "message": "Too Many Requests",
                         "param": None}},
}


@pytest.mark.parametrize("shape", sorted(ERROR_EVENTS))
def test_an_error_event_after_the_whole_answer_is_a_drop_in_the_servers_words(tmp_path: Path, shape: str) -> None:
    events = _Events().created().item(0, _message(_text("The capital is Paris."))).add("error", **ERROR_EVENTS[shape])
    row = _row(tmp_path, scripted(events.events), "--stream")
    assert row["label"] == "drop"
    assert row["reasons"][0].startswith("HTTP 200 carrying an error: Too Many Requests | ")


def test_a_stream_cut_after_the_whole_answer_but_before_its_terminal_event_is_a_drop(tmp_path: Path) -> None:
    """Every item done, no ``response.completed`` / ``.incomplete`` / ``.failed``: the server cut the stream."""
    events = _Events().created().item(0, _message(_text("The capital is Paris."))).events
    assert not _stream(events).complete
    row = _row(tmp_path, scripted(events), "--stream")
    assert row["label"] == "drop" and row["reasons"][0] == STREAM_CUT


def test_usage_is_read_from_the_terminal_response_not_the_created_one(tmp_path: Path) -> None:
    """``response.created`` has no usage yet; the terminal Response counts ``input_tokens`` and ``output_tokens``
    (openai-python src/openai/types/responses/response_usage.py)."""
    behaviour = _both([_message(_text("The capital is Paris."))])
    reply = OPENAI_RESPONSES.read_reply(_stream(behaviour.body["events"]).body())
    assert reply is not None and (reply.prompt_tokens, reply.completion_tokens) == (31, 7)
    row = _row(tmp_path, behaviour, "--stream")
    assert (row["label"], row["tokens"], row["tokens_estimated"]) == ("right", 7, False)


def test_an_error_event_then_response_failed_stays_a_drop_in_the_error_events_words() -> None:
    """The server may send both (an ``error`` event, then the failed Response): the first words are kept."""
    events = _Events().created().add("error", **ERROR_EVENTS["flat"]).add(
        "response.failed", response=_response([], "failed", error={"code": "server_error", "message": "boom"}))
    judged = _judged(_stream(events.events))
    assert judged.label is Label.DROP and judged.reasons == (
        "HTTP 200 carrying an error: Too Many Requests | rate_limit_exceeded",)
