"""Ollama's ``POST /api/generate`` as an envelope-ci provider: a whole third-party wire format in one module.

It inherits from ``OpenAIChat`` what Ollama shares with it (the URL after the base, Bearer auth,
error shapes, rate-limit headers) and says only what differs: the request, the reply, the stop words.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envelope_ci.model import Case
from envelope_ci.providers.base import Reply, Stop, stream_event, token_count
from envelope_ci.providers.openai_chat import OpenAIChat


class StreamedGenerate:
    """Each streamed payload is one generate object; the last says ``done``."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.last: dict[str, Any] = {}
        self.done = False
        self.bad_lines = 0

    @property
    def complete(self) -> bool:
        return self.done

    def feed(self, data: str) -> bool:
        chunk = stream_event(data)
        if chunk is None:
            self.bad_lines += 1
            return False
        self.last, self.done = chunk, bool(chunk.get("done"))
        self.parts.append(str(chunk.get("response") or ""))
        return True

    def body(self) -> dict[str, Any]:
        return {**self.last, "response": "".join(self.parts)}


class OllamaGenerate(OpenAIChat):
    """``POST {base_url}/api/generate``: ``prompt`` and ``system`` in, ``response`` and ``done_reason`` out."""

    name = "ollama-generate"
    path = "/api/generate"
    stop_field = "done_reason"
    answer_fields: tuple[str, ...] = ("model", "system", "prompt", "options")

    def request_body(self, case: Case, model: str, temperature: float, stream: bool) -> dict[str, Any]:
        said = {m.get("role"): m.get("content") for m in case.messages}
        options = {"temperature": temperature, "num_predict": case.request.get("max_tokens", -1)}
        body = {"model": model, "prompt": said.get("user") or "", "options": options, "stream": stream}
        return {**body, "system": said["system"]} if said.get("system") else body

    def read_reply(self, body: Mapping[str, Any]) -> Reply | None:  # type: ignore[override]
        if not isinstance(body.get("response"), str):
            return None
        return Reply(body["response"], (), None, body.get("done_reason"), body.get("model"),
                     token_count(body, "eval_count"), token_count(body, "prompt_eval_count"))

    def stop(self, finish_reason: str | None) -> Stop:
        return {"stop": Stop.END, "length": Stop.LENGTH}.get(finish_reason or "", Stop.UNKNOWN)

    def new_stream(self) -> StreamedGenerate:  # type: ignore[override]
        return StreamedGenerate()


PROVIDER = OllamaGenerate()
