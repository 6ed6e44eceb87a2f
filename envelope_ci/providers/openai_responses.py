"""OpenAI's Responses API (``POST {base_url}/responses``) as a provider.

What differs from chat completions, each point from OpenAI's documentation (cited in
docs/providers.md): the system text is ``instructions`` and the conversation ``input``; the
answer is a list of output items (``message`` with ``output_text`` parts, ``function_call``);
a cut answer is ``status: incomplete`` with ``incomplete_details.reason`` (``max_output_tokens``,
``content_filter``); usage counts ``input_tokens`` and ``output_tokens``; a stream is typed
events ending in ``response.completed``, ``response.incomplete`` or ``response.failed``, with
no ``[DONE]``. Auth and rate-limit headers are OpenAI's, as for chat completions.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..model import Case
from .base import EventStream, Provider, Reply, Stop, error_in_body, token_count, wire_options
from .openai_chat import OpenAIChat
from .sse import NO_FIELDS

STOPS: Mapping[str, Stop] = MappingProxyType({
    "completed": Stop.END, "max_output_tokens": Stop.LENGTH, "incomplete": Stop.LENGTH,
    "content_filter": Stop.FILTERED})
_UNFINISHED = ("failed", "cancelled")  # no answer to grade, whatever output it holds: a drop, retried
_SYSTEM_ROLES = ("system", "developer")
_TERMINAL = ("response.completed", "response.incomplete", "response.failed")


def _input_item(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A chat message as input items: tool calls and tool results become their own items."""
    role = message.get("role")
    if role == "tool":
        return [{"type": "function_call_output", "call_id": message.get("tool_call_id"),
                 "output": message.get("content") if isinstance(message.get("content"), str) else ""}]
    items: list[dict[str, Any]] = []
    if message.get("content") is not None:
        items.append({"role": role, "content": message.get("content")})
    for call in message.get("tool_calls") or []:
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict):
            items.append({"type": "function_call", "call_id": call.get("id"), "name": fn.get("name"),
                          "arguments": fn.get("arguments") or ""})
    return items


def _tools(tools: Any) -> list[Any]:
    """Chat's nested ``{"type": "function", "function": {...}}`` as the Responses API's flat function tool."""
    return [{"type": "function", **tool["function"]} if isinstance(tool, dict) and isinstance(tool.get("function"),
                                                                                            dict) else tool
            for tool in (tools if isinstance(tools, list) else [])]


def _tool_choice(choice: Any) -> Any:
    fn = choice.get("function") if isinstance(choice, dict) else None
    return {"type": "function", "name": fn.get("name")} if isinstance(fn, dict) else choice


def _text_format(response_format: Any) -> dict[str, Any]:
    """Chat's ``response_format`` as ``text.format`` (a json_schema's fields move up a level)."""
    if isinstance(response_format, dict) and response_format.get("type") == "json_schema":
        schema = response_format.get("json_schema")
        return {"format": {"type": "json_schema", **(schema if isinstance(schema, dict) else {})}}
    return {"format": response_format}


def request_body(case: Case, model: str, temperature: float, stream: bool) -> dict[str, Any]:
    """Model, instructions, input, temperature, then the case's options in the Responses API's names (``stop`` and
    ``seed`` have none, and are left out); nothing is stored on the server."""
    options = dict(case.request)
    body: dict[str, Any] = {"model": model}
    instructions = "\n\n".join(m["content"] for m in case.messages
                               if m.get("role") in _SYSTEM_ROLES and isinstance(m.get("content"), str))
    if instructions:
        body["instructions"] = instructions
    body["input"] = [item for m in case.messages if m.get("role") not in _SYSTEM_ROLES for item in _input_item(m)]
    body["temperature"] = temperature
    body["store"] = False
    limit = options.pop("max_tokens", None) or options.pop("max_completion_tokens", None)
    if limit is not None:
        body["max_output_tokens"] = limit
    body.update(wire_options(options, ("stop", "seed", "max_completion_tokens"), {
        "tools": ("tools", _tools), "tool_choice": ("tool_choice", _tool_choice),
        "response_format": ("text", _text_format)}))
    if stream:
        body["stream"] = True
    return body


def read_reply(body: Mapping[str, Any]) -> Reply | None:
    """Message text as content, ``function_call`` items as tool calls in chat's shape; None without ``output``."""
    output = body.get("output")
    if not isinstance(output, list):
        return None
    texts: list[str] = []
    refusals: list[str] = []
    calls: list[dict[str, Any]] = []
    for item in output:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "function_call":
            calls.append({"id": item.get("call_id"), "type": "function",
                          "function": {"name": item.get("name"), "arguments": item.get("arguments") or ""}})
        elif item.get("type") == "message":
            _take_parts(item.get("content"), texts, refusals)
    model, usage = body.get("model"), body.get("usage")
    return Reply(content="".join(texts) if texts else None, tool_calls=tuple(calls),
                 refusal="".join(refusals) or None, finish_reason=_finish(body),
                 model_id=model if isinstance(model, str) and model else None,
                 completion_tokens=token_count(usage, "output_tokens"),
                 prompt_tokens=token_count(usage, "input_tokens"))


def _take_parts(parts: Any, texts: list[str], refusals: list[str]) -> None:
    for part in parts if isinstance(parts, list) else []:
        if isinstance(part, dict) and part.get("type") == "output_text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif isinstance(part, dict) and part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
            refusals.append(part["refusal"])


def _finish(body: Mapping[str, Any]) -> str | None:
    """``incomplete_details.reason`` of an incomplete response (``incomplete`` when it gives none known: a cut all
    the same), else its ``status``."""
    status = body.get("status")
    if status == "incomplete":
        details = body.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        return reason if reason in ("max_output_tokens", "content_filter") else "incomplete"
    return status if isinstance(status, str) else None


def _parts(content: Any) -> list[dict[str, Any]]:
    """A streamed item's content parts: the objects of a list; anything else (null, a string) holds none."""
    return [dict(part) for part in content if isinstance(part, dict)] if isinstance(content, list) else []


def _str(value: Any) -> str:
    """A text field as text: a null (or a missing one) is none, anything else its string."""
    return "" if value is None else str(value)


def _event_error(event: Mapping[str, Any]) -> dict[str, Any]:
    """An ``error`` event's error: OpenAI documents ``code``, ``message``, ``param`` beside its ``type``, but the API
    has been seen to nest them in an ``error`` object (openai/openai-dotnet#881), whose words the reason keeps."""
    nested = event.get("error")
    if isinstance(nested, dict):
        return dict(nested)
    return {k: v for k, v in event.items() if k not in ("type", "sequence_number")}


@dataclass
class ResponseStream(EventStream):
    """Feeds on the Responses stream's event payloads; ``body()`` is the response a non-streamed call returns."""

    response: dict[str, Any] = field(default_factory=dict)
    items: dict[int, dict[str, Any]] = field(default_factory=dict)
    final: dict[str, Any] | None = None

    def on_event(self, event: dict[str, Any]) -> bool:
        """One event; True when it carried part of the answer (a text or arguments delta)."""
        kind = event.get("type")
        if kind in _TERMINAL:
            self.done = True
            self.final = event.get("response") if isinstance(event.get("response"), dict) else {}
            return False
        if kind == "error":
            self.error = _event_error(event)
            return False
        handler = _EVENTS.get(kind) if isinstance(kind, str) else None
        return handler(self, event) if handler else False

    def _created(self, event: dict[str, Any]) -> bool:
        if isinstance(event.get("response"), dict):
            self.response = {k: v for k, v in event["response"].items() if k != "output"}
        return False

    def _item(self, event: dict[str, Any]) -> bool:
        index, item = event.get("output_index"), event.get("item")
        if isinstance(index, int) and isinstance(item, dict):
            self.items[index] = dict(item)
            if "content" in item:  # only a list's object parts: the deltas add text to them
                self.items[index]["content"] = _parts(item["content"])
        return False

    def _text(self, event: dict[str, Any]) -> bool:
        item = self._slot(event, {"type": "message", "role": "assistant", "content": []})
        if not isinstance(item.get("content"), list):
            item["content"] = []
        parts = item["content"]
        kind = "refusal" if event.get("type") == "response.refusal.delta" else "output_text"
        key = "refusal" if kind == "refusal" else "text"
        if not parts or not isinstance(parts[-1], dict) or parts[-1].get("type") != kind:
            parts.append({"type": kind, key: ""})
        parts[-1][key] = _str(parts[-1].get(key)) + _str(event.get("delta"))
        return True

    def _arguments(self, event: dict[str, Any]) -> bool:
        item = self._slot(event, {"type": "function_call", "name": "", "arguments": ""})
        item["arguments"] = str(item.get("arguments") or "") + str(event.get("delta") or "")
        return True

    def _slot(self, event: dict[str, Any], empty: dict[str, Any]) -> dict[str, Any]:
        index = event.get("output_index")
        return self.items.setdefault(index if isinstance(index, int) else 0, empty)

    @property
    def complete(self) -> bool:
        """Whole once a terminal event arrived (completed, incomplete or failed): a stream cut before is a drop."""
        return self.done

    def body(self) -> dict[str, Any]:
        """The stream as the response a non-streaming call would have returned."""
        if self.error is not None:
            return {"error": self.error}
        if self.final is not None and self.final.get("output"):
            return dict(self.final)
        body: dict[str, Any] = {"object": "response", **self.response, **(self.final or {})}
        if self.response or self.items or self.final is not None:
            body["output"] = [self.items[i] for i in sorted(self.items)]
        return body


_EVENTS: Mapping[str, Callable[[ResponseStream, dict[str, Any]], bool]] = MappingProxyType({
    "response.created": ResponseStream._created, "response.in_progress": ResponseStream._created,
    "response.output_item.added": ResponseStream._item, "response.output_item.done": ResponseStream._item,
    "response.output_text.delta": ResponseStream._text, "response.refusal.delta": ResponseStream._text,
    "response.function_call_arguments.delta": ResponseStream._arguments})


class OpenAIResponses(OpenAIChat):
    """``POST /responses`` as a ``Provider``: chat completions' URL base, auth and rate-limit headers."""

    name = "openai-responses"
    path = "/responses"
    stop_field = "incomplete_details.reason"
    sse_fields: Mapping[str, Callable[[str], str]] = NO_FIELDS
    answer_fields: tuple[str, ...] = ("model", "instructions", "input", "tools", "tool_choice", "text",
                                      "max_output_tokens", "temperature", "top_p")
    read_reply = staticmethod(read_reply)

    def request_body(self, case: Case, model: str, temperature: float, stream: bool) -> dict[str, Any]:
        """See ``request_body``."""
        return request_body(case, model, temperature, stream)

    def failure(self, body: Mapping[str, Any]) -> str | None:
        """An error object, or a ``failed`` or ``cancelled`` status: no answer to grade, whatever output it holds."""
        status = body.get("status")
        return error_in_body(body) or (f"the response's status is '{status}'" if status in _UNFINISHED else None)

    def stop(self, finish_reason: str | None) -> Stop:
        """``max_output_tokens`` is a cut, ``content_filter`` the policy answering, ``completed`` an end."""
        return STOPS.get(finish_reason or "", Stop.UNKNOWN)

    def new_stream(self) -> ResponseStream:  # type: ignore[override]
        """An empty assembler for one streamed response."""
        return ResponseStream()


OPENAI_RESPONSES: Provider = OpenAIResponses()
