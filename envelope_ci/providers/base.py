"""The provider seam: what any chat endpoint's wire format must offer the live client and the grader.

A provider turns a case into a request body, a response body into a ``Reply``, and a
stream into the body a non-streamed call would have returned. The grader reads only
``Reply``; the live client reads only the provider.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ..model import Case, Data


class Reply(Data, frozen=True):
    """The parts of a completion body the grader cares about."""

    content: str | None
    tool_calls: tuple[Mapping[str, Any], ...]
    refusal: str | None
    finish_reason: str | None
    model_id: str | None
    completion_tokens: int | None


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


class Provider(Protocol):
    """One wire format: request building, response parsing and stream assembly."""

    name: str
    path: str  # appended to the base URL
    # Non-standard SSE fields that carry payloads, and how each becomes a ``data`` payload.
    sse_fields: Mapping[str, Callable[[str], str]]

    def request_body(self, case: Case, model: str, temperature: float, stream: bool) -> dict[str, Any]:
        """The JSON body that asks ``model`` for the case's answer."""

    def read_reply(self, body: Mapping[str, Any]) -> Reply | None:
        """The first choice of a response body; None when there is no choice."""

    def error_message(self, body: Any, limit: int = 300) -> str | None:
        """The server's own words from any error shape it sends."""

    def new_stream(self) -> StreamAssembly:
        """An empty assembler for one streamed response."""
