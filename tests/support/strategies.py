"""Hypothesis strategies the property tests share: any JSON, and chat bodies a hostile server might send."""
from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

TEXT = st.text(max_size=40)
SCALARS = (st.none() | st.booleans() | st.integers(-(2**64), 2**64) | st.floats(allow_nan=False, allow_infinity=False)
           | TEXT)
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
                    max_leaves=10)


def anything_or(value: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly the expected shape, sometimes any JSON: a hostile server's body keeps most of its shape."""
    return st.one_of(value, value, JSON)


CONTENT = st.one_of(TEXT, st.just('{"answer": 42}'), st.just("```json\n{\"a\": 1}\n```"), JSON.map(json.dumps),
                    st.none())
TOOL_CALL = st.fixed_dictionaries({}, optional={
    "id": anything_or(TEXT), "type": anything_or(st.just("function")), "index": anything_or(st.integers(0, 3)),
    "function": anything_or(st.fixed_dictionaries({}, optional={
        "name": anything_or(TEXT), "arguments": anything_or(JSON.map(json.dumps))})),
})
MESSAGE = st.fixed_dictionaries({}, optional={
    "role": anything_or(st.just("assistant")), "content": anything_or(CONTENT),
    "refusal": anything_or(TEXT | st.none()),
    "tool_calls": anything_or(st.lists(anything_or(TOOL_CALL), max_size=3)), "function_call": JSON,
})
CHOICE = st.fixed_dictionaries({}, optional={
    "index": anything_or(st.integers(0, 2)), "message": anything_or(MESSAGE), "delta": anything_or(MESSAGE),
    "finish_reason": anything_or(st.sampled_from(["stop", "length", "tool_calls", "content_filter", None])),
})
CHAT_BODY = st.fixed_dictionaries({}, optional={
    "id": anything_or(TEXT), "object": anything_or(st.just("chat.completion")), "model": anything_or(TEXT),
    "choices": anything_or(st.lists(anything_or(CHOICE), max_size=3)), "error": JSON,
    "usage": anything_or(st.fixed_dictionaries({}, optional={
        "completion_tokens": anything_or(st.integers(-5, 10**6)), "prompt_tokens": JSON})),
})

# Text near every edge of the escapers: markup, URLs and references, whitespace, controls, bidi, surrogates.
EDGES = st.sampled_from([
    "://", "www.", "WwW.", "gh-1", "GH-9", "xgh-1", "_gh-1", "@a", "#1", "&", "<", ">", "|", "\\", "`", "*", "_",
    "[", "]", "(", ")", "!", "~", "$", " ", "  ", "\t", "\n", "\r\n", "\x0b", "\x85", "\u2028", "\u202e", "\u200e",
    "\x00", "\x1b", "\x7f", "\ufffe", "\ud800", "\udfff", "é", "\u212a", "\u017f", ".", ",", ":", "/", "-", "=", "+",
])
EDGE_TEXT = st.one_of(st.lists(EDGES | st.text("abgwhGHW019.,:;/=+-", max_size=4), max_size=12).map("".join),
                      st.text(max_size=40))
