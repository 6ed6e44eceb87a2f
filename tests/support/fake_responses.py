"""A fake OpenAI Responses endpoint (``POST /v1/responses``) beside the fake chat-completions server.

It is ``FakeOpenAI`` with another handler: the same plants and ``Behaviour``s, each answered in
the Responses API's shapes (docs/providers.md cites them): a response ``{"object": "response",
"status", "incomplete_details", "output": [message items with output_text or refusal parts,
function_call items], "usage": {"input_tokens", "output_tokens"}}``, a length stop being
``status: incomplete`` with reason ``max_output_tokens`` and a content filter reason
``content_filter``; a stream of typed events (``response.created``, ``response.output_item.added``,
``response.output_text.delta``, ``response.function_call_arguments.delta``,
``response.output_item.done``, then ``response.completed`` or ``response.incomplete``; a cut
stream stops before them; ``stream_error`` ends in ``response.failed``), never ``[DONE]``.
Keys (``[[KEY]]``) are found in ``input``.

``scripted(events, response)`` answers exactly as written, for the shapes no Behaviour makes
(``reasoning`` items, several parts, an ``error`` event, a terminal event without ``output``): a
streamed request gets the events in order and nothing after them, a plain one ``response``.
"""
from __future__ import annotations

import math
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from tests.support.fake_openai import Behaviour, FakeOpenAI, _dumps, _Handler, _message_texts, _pieces, _rand, _Req


def scripted(events: Sequence[Mapping[str, Any]] = (), response: Mapping[str, Any] | None = None,
             **opts: Any) -> Behaviour:
    """An answer as written: each of ``events`` sent as ``event: TYPE`` / ``data: JSON`` to a streamed request (a
    list without a terminal event is a cut stream), ``response`` the 200 body of a plain one."""
    return Behaviour(kind="scripted", body={"events": [dict(e) for e in events], "response": dict(response or {})},
                     **opts)


def _input_as_messages(body: Any) -> dict[str, Any]:
    items = body.get("input") if isinstance(body, dict) else None
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    return {"messages": [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []}


class _ResponsesHandler(_Handler):
    server_version = "fake-responses/1.0"

    def _answer(self, t: float, raw: bytes, body: Any, path: str) -> None:
        fake = self.server.fake
        if not path.endswith("/responses") or not isinstance(body, dict):
            fake._record_plain(t, "POST", self.path, self.headers, raw, body=body, client=self.client_address)
            self._not_found()
            return
        beh, rec = fake._dispatch(t, self.path, self.headers, raw, body, self.client_address)
        mt = body.get("max_output_tokens")
        prompt = sum(len(s) for s in _message_texts(_input_as_messages(body))) + len(str(body.get("instructions") or ""))
        self._serve(beh, _Req(t=t, body=body, stream=rec.stream, include_usage=True, prompt_tokens=max(1, prompt // 4 + 7),
                              max_tokens=mt if isinstance(mt, int) and not isinstance(mt, bool) else None,
                              id="resp_" + _rand(24), created=int(time.time())))

    def _items(self, b: Behaviour) -> list[dict[str, Any]]:
        if b.kind in ("null_content", "content_filter", "empty_choices"):
            return []
        items: list[dict[str, Any]] = []
        if b.kind == "refusal":
            items.append(self._message([{"type": "refusal", "refusal": b.refusal_text}]))
        elif b.content:
            items.append(self._message([{"type": "output_text", "text": b.content, "annotations": []}]))
        if b.kind == "tool_call":
            items.append({"type": "function_call", "id": "fc_" + _rand(24), "call_id": "call_" + _rand(24),
                          "name": b.tool_name, "arguments": b.tool_arguments or "", "status": "completed"})
        return items

    def _message(self, parts: list[dict[str, Any]]) -> dict[str, Any]:
        return {"type": "message", "id": "msg_" + _rand(24), "status": "completed", "role": "assistant",
                "content": parts}

    def _response(self, b: Behaviour, req: _Req, output: list[dict[str, Any]] | None,
                  status: str | None = None) -> dict[str, Any]:
        reason = {"length": "max_output_tokens", "content_filter": "content_filter"}.get(b.finish_reason or "")
        out: dict[str, Any] = {"id": req.id, "object": "response", "created_at": req.created,
                               "status": status or ("incomplete" if reason else "completed"),
                               "incomplete_details": {"reason": reason} if reason and status is None else None,
                               "error": None, "model": b.model}
        if output is not None:
            out["output"] = output
        if b.usage and status is None:
            text = (b.content or "") + (b.tool_arguments or "") + (b.refusal_text or "")
            tokens = req.max_tokens if reason == "max_output_tokens" and req.max_tokens else (
                max(1, math.ceil(len(text) / 4)) if text else 0)
            out["usage"] = {"input_tokens": req.prompt_tokens, "output_tokens": tokens,
                            "total_tokens": req.prompt_tokens + tokens}
        return out

    def _completion(self, b: Behaviour, req: _Req, choice: dict[str, Any] | None,
                    completion_tokens: int | None = None) -> dict[str, Any]:
        if b.kind == "scripted":
            return dict(b.body["response"])
        return self._response(b, req, None if b.kind == "empty_choices" else self._items(b))

    def _ok_events(self, b: Behaviour, req: _Req, pieces: list[str] | None = None,
                   finish: bool = True) -> Iterator[tuple[bytes, bool]]:
        if b.kind == "scripted":
            for data in b.body["events"]:
                yield b"event: " + str(data.get("type")).encode() + b"\ndata: " + _dumps(data) + b"\n\n", True
            return
        seq = iter(range(1_000_000))
        event = self._event_maker(seq)
        yield event("response.created", response=self._response(b, req, [], "in_progress")), False
        items = self._items(b)
        for index, item in enumerate(items):
            yield from self._item_events(event, index, item, pieces)
        if not finish:
            return
        final = self._response(b, req, items)
        yield event("response.incomplete" if final["status"] == "incomplete" else "response.completed",
                    response=final), True

    def _event_maker(self, seq: Iterator[int]) -> Any:
        def event(kind: str, **payload: Any) -> bytes:
            data = {"type": kind, "sequence_number": next(seq), **payload}
            return b"event: " + kind.encode() + b"\ndata: " + _dumps(data) + b"\n\n"
        return event

    def _item_events(self, event: Any, index: int, item: dict[str, Any],
                     pieces: list[str] | None) -> Iterator[tuple[bytes, bool]]:
        if item["type"] == "function_call":
            yield event("response.output_item.added", output_index=index, item={**item, "arguments": "",
                                                                                "status": "in_progress"}), False
            for i in range(0, len(item["arguments"]), 8):
                yield event("response.function_call_arguments.delta", output_index=index, item_id=item["id"],
                            delta=item["arguments"][i:i + 8]), True
        else:
            yield event("response.output_item.added", output_index=index, item={**item, "content": [],
                                                                                "status": "in_progress"}), False
            part = item["content"][0]
            kind = "response.refusal.delta" if part["type"] == "refusal" else "response.output_text.delta"
            text = part.get("refusal") or part.get("text") or ""
            for p in (pieces if pieces is not None else _pieces(text)):
                yield event(kind, output_index=index, item_id=item["id"], content_index=0, delta=p), True
        yield event("response.output_item.done", output_index=index, item=item), False

    def _special_events(self, b: Behaviour, req: _Req) -> Iterator[tuple[bytes, bool]]:
        yield from self._ok_events(b, req, finish=False)
        if b.kind == "stream_error":
            failed = self._response(b, req, [], "failed")
            failed["error"] = {"code": "server_error", "message": b.error_message}
            yield (b"event: response.failed\ndata: " + _dumps({"type": "response.failed", "response": failed})
                   + b"\n\n"), True

    def _malformed_events(self, b: Behaviour, req: _Req) -> Iterator[tuple[bytes, bool]]:
        first = next(self._ok_events(b, req))
        yield first, False
        yield b'data: {"type": "response.output_text.delta", "output_in\n\n', True


class FakeResponses(FakeOpenAI):
    """The fake server in the Responses API's shapes, at ``{url}/responses`` (``url`` ends in ``/v1``)."""

    handler = _ResponsesHandler

    def _find_key(self, body: Any) -> tuple[str | None, bool]:
        return super()._find_key(_input_as_messages(body))
