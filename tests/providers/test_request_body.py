"""The OpenAI chat request body: the case's messages, the model and temperature, its options, streaming with usage."""
from __future__ import annotations

from envelope_ci.model import Case
from envelope_ci.providers.openai_chat import OPENAI_CHAT


def make_case(**fields) -> Case:
    base: dict = {"id": "c1", "stratum": None, "messages": ({"role": "user", "content": "hi"},), "file": "f.yaml",
                  "line": 1, "digest": "d"}
    base.update(fields)
    return Case(**base)


def test_request_body_plain():
    case = make_case()
    body = OPENAI_CHAT.request_body(case, "alias", 0.3, False)
    assert body == {"model": "alias", "messages": [{"role": "user", "content": "hi"}], "temperature": 0.3}


def test_request_body_streaming_asks_for_usage():
    body = OPENAI_CHAT.request_body(make_case(), "m", 0.0, True)
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


def test_request_body_passes_case_options_through():
    options = {"max_tokens": 64, "temperature": 0.7, "seed": 11, "stop": ["\n\n"],
               "response_format": {"type": "json_object"}}
    body = OPENAI_CHAT.request_body(make_case(request=options), "m", 0.0, False)
    for key, value in options.items():
        assert body[key] == value
    assert "stream" not in body and "stream_options" not in body
