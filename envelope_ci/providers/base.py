"""The provider seam: what any chat endpoint's wire format must offer the live client and the grader.

A provider turns a case into a request body, a response body into a ``Reply``, and a
stream into the body a non-streamed call would have returned. The grader reads only
``Reply``, and asks the provider named on the envelope what its stop word means; the live
client reads only the provider. ``providers.registry`` finds them by name.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol, runtime_checkable

from ..model import Case, Data


class Reply(Data, frozen=True):
    """The parts of a completion body the grader cares about."""

    content: str | None
    tool_calls: tuple[Mapping[str, Any], ...]
    refusal: str | None
    finish_reason: str | None
    model_id: str | None
    completion_tokens: int | None
    prompt_tokens: int | None = None  # the input tokens, as the server counted them


class StreamAssembly(Protocol):
    """One streamed reply being put back together, one SSE ``data`` payload at a time."""

    @property
    def done(self) -> bool:
        """The server said the stream is over (it may still be incomplete)."""

    @property
    def complete(self) -> bool:
        """The stream carried the whole answer, not just an end marker."""

    @property
    def bad_lines(self) -> int:
        """Payloads that could not be read and were skipped."""

    def feed(self, data: str) -> bool:
        """Take one payload; True when it carried part of the answer (the time-to-first-token event)."""

    def body(self) -> dict[str, Any]:
        """The stream as the body a non-streamed call would have returned."""


class Stop(str, Enum):
    """How an answer ended, in the grader's words: each provider maps its own stop words onto these."""

    END = "end"  # the model finished: a natural end, a stop sequence, a tool call
    LENGTH = "length"  # a token limit cut it (label ``truncated``)
    FILTERED = "filtered"  # the provider's policy answered instead (a content filter, a refusal stop)
    UNKNOWN = "unknown"  # no stop word, or one the provider does not know: judged by what was said


@runtime_checkable
class Provider(Protocol):
    """One wire format: the request, its URL and auth headers, the reply and its stop, streams, rate-limit headers."""

    name: str  # chosen with --provider NAME, written on every envelope it makes
    stop_field: str  # where its bodies say why the answer stopped, as reasons name it ("finish_reason")
    # Non-standard SSE fields that carry payloads, and how each becomes a ``data`` payload.
    sse_fields: Mapping[str, Callable[[str], str]]
    busy_statuses: frozenset[int]  # statuses meaning "overloaded, come back soon" (503; Anthropic's 529)
    answer_fields: tuple[str, ...]  # the request body keys an answer depends on: the staleness digest

    def url(self, base_url: str) -> str:
        """Where to POST, at the base URL's origin."""

    def headers(self, api_key: str | None) -> dict[str, str]:
        """The request headers it needs, the key among them (each format sends it its own way)."""

    def request_body(self, case: Case, model: str, temperature: float, stream: bool) -> dict[str, Any]:
        """The JSON body that asks ``model`` for the case's answer."""

    def read_reply(self, body: Mapping[str, Any]) -> Reply | None:
        """The answer of a response body; None when it holds none."""

    def stop(self, finish_reason: str | None) -> Stop:
        """What a ``Reply.finish_reason`` of this format means to the grader."""

    def error_message(self, body: Any, limit: int = 300) -> str | None:
        """The server's own words from any error shape it sends."""

    def failure(self, body: Mapping[str, Any]) -> str | None:
        """Why a 200's JSON body says the call failed (an error object, a failed status), or None: a drop, retried."""

    def new_stream(self) -> StreamAssembly:
        """An empty assembler for one streamed response."""

    def rate_limits(self, headers: Mapping[str, str]) -> Mapping[str, str]:
        """Its rate-limit headers in the pacer's terms: ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}``,
        resets as durations, so every format feeds the same pacer."""


_TAGS = re.compile(r"<[^>]+>")


def error_message(body: Any, limit: int = 300) -> str | None:
    """The server's own words from any of the error shapes servers send (OpenAI's, Anthropic's, a proxy's page)."""
    if isinstance(body, dict):
        err = body.get("error", body if body.get("object") == "error" else None)
        if isinstance(err, str):
            return err[:limit]
        if isinstance(err, dict):
            parts = [str(err[k]) for k in ("message", "type", "code") if err.get(k) not in (None, "")]
            return " | ".join(parts)[:limit] if parts else json.dumps(err)[:limit]
        return None
    if isinstance(body, str) and body.strip():
        text = " ".join(_TAGS.sub(" ", body).split())
        return text[:limit] or None
    return None


def token_count(usage: Any, key: str) -> int | None:
    """A token count of ``usage``, when the server sent one as a whole number (a negative one counts nothing)."""
    found = usage.get(key) if isinstance(usage, dict) else None
    return found if isinstance(found, int) and not isinstance(found, bool) and found >= 0 else None


def stream_event(data: str) -> dict[str, Any] | None:
    """One stream event's JSON object; None for a payload that is not one (each stream counts those as bad lines)."""
    try:
        event = json.loads(data)
    except json.JSONDecodeError:
        return None
    return event if isinstance(event, dict) else None


def wire_options(options: Mapping[str, Any], dropped: Collection[str],
                 converted: Mapping[str, tuple[str, Callable[[Any], Any]]]) -> dict[str, Any]:
    """A case's request options in another wire format's words: those it has no word for left out, those it spells
    otherwise converted (``{"tools": ("tools", to_theirs)}``), the rest as written."""
    renamed = {name: convert(options[key]) for key, (name, convert) in converted.items() if key in options}
    return {**renamed, **{k: v for k, v in options.items() if k not in dropped and k not in converted}}


@dataclass
class EventStream:
    """A stream of JSON events (Anthropic's, the Responses API's): a payload that is not one is counted, not fatal;
    each event goes to ``on_event``."""

    error: Any = None
    done: bool = False
    bad_lines: int = 0

    def feed(self, data: str) -> bool:
        """Take one event's payload; True when it carried part of the answer (what ``on_event`` says)."""
        event = stream_event(data)
        if event is None:
            self.bad_lines += 1
            return False
        return self.on_event(event)

    def on_event(self, event: dict[str, Any]) -> bool:
        raise NotImplementedError


def error_in_body(body: Mapping[str, Any]) -> str | None:
    """The server's words when a 200's body is an error object (``error``, or ``object: error``), else None."""
    if body.get("error") or body.get("object") == "error":
        return str(error_message(body))
    return None
