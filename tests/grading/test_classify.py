"""The classifier: six labels from envelopes shaped as real servers send them, in the method's order."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envelope_ci.grading.assertions.json_subset import subset_mismatch
from envelope_ci.grading.envelope import TRANSIENT_STATUSES, cut_mid_value, stream_was_cut, transport_label
from envelope_ci.model import Envelope, Label
from envelope_ci.providers.openai_chat import error_message
from envelope_ci.transport.retry import retry_verdict
from tests.support.strategies import CHAT_BODY, JSON, TEXT
from tests.support.suites import (
    AZURE_FILTER_RESULTS,
    ERROR_BODIES,
    MODEL,
    chat_body,
    grade,
    make_case,
    recorded,
    tool_call,
    transport_error,
)

pytestmark = pytest.mark.usefixtures("clean_env")

# The planted example's JSON case: {"answer": 42} under a schema.
JSON_CASE = {"schema": {"type": "object", "required": ["answer"], "properties": {"answer": {"type": "integer"}}}, "expect_json": {"answer": 42}}
TEXT_CASE = {"must_include": ["Edinburgh"]}
WEATHER_SCHEMA = {
    "type": "object",
    "required": ["city", "country", "units"],
    "additionalProperties": False,
    "properties": {"city": {"type": "string"}, "country": {"type": "string"}, "units": {"enum": ["c", "f"]}},
}


def reasons_text(g) -> str:
    return " | ".join(g.reasons)


# -- the enum --------------------------------------------------------------------------------

def test_label_enum_order_values_and_transport():
    assert [label.value for label in Label] == ["drop", "empty", "truncated", "schema", "wrong", "right"]
    assert {label for label in Label if label.is_transport} == {Label.DROP, Label.EMPTY}
    for label in Label:
        assert Label(label.value) is label


# -- drop ------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "message",
    [
        "ConnectionRefusedError: [Errno 111] Connection refused",
        "ConnectionResetError: [Errno 104] Connection reset by peer",
        "ReadTimeout: no response within 30.0 s",
    ],
)
@pytest.mark.parametrize("fields", [JSON_CASE, TEXT_CASE], ids=["json-case", "text-case"])
def test_no_response_is_drop(message, fields):
    g = grade(transport_error(message, 30000.0), **fields)
    assert g.label is Label.DROP
    assert message in reasons_text(g)
    assert g.http_status is None
    assert g.chars is None and g.tokens is None and g.tokens_estimated is False
    assert g.elapsed_ms == 30000.0


@pytest.mark.parametrize(
    "status,body,needle",
    [
        (408, "", "HTTP 408"),
        (429, ERROR_BODIES["rate_limit"], "Rate limit reached"),
        (500, ERROR_BODIES["vllm_500"], "EngineCore encountered an issue"),
        (502, ERROR_BODIES["bad_gateway_html"], "502 Bad Gateway"),
        (503, ERROR_BODIES["llamacpp_loading"], "Loading model"),
        (504, None, "HTTP 504"),
    ],
)
def test_transient_statuses_are_drops(status, body, needle):
    g = grade(recorded(body, status=status, elapsed_ms=40.3), **JSON_CASE)
    assert g.label is Label.DROP
    text = reasons_text(g)
    assert f"HTTP {status}" in text and "transient" in text and needle in text
    assert g.http_status == status
    assert g.chars is None and g.tokens is None
    # HTML markup is stripped from the server's words
    assert "<" not in text


def test_transient_status_set():
    assert {408, 429, 500, 502, 503}.issubset(TRANSIENT_STATUSES)
    assert 400 not in TRANSIENT_STATUSES and 401 not in TRANSIENT_STATUSES


@pytest.mark.parametrize(
    "status,key,needles",
    [
        (400, "context_length", ["HTTP 400", "request rejected", "maximum context length is 4097 tokens", "context_length_exceeded"]),
        (401, "unauthorized", ["HTTP 401", "request rejected", "Unauthorized"]),
        (400, "vllm_flat", ["HTTP 400", "max_tokens must be at least 1, got -186.", "BadRequestError"]),
        (404, "ollama_not_found", ["HTTP 404", 'model "gemma3:12b" not found']),
        (429, "quota", ["HTTP 429 (request rejected)", "You exceeded your current quota", "insufficient_quota"]),
    ],
)
def test_rejected_requests_are_drops_with_status_and_server_message(status, key, needles):
    g = grade(recorded(ERROR_BODIES[key], status=status), **TEXT_CASE)
    assert g.label is Label.DROP
    for needle in needles:
        assert needle in reasons_text(g)
    assert g.http_status == status


@pytest.mark.parametrize(
    "body",
    [
        {"error": {"message": "Unexpected error in stream", "type": "InternalServerError", "param": None, "code": 500}},
        {"error": {"code": 400, "message": "the request exceeds the available context size. try increasing the context size or enable context shift", "type": "invalid_request_error"}},
        ERROR_BODIES["vllm_flat"],
    ],
    ids=["vllm-mid-stream", "llamacpp-context", "vllm-flat"],
)
def test_http_200_carrying_an_error_is_drop(body):
    g = grade(recorded(body, status=200), **JSON_CASE)
    assert g.label is Label.DROP
    assert "HTTP 200 carrying an error" in reasons_text(g)
    assert (body.get("error") or body)["message"][:40] in reasons_text(g)


def test_error_message_shapes():
    assert error_message(ERROR_BODIES["unauthorized"]) == "Unauthorized"
    assert error_message(ERROR_BODIES["vllm_flat"]) == "max_tokens must be at least 1, got -186. | BadRequestError | 400"
    assert error_message(ERROR_BODIES["context_length"]).endswith("| invalid_request_error | context_length_exceeded")
    assert error_message({"choices": []}) is None
    assert error_message("<html><body><h1>Service temporarily unavailable</h1></body></html>") == "Service temporarily unavailable"
    assert error_message("") is None and error_message(None) is None
    assert len(error_message("x" * 1000)) == 300


# -- empty -----------------------------------------------------------------------------------

@pytest.mark.parametrize("fields", [JSON_CASE, TEXT_CASE, {}], ids=["json-case", "text-case", "no-expectations"])
@pytest.mark.parametrize(
    "body,needle",
    [
        ("<html><body><h1>Service temporarily unavailable</h1></body></html>", "not a JSON object"),
        (None, "empty body"),
        (chat_body(extra={"choices": []}), "no choices"),
        ({"choices": [], "created": 0, "id": "", "model": "", "object": "", "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": AZURE_FILTER_RESULTS}]}, "no choices"),
        (chat_body(None, usage=None), "content is null"),
        (chat_body(""), "content is empty"),
    ],
    ids=["html-page", "no-body", "choices-empty", "azure-first-chunk", "content-null", "content-empty-string"],
)
def test_empty(body, needle, fields):
    g = grade(recorded(body, elapsed_ms=800.0), **fields)
    assert g.label is Label.EMPTY
    assert needle in reasons_text(g)
    assert g.http_status == 200
    assert g.chars is None and g.tokens is None and g.tokens_estimated is False


def test_content_null_with_nothing_else_is_empty_even_with_refusal_key_null():
    body = chat_body(None, refusal=None, message_extra={"tool_calls": None, "function_call": None})
    assert grade(recorded(body), **TEXT_CASE).label is Label.EMPTY


# -- truncated -------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "content,message_extra",
    [
        ("", {}),
        (None, {}),
        (None, {"reasoning": "Let me think step by step about the answer..."}),  # vLLM: budget spent reasoning
        ("", {"reasoning_content": "Thinking..."}),  # llama.cpp
        ('{"', {}),  # openai-python test_completions.py:556
        ('{"answer": 42}', {}),  # parseable but the server says it stopped on length
    ],
)
def test_finish_reason_length_is_truncated(content, message_extra):
    body = chat_body(content, finish_reason="length", usage=(79, 1), message_extra=message_extra)
    g = grade(recorded(body), **JSON_CASE)
    assert g.label is Label.TRUNCATED
    assert "length" in reasons_text(g)
    assert g.finish_reason == "length"
    assert g.tokens == 1 and g.tokens_estimated is False


@pytest.mark.parametrize(
    "content",
    ['{"answer": 4', '{"answer": "fort', '{"answer": [1, 2', '{"answer":', '{"answer": 42, ', '{"ok": tr', '{"answer": 4.', '{"answer": nul'],
)
def test_json_cut_mid_value_with_finish_stop_is_truncated(content):
    g = grade(recorded(chat_body(content, finish_reason="stop")), **JSON_CASE)
    assert g.label is Label.TRUNCATED
    assert "JSON stops mid-value" in reasons_text(g)
    assert cut_mid_value(content) is True


@pytest.mark.parametrize("content", ['{"answer": 42,}', "[1, 2,]", '{"answer": 42]', '{"answer": x}', "{'answer': 42}"])
def test_malformed_json_is_schema_not_truncated(content):
    assert cut_mid_value(content) is False
    g = grade(recorded(chat_body(content)), **JSON_CASE)
    assert g.label is Label.SCHEMA
    assert "not JSON" in reasons_text(g)


def test_cut_mid_value_ignores_prose_and_complete_json():
    for text in ["plain prose", "", "   ", '{"a": 1}', "[1] see the docs", "{name} is a placeholder", '{"a": 1} and more']:
        assert cut_mid_value(text) is False, text


# -- rule 8: a stream the server cut is a drop ---------------------------------------------------

@pytest.mark.parametrize("content", ["The answer is", '{"answer": 4', "", None], ids=["prose", "json-mid-value", "empty", "null"])
def test_a_stream_the_server_cut_is_a_drop(content):
    """No finish_reason (the connection closed, or llama-cpp-python's bare [DONE]): the server cut it, retry it."""
    body = chat_body(content, finish_reason=None)
    env = Envelope(http_status=200, elapsed_ms=50.0, body=body, stream_complete=False)
    g = grade(env, **TEXT_CASE)
    assert g.label is Label.DROP
    assert "stream cut" in reasons_text(g) and "truncated" not in reasons_text(g)
    assert transport_label(env) is Label.DROP and stream_was_cut(env)
    assert retry_verdict(env, transport_label(env)) == (True, "")


@pytest.mark.parametrize("content,finish,fields", [
    ("The answer is", "length", TEXT_CASE),  # the model hit max_tokens: the stream completed
    ('{"answer": 4', "stop", JSON_CASE),  # JSON cut mid-value, though the stream completed
], ids=["finish-length", "json-cut-after-stop"])
def test_a_stream_that_completed_stays_truncated(content, finish, fields):
    env = Envelope(http_status=200, elapsed_ms=50.0, body=chat_body(content, finish_reason=finish), stream_complete=True)
    assert grade(env, **fields).label is Label.TRUNCATED
    assert not stream_was_cut(env)


def test_a_stream_cut_carrying_an_error_is_the_error():
    env = Envelope(http_status=200, elapsed_ms=5.0, body={"error": {"message": "generation failed", "code": 500}}, stream_complete=False)
    g = grade(env, **TEXT_CASE)
    assert g.label is Label.DROP and "generation failed" in reasons_text(g)
    assert not stream_was_cut(env)  # the server said what went wrong: not a silent cut


# -- rule 10: JSON cut at the very end is truncated ------------------------------------------------

@pytest.mark.parametrize("content", [
    '{"answer": "caf\\u00',  # an escape cut mid-sequence ("Invalid \uXXXX escape")
    '{"answer": "caf\\u',
    '{"answer": "caf\\u00e9',  # the escape whole, the string not
    '{"answer": "x\\ud83d',  # the high half of a surrogate pair, the low half cut
    '{"answer": "x\\ud83d\\ude',
    '{"answer": "caf\\',  # a backslash, then nothing
    '{"note\\u00',  # inside a key
    '{"answer": "fort',  # an unterminated string
    '{"ok": fals',  # a cut literal
    '{"answer": 1e+',  # a cut exponent
], ids=["u00", "u", "u00e9", "surrogate-high", "surrogate-low-cut", "backslash", "key", "string", "literal", "exponent"])
def test_json_cut_at_the_very_end_is_truncated(content):
    assert cut_mid_value(content) is True
    g = grade(recorded(chat_body(content, finish_reason="stop")), **JSON_CASE)
    assert g.label is Label.TRUNCATED
    assert "JSON stops mid-value" in reasons_text(g)


def test_every_prefix_of_valid_json_is_cut():
    """Whatever the parser's complaint, a text that valid JSON continues is cut, never malformed."""
    documents = ['{"a": "caf\\u00e9 \\ud83d\\ude00 \\"q\\" \\\\", "b": [1, -2.5e+10, 0.5E-3, true, false, null], "c": {}}',
                 '[{"k": -0}, [], "s\\/t", 12345]']
    for doc in documents:
        json.loads(doc)
        cut = [doc[:i] for i in range(1, len(doc)) if not cut_mid_value(doc[:i])]
        assert cut == [], cut


@pytest.mark.parametrize("content", [
    '{"answer": "b\\q',  # an invalid escape: no continuation makes it JSON
    '{"answer": "caf\\uZZ',  # not hex
    '{"answer": "x\\u00"}',  # a short escape, then more text
    '{"answer": nulll',
    '{"answer": 01',
    '{"answer": tru}',
], ids=["bad-escape", "not-hex", "short-escape-then-more", "literal-too-long", "leading-zero", "literal-then-brace"])
def test_malformed_json_ending_the_text_is_not_cut(content):
    assert cut_mid_value(content) is False
    assert grade(recorded(chat_body(content)), **JSON_CASE).label is Label.SCHEMA


def test_truncated_tool_call_arguments():
    body = chat_body(None, finish_reason="tool_calls", tool_calls=[tool_call(arguments='{"city":"Edinb')])
    g = grade(recorded(body), schema=WEATHER_SCHEMA)
    assert g.label is Label.TRUNCATED


# -- tool calls: the model speaking ----------------------------------------------------------

WEATHER_TOOL = {"type": "function", "function": {"name": "GetWeatherArgs", "parameters": {"type": "object"}}}


def _tool_body(arguments: str = '{"city":"Edinburgh","country":"UK","units":"c"}', content=None, finish="tool_calls"):
    return chat_body(content, finish_reason=finish, tool_calls=[tool_call(arguments=arguments)], usage=(60, 18))


@pytest.mark.parametrize(
    "content,finish",
    [(None, "tool_calls"), ("", "tool_calls"), ("", "stop")],
    ids=["openai-null-content", "ollama-empty-content", "vllm-named-tool-choice"],
)
def test_tool_call_is_graded_never_empty(content, finish):
    body = _tool_body(content=content, finish=finish)
    with_tools = grade(recorded(body), tools=[WEATHER_TOOL], schema=WEATHER_SCHEMA)
    assert with_tools.label is Label.RIGHT, with_tools.reasons
    assert "GetWeatherArgs(" in with_tools.text
    assert with_tools.chars == len(with_tools.text) and with_tools.tokens == 18


def test_a_tool_call_is_not_an_answer_to_a_prose_case():
    body = _tool_body()
    prose = grade(recorded(body), must_include=["edinburgh"])
    assert prose.label is Label.WRONG
    assert prose.reasons == ("replied with a tool call GetWeatherArgs instead of an answer",)
    # Text assertions read the message text only, never a tool call's name or arguments.
    spoken = grade(recorded(_tool_body(content="It is sunny.")), tools=[WEATHER_TOOL], must_not_include=["Edinburgh", "GetWeatherArgs"])
    assert spoken.label is Label.RIGHT, spoken.reasons
    named = grade(recorded(_tool_body()), tools=[WEATHER_TOOL], must_include=["GetWeatherArgs"])
    assert named.label is Label.WRONG and "missing 'GetWeatherArgs'" in reasons_text(named)


def test_tool_call_graded_on_its_arguments_against_a_schema():
    tools = [WEATHER_TOOL]
    ok = grade(recorded(_tool_body()), tools=tools, schema=WEATHER_SCHEMA, expect_json={"city": "Edinburgh"})
    assert ok.label is Label.RIGHT, ok.reasons
    wrong = grade(recorded(_tool_body()), tools=tools, schema=WEATHER_SCHEMA, expect_json={"city": "London"})
    assert wrong.label is Label.WRONG
    assert 'expect_json: $.city: expected "London", got "Edinburgh"' in wrong.reasons
    bad = grade(recorded(_tool_body('{"city":"Edinburgh","units":"kelvin"}')), tools=tools, schema=WEATHER_SCHEMA)
    assert bad.label is Label.SCHEMA
    assert '"country" is a required property' in reasons_text(bad)
    assert 'units: "kelvin" is not one of' in reasons_text(bad)
    prose = grade(recorded(_tool_body("city=Edinburgh")), tools=tools, schema=WEATHER_SCHEMA)
    assert prose.label is Label.SCHEMA


def test_legacy_function_call_is_graded():
    body = chat_body(None, finish_reason="function_call", message_extra={"function_call": {"name": "lookup", "arguments": '{"order": "NW-1"}'}})
    g = grade(recorded(body), tools=[{"type": "function", "function": {"name": "lookup"}}], expect_json={"order": "NW-1"})
    assert g.label is Label.RIGHT


# -- refusal and content filter --------------------------------------------------------------

REFUSAL = "I'm very sorry, but I can't assist with that."


def test_refusal_with_null_content_is_wrong_for_a_json_case():
    g = grade(recorded(chat_body(None, refusal=REFUSAL)), **JSON_CASE)
    assert g.label is Label.WRONG
    assert "refused" in reasons_text(g)
    assert REFUSAL in reasons_text(g)
    assert g.text == REFUSAL


def test_refusal_is_graded_as_text_for_a_text_case():
    body = chat_body(None, refusal=REFUSAL)
    assert grade(recorded(body), must_include=["weather"]).label is Label.WRONG
    expected_refusal = grade(recorded(body), must_include=["can't assist"])
    assert expected_refusal.label is Label.RIGHT
    assert "model refused" in reasons_text(expected_refusal)


def test_content_filter_is_graded_with_the_reason_shown():
    body = chat_body(
        None,
        finish_reason="content_filter",
        message_extra={"function_call": None, "tool_calls": None},
        choice_extra={"content_filter_results": {**AZURE_FILTER_RESULTS, "violence": {"filtered": True, "severity": "medium"}}},
        usage=None,
    )
    text_case = grade(recorded(body), **TEXT_CASE)
    assert text_case.label is Label.WRONG
    assert "content_filter" in reasons_text(text_case)
    json_case = grade(recorded(body), **JSON_CASE)
    assert json_case.label is Label.WRONG
    assert "content_filter" in reasons_text(json_case)
    assert "no JSON answer" in reasons_text(json_case)
    partial = grade(recorded(chat_body("Edinburgh is", finish_reason="content_filter")), **TEXT_CASE)
    assert partial.label is Label.RIGHT
    assert "content_filter" in reasons_text(partial)


# -- schema ----------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "content",
    [
        '```json\n{"answer": 42}\n```',
        '```\n{"answer": 42}\n```\n',
        '```json\n{"a": 1}\n```\nSee [docs] for more.',  # langgenius/dify PR #42452
        'Here you go:\n```json\n{"answer": 42}\n```',
    ],
)
def test_fenced_json_for_a_schema_case_is_schema_with_the_fence_hint(content):
    g = grade(recorded(chat_body(content)), **JSON_CASE)
    assert g.label is Label.SCHEMA
    assert "code fence" in reasons_text(g)
    assert "not JSON" in reasons_text(g)


def test_prose_for_a_schema_case_is_schema_without_fence_hint():
    g = grade(recorded(chat_body("The answer is 42.")), **JSON_CASE)
    assert g.label is Label.SCHEMA
    assert "not JSON" in reasons_text(g) and "fence" not in reasons_text(g)


@pytest.mark.parametrize(
    "content,needle",
    [
        ('{"value": 42}', '"answer" is a required property'),
        ('{"answer": "42"}', 'answer: "42" is not of type "integer"'),
        ("[42]", 'is not of type "object"'),
    ],
)
def test_parseable_json_failing_the_schema_is_schema(content, needle):
    g = grade(recorded(chat_body(content)), **JSON_CASE)
    assert g.label is Label.SCHEMA
    assert needle in reasons_text(g)


def test_schema_true_and_false():
    assert grade(recorded(chat_body('{"x": 1}')), schema=True).label is Label.RIGHT
    assert grade(recorded(chat_body('{"x": 1}')), schema=False).label is Label.SCHEMA


def test_expect_json_without_schema_needs_json():
    g = grade(recorded(chat_body("answer: 42")), expect_json={"answer": 42})
    assert g.label is Label.SCHEMA


# -- wrong vs right --------------------------------------------------------------------------

def test_expect_fragment_is_case_sensitive():
    assert grade("Ready when you are", expect_fragment="Ready").label is Label.RIGHT
    g = grade("Ready when you are", expect_fragment="ready")
    assert g.label is Label.WRONG
    assert g.reasons == ("missing fragment 'ready'",)


def test_must_include_is_case_insensitive():
    assert grade("Welcome to NORTHWIND outfitters", must_include=["Northwind", "outfitters"]).label is Label.RIGHT
    g = grade("Welcome!", must_include=["Northwind", "welcome"])
    assert g.label is Label.WRONG
    assert g.reasons == ("missing 'Northwind'",)


def test_must_not_include_is_case_insensitive():
    g = grade("SORRY, as an AI I cannot.", must_not_include=["sorry", "As An AI", "refund"])
    assert g.label is Label.WRONG
    assert g.reasons == ("contains forbidden 'sorry'", "contains forbidden 'As An AI'")
    assert grade("Happy to help.", must_not_include=["sorry"]).label is Label.RIGHT


def test_every_failed_expectation_is_listed():
    g = grade("nothing useful", expect_fragment="X", must_include=["a1"], must_not_include=["useful"])
    assert g.reasons == ("missing fragment 'X'", "missing 'a1'", "contains forbidden 'useful'")


@pytest.mark.parametrize(
    "expected,actual,where",
    [
        ({"a": 1}, {"a": 1, "b": 2}, None),
        ({"a": {"b": [1, 2]}}, {"a": {"b": [1, 2, 3], "c": 0}}, None),
        ({"a": 1}, {"a": 2}, "$.a: expected 1, got 2"),
        ({"a": 1}, {}, "$.a: missing"),
        ({"a": {"b": 1}}, {"a": []}, "$.a: expected an object, got list"),
        ({"a": [1, 2]}, {"a": [1]}, "$.a: expected a list of at least 2 items"),
        ({"a": [1, 2]}, {"a": [2, 1]}, "$.a[0]: expected 1, got 2"),
        ({"ok": True}, {"ok": 1}, "$.ok: expected true, got 1"),
        ({"n": 1}, {"n": True}, "$.n: expected 1, got true"),
        ({"n": 1}, {"n": 1.0}, None),
        (42, 42, None),
        (None, None, None),
        ("x", None, '$: expected "x", got null'),
    ],
)
def test_subset_mismatch(expected, actual, where):
    assert subset_mismatch(expected, actual) == where


def test_expect_json_subset_right_and_wrong():
    assert grade(recorded(chat_body('{"answer": 42, "why": "Douglas Adams"}')), **JSON_CASE).label is Label.RIGHT
    g = grade(recorded(chat_body('{"answer": 7}')), **JSON_CASE)
    assert g.label is Label.WRONG
    assert g.reasons == ("expect_json: $.answer: expected 42, got 7",)


def test_completion_text_is_graded_like_content():
    g = grade("Hi! I'm Parcel from Northwind Outfitters.", must_include=["northwind"], max_chars=160)
    assert g.label is Label.RIGHT
    assert g.model_id is None and g.http_status is None and g.finish_reason is None
    assert g.chars == len("Hi! I'm Parcel from Northwind Outfitters.")
    # a fenced completion for a JSON case is still a schema failure
    assert grade('```json\n{"answer": 42}\n```', **JSON_CASE).label is Label.SCHEMA
    assert grade("", **TEXT_CASE).label is Label.EMPTY


# -- tolerance of real-world extra fields ----------------------------------------------------

@pytest.mark.parametrize(
    "body",
    [
        chat_body("Edinburgh, UK", choice_extra={"content_filter_results": AZURE_FILTER_RESULTS}, extra={"prompt_filter_results": [{"prompt_index": 0, "content_filter_results": {**AZURE_FILTER_RESULTS, "jailbreak": {"filtered": False, "detected": False}}}]}),
        chat_body("Edinburgh, UK", message_extra={"reasoning": "The user wants a city.", "tool_calls": []}, choice_extra={"stop_reason": None}),
        chat_body("Edinburgh, UK", message_extra={"reasoning_content": "hmm"}, extra={"timings": {"prompt_n": 44, "prompt_ms": 12.3, "predicted_n": 48, "predicted_ms": 401.2}, "system_fingerprint": "b1-a414a44"}),
        chat_body("Edinburgh, UK", message_extra={"annotations": []}, extra={"service_tier": "default", "obfuscation": "x1y2"}),
        chat_body([{"type": "text", "text": "Edinburgh, "}, {"type": "text", "text": "UK"}]),
        chat_body([{"type": "text", "text": "Edinburgh, UK"}, {"type": "image", "text": 5}, {"type": "text", "text": None}]),
        chat_body("Edinburgh, UK", message_extra={"tool_calls": 5}),
        chat_body("Edinburgh, UK", message_extra={"tool_calls": {"id": "x"}}),
    ],
    ids=["azure", "vllm", "llamacpp", "openai-new-keys", "content-parts", "content-part-text-not-text", "tool-calls-a-number", "tool-calls-an-object"],
)
def test_unknown_extra_fields_are_tolerated(body):
    g = grade(recorded(body), **TEXT_CASE)
    assert g.label is Label.RIGHT, g.reasons
    assert g.text == "Edinburgh, UK"
    assert g.model_id == MODEL


# -- measurements ----------------------------------------------------------------------------

def test_usage_tokens_real_vs_estimated():
    real = grade(recorded(chat_body("Edinburgh is the capital of Scotland.", usage=(14, 9))), **TEXT_CASE)
    assert (real.tokens, real.tokens_estimated) == (9, False)
    assert real.chars == len("Edinburgh is the capital of Scotland.")
    ollama = chat_body("Edinburgh", usage=None, extra={"usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}, "system_fingerprint": "fp_ollama"})
    assert grade(recorded(ollama), **TEXT_CASE).tokens == 3
    missing = grade(recorded(chat_body("Edinburgh is the capital of Scotland.", usage=None)), **TEXT_CASE)
    assert missing.tokens_estimated is True
    assert missing.tokens == round(len("Edinburgh is the capital of Scotland.") / 4)
    vllm_none = chat_body("Edinburgh", usage=None, extra={"usage": {"prompt_tokens": 5, "completion_tokens": None, "total_tokens": 5}})
    g = grade(recorded(vllm_none), **TEXT_CASE)
    assert g.tokens_estimated is True and g.tokens == 2
    bool_tokens = chat_body("Edinburgh", usage=None, extra={"usage": {"completion_tokens": True}})
    assert grade(recorded(bool_tokens), **TEXT_CASE).tokens_estimated is True


def test_grade_carries_what_it_read():
    env = recorded(chat_body("Edinburgh", usage=(10, 2)), elapsed_ms=123.5, ttft_ms=40.0, attempts=2)
    g = grade(env, **TEXT_CASE)
    assert (g.http_status, g.elapsed_ms, g.ttft_ms, g.attempts, g.model_id, g.finish_reason) == (200, 123.5, 40.0, 2, MODEL, "stop")
    empty_model = grade(recorded(chat_body("Edinburgh", model="")), **TEXT_CASE)
    assert empty_model.model_id is None  # llama.cpp may send "" in stream chunks


def test_order_drop_before_everything():
    """A transport failure is named before any semantic grade, even if a body looks gradeable."""
    env = Envelope(http_status=None, error="ReadTimeout", body=chat_body('{"answer": 42}'))
    assert grade(env, **JSON_CASE).label is Label.DROP
    env = Envelope(http_status=502, body=chat_body('{"answer": 42}'))
    assert grade(env, **JSON_CASE).label is Label.DROP


def test_make_case_rejects_bad_helpers_input():
    with pytest.raises(AssertionError):
        make_case(stratum="hard")
    assert json.loads(json.dumps(JSON_CASE)) == JSON_CASE


# -- any body and status: one of the six labels, never an exception ------------------------------------

BODY = st.one_of(CHAT_BODY, CHAT_BODY, JSON, TEXT)
STATUS = st.one_of(st.sampled_from([200, 200, 201, 204, 400, 401, 404, 408, 429, 500, 503]), st.integers(100, 599),
                   st.none())
ANSWER_SCHEMA = {"type": "object", "required": ["answer"], "properties": {"answer": {"type": "integer"}}}
ANY_BODY_CASES = [
    make_case(id="text", expect_fragment="42", must_not_include=["sorry"]),
    make_case(id="schema", schema=ANSWER_SCHEMA),
    make_case(id="expect-json", expect_json={"answer": 42}),
    make_case(id="tool", tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
              **{"assert": [{"type": "tool-call", "value": {"name": "f"}}]}),
]


@settings(max_examples=300)
@given(status=STATUS, body=BODY, stream_complete=st.sampled_from([None, True, False]),
       which=st.sampled_from(ANY_BODY_CASES))
def test_the_grader_labels_any_body_and_status(status, body, stream_complete, which):
    got = grade(Envelope(http_status=status, body=body, stream_complete=stream_complete), which)
    assert got.label in set(Label) and len(Label) == 6
    assert all(isinstance(reason, str) for reason in got.reasons)
