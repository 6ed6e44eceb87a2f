"""Server-sent events from a chat-completions stream -> one completion body. Pure.

Follows what real servers send: ``data:`` lines, ``:`` comment pings, ``[DONE]``,
a ``choices: []`` usage chunk (or Azure's prompt-filter chunk), and an ``error``
object inside a 200 stream.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


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
        try:
            chunk = json.loads(data)
        except json.JSONDecodeError:
            self.bad_lines += 1
            return False
        if not isinstance(chunk, dict):
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
            slot = self.tool_calls.setdefault(index if isinstance(index, int) else 0, {"type": "function", "function": {"name": "", "arguments": ""}})
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


def iter_sse_data(buffer: bytearray, chunk: bytes) -> list[str]:
    """Append ``chunk`` and return the complete ``data:`` payloads; leftovers stay buffered."""
    buffer.extend(chunk)
    out: list[str] = []
    while True:
        nl = buffer.find(b"\n")
        if nl < 0:
            return out
        raw = bytes(buffer[:nl]).rstrip(b"\r")
        del buffer[: nl + 1]
        if raw.startswith(b"data:"):
            out.append(raw[5:].lstrip(b" ").decode("utf-8", "replace"))
        elif raw.startswith(b"error:"):
            out.append(error_payload(raw[6:].strip().decode("utf-8", "replace")))
        # blank lines end events; ':' lines are comments (pings); other fields are ignored


def flush_sse(buffer: bytearray) -> list[str]:
    """A last ``data:`` line with no trailing newline (some servers end ``[DONE]`` that way)."""
    raw = bytes(buffer).strip()
    buffer.clear()
    return [raw[5:].lstrip(b" ").decode("utf-8", "replace")] if raw.startswith(b"data:") else []
