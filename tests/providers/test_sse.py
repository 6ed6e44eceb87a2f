"""Pure unit tests of SSE framing (envelope_ci.providers.sse) and the OpenAI stream assembler (providers.openai_chat).

Wire shapes follow what real servers stream (openai-python captures, Azure's prompt-filter
chunk, llama.cpp pings, vLLM's in-stream error).
"""
from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envelope_ci.providers.openai_chat import OPENAI_CHAT, StreamAssembler, error_payload, read_reply
from envelope_ci.providers.sse import flush_sse, iter_sse_data
from tests.support.strategies import CHAT_BODY

BASE = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1727346171, "model": "gpt-4o-2024-08-06",
        "system_fingerprint": "fp_7568d46099"}


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **top: Any) -> str:
    obj: dict[str, Any] = dict(BASE)
    obj["choices"] = [{"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish}]
    obj.update(top)
    return json.dumps(obj)


def usage_chunk(completion_tokens: int = 1) -> str:
    obj = dict(BASE, choices=[], usage={"prompt_tokens": 79, "completion_tokens": completion_tokens,
                                        "total_tokens": 79 + completion_tokens})
    return json.dumps(obj)


def sse_bytes(*payloads: str, newline: bytes = b"\n") -> bytes:
    return b"".join(b"data: " + p.encode() + newline + newline for p in payloads)


def parse_all(data: bytes, step: int | None = None) -> list[str]:
    """Feed ``data`` in pieces of ``step`` bytes (all at once when None), then flush."""
    buffer = bytearray()
    out: list[str] = []
    step = step or len(data) or 1
    for i in range(0, len(data), step):
        out += iter_sse_data(buffer, data[i:i + step])
    return out + flush_sse(buffer)


# --------------------------------------------------------------------------- iter_sse_data / flush_sse
def test_complete_lines_come_out_and_blank_lines_end_events():
    buffer = bytearray()
    assert iter_sse_data(buffer, b'data: {"a":1}\n\ndata: {"b":2}\n\n') == ['{"a":1}', '{"b":2}']
    assert buffer == b""


def test_partial_line_stays_buffered_until_its_newline():
    buffer = bytearray()
    assert iter_sse_data(buffer, b'data: {"content":"Hel') == []
    assert bytes(buffer) == b'data: {"content":"Hel'
    assert iter_sse_data(buffer, b'lo"}\n') == ['{"content":"Hello"}']
    assert buffer == b""


@pytest.mark.parametrize("step", [1, 2, 3, 7, 64])
def test_any_split_of_the_byte_stream_gives_the_same_payloads(step):
    payloads = [chunk({"role": "assistant", "content": ""}), chunk({"content": "caf\u00e9 \u2014 \U0001f600"}),
                chunk(finish="stop"), usage_chunk(), "[DONE]"]
    data = b": ping\n\n" + sse_bytes(*payloads)
    assert parse_all(data, step) == payloads


def test_multibyte_utf8_split_across_chunks_is_decoded_whole():
    data = 'data: {"content":"\u00e9\u20ac"}\n'.encode()
    cut = data.index("\u20ac".encode()) + 1  # inside the 3-byte euro sign
    buffer = bytearray()
    assert iter_sse_data(buffer, data[:cut]) == []
    assert iter_sse_data(buffer, data[cut:]) == ['{"content":"\u00e9\u20ac"}']


def test_crlf_line_endings():
    data = sse_bytes(chunk({"content": "x"}), "[DONE]", newline=b"\r\n")
    assert parse_all(data) == [chunk({"content": "x"}), "[DONE]"]
    assert all(not p.endswith("\r") for p in parse_all(data, 5))


def test_comments_and_other_fields_are_ignored():
    data = b": ping\n\nevent: message\nid: 7\nretry: 100\ndata: {\"a\":1}\n\n:\n\n"
    assert parse_all(data) == ['{"a":1}']


def test_a_field_is_a_payload_only_when_the_caller_names_it():
    line = b'error: {"code":400,"message":"too long"}\n\n'
    assert iter_sse_data(bytearray(), line) == []  # generic framing: an unknown field
    assert iter_sse_data(bytearray(), line, {"error": lambda v: "<" + v + ">"}) == ['<{"code":400,"message":"too long"}>']
    assert iter_sse_data(bytearray(), b"event: error\n", {"error": str.upper}) == []  # a field's value, not its name


def test_data_without_a_space_after_the_colon():
    assert parse_all(b'data:{"a":1}\n') == ['{"a":1}']


def test_done_without_trailing_newline_is_flushed():
    buffer = bytearray()
    assert iter_sse_data(buffer, sse_bytes(chunk(finish="stop")) + b"data: [DONE]") == [chunk(finish="stop")]
    assert flush_sse(buffer) == ["[DONE]"]
    assert buffer == b"" and flush_sse(buffer) == []


def test_flush_ignores_a_leftover_that_is_not_data():
    buffer = bytearray(b": ping")
    assert flush_sse(buffer) == []
    assert buffer == b""


# --------------------------------------------------------------------------- StreamAssembler
def feed_all(*payloads: str) -> tuple[StreamAssembler, list[bool]]:
    a = StreamAssembler()
    return a, [a.feed(p) for p in payloads]


def test_content_stream_assembles_to_a_completion_body():
    a, ttft_events = feed_all(
        chunk({"role": "assistant", "content": "", "refusal": None}),
        chunk({"content": "Hello"}), chunk({"content": ", world"}),
        chunk(finish="stop"), usage_chunk(3), "[DONE]",
    )
    assert ttft_events == [True, True, True, True, False, False]  # the role chunk is the TTFT event
    assert a.done and a.complete
    body = a.body()
    assert body["model"] == "gpt-4o-2024-08-06"
    assert body["id"] == "chatcmpl-1" and body["system_fingerprint"] == "fp_7568d46099"
    assert body["choices"] == [{"index": 0, "message": {"role": "assistant", "content": "Hello, world", "refusal": None},
                                "finish_reason": "stop"}]
    assert body["usage"]["completion_tokens"] == 3


def test_the_openai_truncated_capture():
    # openai-python .inline-snapshot 4cc50a61...: content '{"' then finish length, usage, [DONE]
    a, _ = feed_all(chunk({"role": "assistant", "content": "", "refusal": None}), chunk({"content": '{"'}),
                    chunk(finish="length"), usage_chunk(1), "[DONE]")
    body = a.body()
    assert body["choices"][0]["message"]["content"] == '{"'
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 1


def test_done_alone_is_not_complete():
    a, _ = feed_all(chunk({"role": "assistant", "content": ""}), chunk({"content": "The answer is"}), "[DONE]")
    assert a.done and not a.complete
    assert a.body()["choices"][0]["finish_reason"] is None


def test_tool_call_argument_deltas_are_merged_by_index():
    a, _ = feed_all(
        chunk({"role": "assistant", "content": None, "refusal": None, "tool_calls": [
            {"index": 0, "id": "call_A", "type": "function", "function": {"name": "get_weather", "arguments": ""}},
        ]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]}),
        chunk({"tool_calls": [{"index": 1, "id": "call_B", "type": "function", "function": {"name": "get_time", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 1, "function": {"arguments": '{"tz":"UTC"}'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Edinburgh"}'}}]}),
        chunk(finish="tool_calls"), "[DONE]",
    )
    message = a.body()["choices"][0]["message"]
    assert message["content"] is None  # content null with tool calls: the model still spoke
    assert [c["id"] for c in message["tool_calls"]] == ["call_A", "call_B"]
    assert message["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": '{"city":"Edinburgh"}'}
    assert message["tool_calls"][1]["function"] == {"name": "get_time", "arguments": '{"tz":"UTC"}'}
    assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == {"city": "Edinburgh"}
    assert a.body()["choices"][0]["finish_reason"] == "tool_calls"


def test_tool_call_without_index_or_with_odd_fields_does_not_crash():
    a, _ = feed_all(
        chunk({"tool_calls": [{"index": None, "id": "c1", "function": {"name": "f", "arguments": None}}]}),
        chunk({"tool_calls": [{"function": {"arguments": "{}"}}, "junk", {"index": 0, "function": "not a dict"}]}),
        chunk(finish="tool_calls"),
    )
    calls = a.body()["choices"][0]["message"]["tool_calls"]
    assert calls == [{"type": "function", "function": {"name": "f", "arguments": "{}"}, "id": "c1"}]


def test_refusal_deltas_are_joined():
    a, _ = feed_all(chunk({"role": "assistant", "content": None, "refusal": ""}), chunk({"refusal": "I'm"}),
                    chunk({"refusal": " sorry"}), chunk(finish="stop"), "[DONE]")
    message = a.body()["choices"][0]["message"]
    assert message["refusal"] == "I'm sorry"
    assert message["content"] is None


def test_empty_refusal_stays_null():
    a, _ = feed_all(chunk({"role": "assistant", "content": "ok", "refusal": ""}), chunk(finish="stop"))
    assert a.body()["choices"][0]["message"]["refusal"] is None


def test_error_inside_a_200_stream_becomes_an_error_body():
    err = {"message": "Internal server error", "type": "InternalServerError", "param": None, "code": 500}
    a, _ = feed_all(chunk({"role": "assistant", "content": ""}), chunk({"content": "Partial"}),
                    json.dumps({"error": err}), "[DONE]")
    assert a.body()["error"] == err


def test_azure_prefilter_chunk_is_not_a_choice_and_its_empty_model_is_skipped():
    azure = json.dumps({"choices": [], "created": 0, "id": "", "model": "", "object": "",
                        "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": {}}]})
    a = StreamAssembler()
    assert a.feed(azure) is False
    assert a.model is None
    assert a.feed(chunk({"role": "assistant", "content": ""}, model="served-x")) is True
    a.feed(chunk({"content": "Hi"}, model="other-later"))
    a.feed(chunk(finish="stop"))
    body = a.body()
    assert body["model"] == "served-x"  # the first non-empty model
    assert body["choices"][0]["message"]["content"] == "Hi"


def test_llamacpp_empty_model_in_chunks_then_a_name():
    a, _ = feed_all(chunk({"role": "assistant", "content": None}, model=""), chunk({"content": "x"}, model="llama-3"))
    assert a.body()["model"] == "llama-3"


def test_no_choice_chunks_gives_choices_empty():
    a, events = feed_all(usage_chunk(0), "[DONE]")
    assert events == [False, False]
    body = a.body()
    assert body["choices"] == []
    assert "usage" in body


def test_null_content_role_chunk_keeps_content_null():
    a, _ = feed_all(chunk({"role": "assistant", "content": None}), chunk(finish="stop"))
    assert a.body()["choices"][0]["message"]["content"] is None


def test_bad_lines_are_counted_not_fatal():
    a, events = feed_all("{not json", "[1, 2]", chunk({"content": "ok"}), chunk(finish="stop"))
    assert events == [False, False, True, True]
    assert a.bad_lines == 2
    assert a.body()["choices"][0]["message"]["content"] == "ok"


def test_done_with_surrounding_spaces():
    a = StreamAssembler()
    a.feed(" [DONE] ")
    assert a.done


def test_llama_cpp_error_field_is_an_error_not_an_empty_stream():
    """llama.cpp before 2025-09: an `error:` SSE field, then [DONE]."""
    from envelope_ci.grading.envelope import classify, transport_label
    from envelope_ci.model import Envelope, Label
    from envelope_ci.transport.retry import retry_verdict

    stream = (b'error: {"code":400,"message":"the request exceeds the available context size. try increasing the context size '
              b'or enable context shift","type":"invalid_request_error"}\n\ndata: [DONE]\n\n')
    assembler = StreamAssembler()
    for data in iter_sse_data(bytearray(), stream, OPENAI_CHAT.sse_fields):
        assembler.feed(data)
    env = Envelope(http_status=200, elapsed_ms=5.0, body=assembler.body(), stream_complete=assembler.complete)
    judged = classify(env)
    assert judged.label is Label.DROP and "exceeds the available context size" in judged.reasons[0]
    assert transport_label(env) is Label.DROP
    retry, why = retry_verdict(env, transport_label(env))
    assert retry is False and "400" in why


# -- any bytes: framed and assembled, never an exception ----------------------------------------------

SSE_LINES = st.one_of(
    st.binary(max_size=60),
    CHAT_BODY.map(lambda chunk: b"data: " + json.dumps(chunk).encode()),
    st.sampled_from([b"data: [DONE]", b": ping", b"event: x", b"error: {\"message\": \"boom\"}", b"error: not json",
                     b"data:", b"", b"\r"]),
)


@settings(max_examples=200)
@given(lines=st.lists(SSE_LINES, max_size=12), cuts=st.lists(st.integers(0, 2000), max_size=6),
       ends=st.sampled_from([b"\n", b"\r\n"]))
def test_sse_framing_and_the_stream_assembler_take_any_bytes(lines, cuts, ends):
    stream = ends.join(lines)
    pieces = [stream[a:b] for a, b in zip([0, *sorted(cuts)], [*sorted(cuts), len(stream)], strict=True)]
    buffer, payloads = bytearray(), []
    for piece in pieces:
        payloads += iter_sse_data(buffer, piece, OPENAI_CHAT.sse_fields)
    payloads += flush_sse(buffer)
    assembler = OPENAI_CHAT.new_stream()
    for payload in payloads:
        assert isinstance(payload, str)
        assembler.feed(payload)
    body = assembler.body()
    json.dumps(body)  # the assembled body is recorded as JSON
    read_reply(body)
    assert isinstance(assembler.complete, bool)


@settings(max_examples=200)
@given(text=st.text(max_size=80))
def test_an_error_line_becomes_an_error_payload(text):
    assert "error" in json.loads(error_payload(text))
