"""OpenAI chat completions: the default provider, and the shape recordings that name no provider are in.

Parsing is pure; request building, auth, stop words, rate-limit headers and stream assembly
for the live client live here too, so another wire format is one more module beside this one
(``anthropic_messages``, ``openai_responses``). Streams are reassembled from
what real servers send: ``data:`` lines, ``[DONE]``, a ``choices: []`` usage chunk (or
Azure's prompt-filter chunk), and an ``error`` object inside a 200 stream.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..model import DEFAULT_PROVIDER, Case
from .base import Provider, Reply, Stop, error_in_body, error_message, stream_event, token_count

__all__ = ["OPENAI_CHAT", "OpenAIChat", "StreamAssembler", "error_message", "error_payload", "read_reply"]

# finish_reason -> what it means to the grader; a word not here is judged by what was said.
STOPS: Mapping[str, Stop] = MappingProxyType({
    "stop": Stop.END, "tool_calls": Stop.END, "function_call": Stop.END, "length": Stop.LENGTH,
    "content_filter": Stop.FILTERED})
# The request fields an answer depends on; anything else (stream options, user) does not change it.
ANSWER_FIELDS: tuple[str, ...] = ("model", "messages", "tools", "tool_choice", "response_format", "max_tokens",
                                  "temperature", "seed", "stop")


def read_reply(body: Mapping[str, Any]) -> Reply | None:
    """Pull the first choice out of a completion body; None when there is no choice."""
    choices = body.get("choices")
    model = body.get("model")
    model_id = model if isinstance(model, str) and model else None
    usage = body.get("usage")
    tokens = token_count(usage, "completion_tokens")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    choice = choices[0]
    message = choice.get("message") or choice.get("delta") or {}
    if not isinstance(message, dict):
        message = {}
    content = message.get("content")
    if isinstance(content, list):  # content parts: keep the text ones
        content = "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    if content is not None and not isinstance(content, str):
        content = json.dumps(content)
    calls = message.get("tool_calls")
    if not isinstance(calls, list):  # a server's odd value is no call, not a crash
        calls = []
    if not calls and isinstance(message.get("function_call"), dict):
        calls = [{"type": "function", "function": message["function_call"]}]
    refusal = message.get("refusal")
    finish = choice.get("finish_reason")
    return Reply(
        content=content,
        tool_calls=tuple(c for c in calls if isinstance(c, dict)),
        refusal=refusal if isinstance(refusal, str) and refusal else None,
        finish_reason=finish if isinstance(finish, str) else None,
        model_id=model_id,
        completion_tokens=tokens,
        prompt_tokens=token_count(usage, "prompt_tokens"),
    )


@dataclass
class StreamAssembler:
    """Feeds on SSE ``data`` payloads; ``body()`` is the equivalent non-streamed body."""

    model: str | None = None
    ident: str | None = None
    system_fingerprint: str | None = None
    content: list[str] = field(default_factory=list)
    refusal: list[str] = field(default_factory=list)
    saw_content: bool = False
    saw_refusal: bool = False
    tool_calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    error: Any = None
    done: bool = False
    saw_choice: bool = False
    bad_lines: int = 0

    def feed(self, data: str) -> bool:
        """Take one ``data:`` payload; True when it carried a choice (the TTFT event)."""
        if data.strip() == "[DONE]":
            self.done = True
            return False
        chunk = stream_event(data)
        if chunk is None:
            self.bad_lines += 1
            return False
        if chunk.get("error"):
            self.error = chunk["error"]
            return False
        if isinstance(chunk.get("model"), str) and chunk["model"] and self.model is None:
            self.model = chunk["model"]
        self.ident = self.ident or chunk.get("id")
        self.system_fingerprint = self.system_fingerprint or chunk.get("system_fingerprint")
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return False
        self.saw_choice = True
        choice = choices[0]
        delta = choice.get("delta") or {}
        if isinstance(delta, dict):
            self._take_delta(delta)
        if choice.get("finish_reason"):
            self.finish_reason = choice["finish_reason"]
        return True

    def _take_delta(self, delta: dict[str, Any]) -> None:
        if isinstance(delta.get("content"), str):
            self.saw_content = True
            self.content.append(delta["content"])
        if isinstance(delta.get("refusal"), str):
            self.saw_refusal = True
            self.refusal.append(delta["refusal"])
        for call in delta.get("tool_calls") or []:
            if not isinstance(call, dict):
                continue
            index = call.get("index")  # some servers send null or leave it out: one call, index 0
            slot = self.tool_calls.setdefault(index if isinstance(index, int) else 0,
                                              {"type": "function", "function": {"name": "", "arguments": ""}})
            if call.get("id"):
                slot["id"] = call["id"]
            fn = call.get("function")
            if not isinstance(fn, dict):
                continue
            for part in ("name", "arguments"):
                if isinstance(fn.get(part), str):
                    slot["function"][part] += fn[part]

    @property
    def complete(self) -> bool:
        """A stream is whole once a finish_reason arrived (``[DONE]`` alone is not enough)."""
        return self.finish_reason is not None

    def body(self) -> dict[str, Any]:
        """The stream as the body a non-streaming call would have returned."""
        if self.error is not None:
            return {"error": self.error, "model": self.model}
        body: dict[str, Any] = {"id": self.ident, "object": "chat.completion", "model": self.model}
        if self.system_fingerprint:
            body["system_fingerprint"] = self.system_fingerprint
        if not self.saw_choice:
            body["choices"] = []
        else:
            message: dict[str, Any] = {
                "role": "assistant",
                "content": "".join(self.content) if self.saw_content else None,
                "refusal": "".join(self.refusal) if self.saw_refusal and "".join(self.refusal) else None,
            }
            if self.tool_calls:
                message["tool_calls"] = [self.tool_calls[i] for i in sorted(self.tool_calls)]
            body["choices"] = [{"index": 0, "message": message, "finish_reason": self.finish_reason}]
        if self.usage is not None:
            body["usage"] = self.usage
        return body


def error_payload(text: str) -> str:
    """llama.cpp before 2025-09 sent ``error: {...}`` instead of ``data: {"error": ...}``: the same thing."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = None
    return json.dumps({"error": value if isinstance(value, dict) else {"message": text}})


class OpenAIChat:
    """``POST /chat/completions`` as a ``Provider``: the wire format most servers speak."""

    name = DEFAULT_PROVIDER
    path = "/chat/completions"  # after the base URL, which names the version (``.../v1``)
    stop_field = "finish_reason"
    sse_fields: Mapping[str, Callable[[str], str]] = MappingProxyType({"error": error_payload})
    busy_statuses = frozenset({503})
    answer_fields: tuple[str, ...] = ANSWER_FIELDS
    read_reply = staticmethod(read_reply)
    error_message = staticmethod(error_message)
    failure = staticmethod(error_in_body)

    def url(self, base_url: str) -> str:
        """The base URL with the format's path after it."""
        return base_url.rstrip("/") + self.path

    def headers(self, api_key: str | None) -> dict[str, str]:
        """``Authorization: Bearer KEY``, as every OpenAI-compatible server reads it."""
        return {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def stop(self, finish_reason: str | None) -> Stop:
        """``length`` is a cut, ``content_filter`` the policy answering; other words are ends or unknown."""
        return STOPS.get(finish_reason or "", Stop.UNKNOWN)

    def rate_limits(self, headers: Mapping[str, str]) -> Mapping[str, str]:
        """OpenAI's ``x-ratelimit-*`` headers are the pacer's terms already."""
        return headers

    def request_body(self, case: Case, model: str, temperature: float, stream: bool) -> dict[str, Any]:
        """Model, messages, temperature, then the case's own options; streaming asks for usage too."""
        body: dict[str, Any] = {"model": model, "messages": list(case.messages), "temperature": temperature}
        body.update(case.request)
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body

    def new_stream(self) -> StreamAssembler:
        """An empty assembler for one streamed response."""
        return StreamAssembler()


OPENAI_CHAT: Provider = OpenAIChat()  # annotated: mypy checks the class keeps to the protocol
