"""A fake Anthropic Messages endpoint (``POST /v1/messages``) beside the fake OpenAI server.

It is ``FakeOpenAI`` with another handler: the same plants, ``Behaviour``s, keys, records and
lifecycle, each Behaviour answered in Anthropic's shapes (docs/providers.md cites them), so one
suite planted the same way gives the same answers through either wire format:

- a body ``{"type": "message", "content": [text and tool_use blocks], "stop_reason", "usage":
  {"input_tokens", "output_tokens"}}``; ``finish_reason`` maps stop → ``end_turn``, length →
  ``max_tokens``, tool_calls → ``tool_use``, content_filter (and a refusal) → ``refusal``;
- a stream of ``event:``/``data:`` pairs: ``message_start``, ``content_block_start``, ``ping``,
  ``content_block_delta`` (``text_delta``, ``input_json_delta``), ``content_block_stop``,
  ``message_delta`` (stop_reason, output usage), ``message_stop``; a cut stream stops before
  ``message_delta``; ``stream_error`` sends an ``error`` event;
- a request without the ``anthropic-version`` header is refused with a 400, as the API does.

Errors in Anthropic's shape: ``anthropic_error``, ``overloaded`` (529), ``rate_limited`` (429
with ``retry-after`` and ``anthropic-ratelimit-*``); ``ratelimit_headers`` gives the headers
with an RFC 3339 reset for any Behaviour. ``huge`` is not served in this shape.

``scripted(events, message)`` answers exactly as written, for the shapes no Behaviour makes
(``thinking`` blocks, pings between deltas, an ``error`` event after the answer): a streamed
request gets the events in order and nothing after them, a plain one ``message`` as its body.
"""
from __future__ import annotations

import datetime
import json
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from tests.support.fake_openai import (
    Behaviour,
    FakeOpenAI,
    _dumps,
    _Handler,
    _message_texts,
    _pieces,
    _rand,
    _Req,
)

STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "content_filter": "refusal"}


def anthropic_error(code: int, kind: str, message: str, **opts: Any) -> Behaviour:
    """An error answer as the Messages API words one: ``{"type": "error", "error": {"type", "message"}}``."""
    return Behaviour.status(code, {"type": "error", "error": {"type": kind, "message": message}}, **opts)


def overloaded(**opts: Any) -> Behaviour:
    """529 ``overloaded_error``: Anthropic's "busy, come back"."""
    return anthropic_error(529, "overloaded_error", "Overloaded", **opts)


def ratelimit_headers(limit: int, remaining: int, reset_in_s: float, kind: str = "requests") -> dict[str, str]:
    """``anthropic-ratelimit-KIND-{limit,remaining,reset}``, the reset an RFC 3339 time ``reset_in_s`` from now."""
    when = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=reset_in_s)
    return {f"anthropic-ratelimit-{kind}-limit": str(limit), f"anthropic-ratelimit-{kind}-remaining": str(remaining),
            f"anthropic-ratelimit-{kind}-reset": when.isoformat(timespec="milliseconds").replace("+00:00", "Z")}


def rate_limited(retry_after: float | None = None, **opts: Any) -> Behaviour:
    """429 ``rate_limit_error`` with the request limit spent, and ``retry-after`` when given."""
    headers = ratelimit_headers(50, 0, 1.0)
    if retry_after is not None:
        headers["retry-after"] = str(retry_after)
    headers.update(opts.pop("headers", None) or {})
    return anthropic_error(429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit",
                           headers=headers, **opts)


def scripted(events: Sequence[Mapping[str, Any]] = (), message: Mapping[str, Any] | None = None,
             **opts: Any) -> Behaviour:
    """An answer as written: each of ``events`` sent as ``event: TYPE`` / ``data: JSON`` to a streamed request (a
    list without ``message_stop`` is a cut stream), ``message`` the 200 body of a plain one."""
    return Behaviour(kind="scripted", body={"events": [dict(e) for e in events], "message": dict(message or {})},
                     **opts)


def _event(kind: str, payload: dict[str, Any]) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + _dumps({"type": kind, **payload}) + b"\n\n"


class _AnthropicHandler(_Handler):
    server_version = "fake-anthropic/1.0"

    def _answer(self, t: float, raw: bytes, body: Any, path: str) -> None:
        fake = self.server.fake
        if not path.endswith("/v1/messages") or not isinstance(body, dict) or "anthropic-version" not in self.headers:
            fake._record_plain(t, "POST", self.path, self.headers, raw, body=body, client=self.client_address)
            why = ("anthropic-version: header is required" if isinstance(body, dict) and path.endswith("/v1/messages")
                   else f"Not found ({self.command} {self.path})")
            error = {"type": "error", "error": {"type": "invalid_request_error", "message": why}}
            self._respond(400 if "header" in why else 404, _dumps(error), "application/json")
            return
        beh, rec = fake._dispatch(t, self.path, self.headers, raw, body, self.client_address)
        system = body.get("system") if isinstance(body.get("system"), str) else ""
        mt = body.get("max_tokens")
        self._serve(beh, _Req(t=t, body=body, stream=rec.stream, include_usage=True,
                              prompt_tokens=max(1, (sum(len(s) for s in _message_texts(body)) + len(system)) // 4 + 7),
                              max_tokens=mt if isinstance(mt, int) and not isinstance(mt, bool) else None,
                              id="msg_" + _rand(24), created=int(time.time())))

    def _output_tokens(self, b: Behaviour, req: _Req) -> int:
        if b.finish_reason == "length" and req.max_tokens is not None:
            return req.max_tokens
        text = (b.content or "") + (b.tool_arguments or "") + (b.refusal_text or "")
        return max(1, math.ceil(len(text) / 4)) if text else 0

    def _blocks(self, b: Behaviour) -> list[dict[str, Any]]:
        if b.kind in ("null_content", "content_filter", "empty_choices"):
            return []
        text = b.refusal_text if b.kind == "refusal" else b.content
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        if b.kind == "tool_call":
            blocks.append({"type": "tool_use", "id": "toolu_" + _rand(24), "name": b.tool_name,
                           "input": json.loads(b.tool_arguments or "{}")})
        return blocks

    def _stop_reason(self, b: Behaviour) -> str | None:
        if b.kind == "refusal":
            return "refusal"
        return STOP_REASONS.get(b.finish_reason or "", b.finish_reason)

    def _completion(self, b: Behaviour, req: _Req, choice: dict[str, Any] | None,
                    completion_tokens: int | None = None) -> dict[str, Any]:
        if b.kind == "scripted":
            return dict(b.body["message"])
        out: dict[str, Any] = {"id": req.id, "type": "message", "role": "assistant", "model": b.model}
        if b.kind != "empty_choices":
            out["content"] = self._blocks(b)
        out.update(stop_reason=self._stop_reason(b), stop_sequence=None)
        if b.usage:
            out["usage"] = {"input_tokens": req.prompt_tokens, "output_tokens": self._output_tokens(b, req)}
        return out

    def _ok_events(self, b: Behaviour, req: _Req, pieces: list[str] | None = None,
                   finish: bool = True) -> Iterator[tuple[bytes, bool]]:
        if b.kind == "scripted":
            for event in b.body["events"]:
                yield _event(str(event.get("type")), event), True
            return
        message = {"id": req.id, "type": "message", "role": "assistant", "content": [], "model": b.model,
                   "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": req.prompt_tokens,
                                                                          "output_tokens": 1}}
        yield _event("message_start", {"message": message}), False
        if b.kind == "empty_choices":
            return
        for index, block in enumerate(self._blocks(b)):
            yield from self._block_events(index, block, pieces)
        yield _event("ping", {}), False
        if not finish:
            return
        yield _event("message_delta", {"delta": {"stop_reason": self._stop_reason(b), "stop_sequence": None},
                                       "usage": {"output_tokens": self._output_tokens(b, req)}}), True
        yield _event("message_stop", {}), False

    def _block_events(self, index: int, block: dict[str, Any], pieces: list[str] | None) -> Iterator[tuple[bytes, bool]]:
        if block["type"] == "text":
            yield _event("content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}}), False
            for p in (pieces if pieces is not None else _pieces(block["text"])):
                yield _event("content_block_delta", {"index": index, "delta": {"type": "text_delta", "text": p}}), True
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            yield _event("content_block_start", {"index": index, "content_block": start}), False
            args = json.dumps(block["input"], separators=(",", ":"))
            for i in range(0, len(args), 8):
                delta = {"type": "input_json_delta", "partial_json": args[i:i + 8]}
                yield _event("content_block_delta", {"index": index, "delta": delta}), True
        yield _event("content_block_stop", {"index": index}), False

    def _special_events(self, b: Behaviour, req: _Req) -> Iterator[tuple[bytes, bool]]:
        yield from self._ok_events(b, req, finish=False)
        if b.kind == "stream_error":
            yield _event("error", {"error": {"type": "overloaded_error", "message": b.error_message}}), True

    def _malformed_events(self, b: Behaviour, req: _Req) -> Iterator[tuple[bytes, bool]]:
        first = next(self._ok_events(b, req))
        yield first, False
        line = _event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": b.content or "x"}})
        yield line[: len(line) // 2].rstrip(b"\n") + b"\n\n", True


class FakeAnthropic(FakeOpenAI):
    """The fake server in Anthropic's shapes: ``url`` is the base URL (``http://127.0.0.1:PORT``), as Anthropic's
    is; ``FakeOpenAI``'s ``url`` with ``/v1`` works too, as the provider accepts both."""

    handler = _AnthropicHandler

    @property
    def url(self) -> str:
        return self.base_url
