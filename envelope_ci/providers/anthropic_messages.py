"""Anthropic's Messages API (``POST {base_url}/v1/messages``) as a provider.

What differs from OpenAI's chat completions, each point from Anthropic's own documentation
(cited in docs/providers.md): the key goes in ``x-api-key`` beside ``anthropic-version``;
``system`` is a top-level key, not a message; ``max_tokens`` is required; the answer is a
list of content blocks (``text``, ``tool_use``) with a ``stop_reason``; usage counts
``input_tokens`` and ``output_tokens``; a stream is a sequence of typed events that ends with
``message_stop``; errors are ``{"type": "error", "error": {"type", "message"}}``, 529 meaning
overloaded; rate-limit resets are RFC 3339 times, not durations.
"""
from __future__ import annotations

import datetime
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..model import Case
from .base import EventStream, Provider, Reply, Stop, error_in_body, error_message, token_count, wire_options
from .sse import NO_FIELDS

API_VERSION = "2023-06-01"  # the anthropic-version header every request must carry
# Sent when neither the case nor its file's defaults give max_tokens, which the Messages API requires.
DEFAULT_MAX_TOKENS = 4096
STOPS: Mapping[str, Stop] = MappingProxyType({
    "end_turn": Stop.END, "stop_sequence": Stop.END, "tool_use": Stop.END,
    # pause_turn: the turn was paused unfinished (Anthropic's words), so what it said is part of an answer
    "pause_turn": Stop.LENGTH, "max_tokens": Stop.LENGTH, "model_context_window_exceeded": Stop.LENGTH,
    "refusal": Stop.FILTERED})
_SYSTEM_ROLES = ("system", "developer")
_KINDS = ("requests", "tokens")


def _text(content: Any) -> str:
    """A message's content as text: a string, or the text parts of a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _message(message: Mapping[str, Any]) -> dict[str, Any]:
    """An OpenAI-shaped message in Anthropic's shape: tool calls become ``tool_use`` blocks, tool results
    ``tool_result`` blocks of a user turn."""
    role = message.get("role")
    if role == "tool":
        return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": message.get("tool_call_id"),
                                             "content": _text(message.get("content"))}]}
    calls = message.get("tool_calls")
    if role == "assistant" and isinstance(calls, list) and calls:
        blocks: list[dict[str, Any]] = [{"type": "text", "text": t} for t in [_text(message.get("content"))] if t]
        blocks += [_tool_use(call) for call in calls if isinstance(call, dict)]
        return {"role": "assistant", "content": blocks}
    return {"role": role, "content": message.get("content")}


def _tool_use(call: Mapping[str, Any]) -> dict[str, Any]:
    found = call.get("function")
    fn: Mapping[str, Any] = found if isinstance(found, dict) else {}
    try:
        arguments = json.loads(fn.get("arguments") or "{}")
    except (TypeError, json.JSONDecodeError):
        arguments = {}
    return {"type": "tool_use", "id": call.get("id"), "name": fn.get("name"), "input": arguments}


def _tools(tools: Any) -> list[dict[str, Any]]:
    """OpenAI's ``{"type": "function", "function": {name, description, parameters}}`` as Anthropic's
    ``{name, description, input_schema}``."""
    out = []
    for tool in tools if isinstance(tools, list) else []:
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(fn, dict):
            out.append(tool)  # already Anthropic's shape, or a server tool: sent as written
            continue
        entry = {"name": fn.get("name"), "input_schema": fn.get("parameters") or {"type": "object", "properties": {}}}
        if fn.get("description"):
            entry["description"] = fn["description"]
        out.append(entry)
    return out


def _tool_choice(choice: Any) -> Any:
    """OpenAI's ``auto``/``required``/``none``/named function as Anthropic's ``{"type": ...}``."""
    if isinstance(choice, str):
        return {"type": {"required": "any"}.get(choice, choice)}
    fn = choice.get("function") if isinstance(choice, dict) else None
    return {"type": "tool", "name": fn.get("name")} if isinstance(fn, dict) else choice


def request_body(case: Case, model: str, temperature: float, stream: bool) -> dict[str, Any]:
    """Model, max_tokens, system apart from the messages, temperature, then the case's options in Anthropic's
    names (``response_format`` and ``seed`` have none, and are left out)."""
    options = dict(case.request)
    max_tokens = options.pop("max_tokens", None) or options.pop("max_completion_tokens", None) or DEFAULT_MAX_TOKENS
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens}
    system = "\n\n".join(_text(m.get("content")) for m in case.messages if m.get("role") in _SYSTEM_ROLES)
    if system:
        body["system"] = system
    body["messages"] = [_message(m) for m in case.messages if m.get("role") not in _SYSTEM_ROLES]
    body["temperature"] = temperature
    body.update(wire_options(options, ("response_format", "seed", "max_completion_tokens"), {
        "tools": ("tools", _tools), "tool_choice": ("tool_choice", _tool_choice),
        "stop": ("stop_sequences", lambda stop: [stop] if isinstance(stop, str) else stop)}))
    if stream:
        body["stream"] = True
    return body


def read_reply(body: Mapping[str, Any]) -> Reply | None:
    """The text blocks as content, ``tool_use`` blocks as tool calls in OpenAI's shape; None without ``content``."""
    blocks = body.get("content")
    if not isinstance(blocks, list):
        return None
    texts = [b["text"] for b in blocks if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"),
                                                                                                       str)]
    calls = tuple(_call(b) for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use")
    model, stop, usage = body.get("model"), body.get("stop_reason"), body.get("usage")
    return Reply(content="".join(texts) if texts else None, tool_calls=calls, refusal=None,
                 finish_reason=stop if isinstance(stop, str) else None,
                 model_id=model if isinstance(model, str) and model else None,
                 completion_tokens=token_count(usage, "output_tokens"),
                 prompt_tokens=_input_tokens(usage))


def _input_tokens(usage: Any) -> int | None:
    """Every input token the call was billed for: ``input_tokens`` leaves out those read from or written to the
    prompt cache, which Anthropic counts apart."""
    fresh = token_count(usage, "input_tokens")
    if fresh is None:
        return None
    return fresh + sum(token_count(usage, k) or 0 for k in ("cache_read_input_tokens", "cache_creation_input_tokens"))


def _call(block: Mapping[str, Any]) -> dict[str, Any]:
    """A ``tool_use`` block as the tool call the ``tool-call`` assertion grades (arguments as JSON text)."""
    given = block.get("input")
    arguments = given if isinstance(given, str) else json.dumps(given if given is not None else {}, ensure_ascii=False)
    return {"id": block.get("id"), "type": "function", "function": {"name": block.get("name"), "arguments": arguments}}


@dataclass
class MessageStream(EventStream):
    """Feeds on the Messages stream's event payloads; ``body()`` is the message a non-streamed call returns."""

    message: dict[str, Any] = field(default_factory=dict)
    blocks: dict[int, dict[str, Any]] = field(default_factory=dict)
    partial_json: dict[int, list[str]] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)
    stop_reason: str | None = None

    def on_event(self, event: dict[str, Any]) -> bool:
        """One event; True when it carried part of the answer (a block delta)."""
        kind = event.get("type")
        handler = _EVENTS.get(kind) if isinstance(kind, str) else None
        return handler(self, event) if handler else False

    def _start(self, event: dict[str, Any]) -> bool:
        message = event.get("message")
        if isinstance(message, dict):
            self.message = {k: v for k, v in message.items() if k not in ("content", "usage")}
            self._take_usage(message.get("usage"))
        return False

    def _block_start(self, event: dict[str, Any]) -> bool:
        index, block = event.get("index"), event.get("content_block")
        if isinstance(index, int) and isinstance(block, dict):
            self.blocks[index] = dict(block)
        return False

    def _block_delta(self, event: dict[str, Any]) -> bool:
        index, delta = event.get("index"), event.get("delta")
        if not isinstance(index, int) or not isinstance(delta, dict):
            return False
        block = self.blocks.setdefault(index, {"type": "text", "text": ""})
        if isinstance(delta.get("text"), str):
            block["text"] = str(block.get("text") or "") + delta["text"]
        elif isinstance(delta.get("partial_json"), str):
            self.partial_json.setdefault(index, []).append(delta["partial_json"])
        return True

    def _message_delta(self, event: dict[str, Any]) -> bool:
        delta = event.get("delta")
        if isinstance(delta, dict) and isinstance(delta.get("stop_reason"), str):
            self.stop_reason = delta["stop_reason"]
        self._take_usage(event.get("usage"))
        return False

    def _stop(self, event: dict[str, Any]) -> bool:
        self.done = True
        return False

    def _error(self, event: dict[str, Any]) -> bool:
        self.error = event.get("error") or event
        return False

    def _take_usage(self, usage: Any) -> None:
        if isinstance(usage, dict):
            self.usage.update({k: v for k, v in usage.items() if v is not None})

    @property
    def complete(self) -> bool:
        """Whole once ``message_stop`` arrived: a stream cut before it is a drop."""
        return self.done

    def body(self) -> dict[str, Any]:
        """The stream as the message a non-streaming call would have returned."""
        if self.error is not None:
            return {"type": "error", "error": self.error}
        body: dict[str, Any] = {"type": "message", "role": "assistant", **self.message}
        if self.message or self.blocks:
            body["content"] = [self._block(i) for i in sorted(self.blocks)]
        body["stop_reason"] = self.stop_reason
        if self.usage:
            body["usage"] = dict(self.usage)
        return body

    def _block(self, index: int) -> dict[str, Any]:
        block = dict(self.blocks[index])
        pieces = self.partial_json.get(index)
        if pieces is not None:
            text = "".join(pieces)
            try:
                block["input"] = json.loads(text) if text else {}
            except json.JSONDecodeError:
                block["input"] = text  # cut mid-value: kept as text, so grading can tell
        return block


_EVENTS: Mapping[str, Callable[[MessageStream, dict[str, Any]], bool]] = MappingProxyType({
    "message_start": MessageStream._start, "content_block_start": MessageStream._block_start,
    "content_block_delta": MessageStream._block_delta, "message_delta": MessageStream._message_delta,
    "message_stop": MessageStream._stop, "error": MessageStream._error})


def seconds_until(value: str | None, now: float | None = None) -> float | None:
    """An RFC 3339 time (``2025-01-15T14:24:00Z``) as seconds from now, never negative; None when unreadable."""
    if not value:
        return None
    text = value.strip()
    try:
        when = datetime.datetime.fromisoformat(text[:-1] + "+00:00" if text[-1:] in "zZ" else text)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def rate_limits(headers: Mapping[str, str], now: float | None = None) -> dict[str, str]:
    """``anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}`` as the pacer's ``x-ratelimit-*``; the
    reset, a time, becomes the seconds until then (as OpenAI's duration means: until the limit is full)."""
    lowered = {k.lower(): v for k, v in headers.items()}
    out: dict[str, str] = {}
    for kind in _KINDS:
        for part in ("limit", "remaining"):
            value = lowered.get(f"anthropic-ratelimit-{kind}-{part}")
            if value is not None:
                out[f"x-ratelimit-{part}-{kind}"] = value
        reset = seconds_until(lowered.get(f"anthropic-ratelimit-{kind}-reset"), now)
        if reset is not None:
            out[f"x-ratelimit-reset-{kind}"] = f"{reset:.3f}"
    return out


class AnthropicMessages:
    """``POST /v1/messages`` as a ``Provider``."""

    name = "anthropic-messages"
    stop_field = "stop_reason"
    sse_fields: Mapping[str, Callable[[str], str]] = NO_FIELDS  # every payload is a ``data:`` line naming its type
    busy_statuses = frozenset({503, 529})  # 529 overloaded_error: Anthropic's "busy, come back"
    answer_fields: tuple[str, ...] = ("model", "system", "messages", "tools", "tool_choice", "max_tokens",
                                      "temperature", "stop_sequences", "top_p", "top_k")
    request_body = staticmethod(request_body)
    read_reply = staticmethod(read_reply)
    error_message = staticmethod(error_message)
    failure = staticmethod(error_in_body)  # ``{"type": "error", "error": {...}}``

    def url(self, base_url: str) -> str:
        """``{base_url}/v1/messages``; a base URL that ends in ``/v1``, as people copy it, is the same place."""
        base = base_url.rstrip("/")
        return base.removesuffix("/v1") + "/v1/messages"

    def headers(self, api_key: str | None) -> dict[str, str]:
        """``anthropic-version`` always, the key as ``x-api-key``."""
        return {"anthropic-version": API_VERSION, **({"x-api-key": api_key} if api_key else {})}

    def stop(self, finish_reason: str | None) -> Stop:
        """``max_tokens`` is a cut, ``refusal`` the policy answering; ``end_turn``, ``tool_use`` are ends."""
        return STOPS.get(finish_reason or "", Stop.UNKNOWN)

    def new_stream(self) -> MessageStream:
        """An empty assembler for one streamed message."""
        return MessageStream()

    def rate_limits(self, headers: Mapping[str, str]) -> Mapping[str, str]:
        """Anthropic's headers in the pacer's terms (see ``rate_limits``)."""
        return rate_limits(headers)


ANTHROPIC_MESSAGES: Provider = AnthropicMessages()
