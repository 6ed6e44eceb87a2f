"""One suite, planted the same way on each wire format's fake server: the labels every provider must agree on.

``LABELS`` is the label table: a case id, the ``Behaviour`` planted for it, and the label it must
get through any provider. ``serve(fake)`` plants them; ``live_labels`` runs the real CLI against
the fake with ``--provider`` and gives each case's label, and writes a recording to replay.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from envelope_ci.grading.envelope import EnvelopeClass, classify
from envelope_ci.model import Envelope
from tests.support.fake_openai import Behaviour, FakeOpenAI
from tests.support.suites import make_suite, run_report

WEATHER_TOOL = {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city.",
                                                 "parameters": {"type": "object",
                                                                "properties": {"city": {"type": "string"}}}}}
# (case id, what the server answers, the label every provider must give it)
LABELS: tuple[tuple[str, Behaviour, str], ...] = (
    ("plain", Behaviour.ok("The capital is Paris."), "right"),
    ("wrong-answer", Behaviour.ok("The capital is Rome."), "wrong"),
    ("tool-call", Behaviour.tool_call("get_weather", {"city": "Edinburgh"}), "right"),
    ("length-stop", Behaviour.length('{"capital": "Par'), "truncated"),
    ("policy-stop", Behaviour.content_filter(), "wrong"),
    ("refusal", Behaviour.refusal("I can't help with that."), "wrong"),
    ("said-nothing", Behaviour.null_content(), "empty"),
    ("server-error", Behaviour.server_error(500), "drop"),
    ("bad-request", Behaviour.status(400), "drop"),
)
STREAM_ONLY: tuple[tuple[str, Behaviour, str], ...] = (
    ("stream-cut", Behaviour.stream_cut("The capital is"), "drop"),
    ("stream-error", Behaviour.stream_error("The capital"), "drop"),
)


class Stream(Protocol):
    """A provider's stream assembler (``MessageStream``, ``ResponseStream``), as the wire tests drive it."""

    complete: bool

    def feed(self, data: str) -> bool: ...

    def body(self) -> Any: ...


S = TypeVar("S", bound=Stream)


def fed(stream: S, events: Iterable[dict[str, Any]]) -> S:
    """``stream`` after each event, sent as its ``data:`` payload."""
    for event in events:
        stream.feed(json.dumps(event))
    return stream


def judged(stream: Stream, provider: str) -> EnvelopeClass:
    """How grading labels what a streamed 200 assembled (``stream_complete`` as the stream says)."""
    return classify(Envelope(http_status=200, body=stream.body(), stream_complete=stream.complete, provider=provider))


def _case(case_id: str) -> dict[str, Any]:
    if case_id == "tool-call":
        return {"id": case_id, "prompt": f"[[{case_id}]] Weather in Edinburgh?", "tools": [WEATHER_TOOL],
                "assert": [{"type": "tool-call", "value": {"name": "get_weather", "arguments": {"city": "Edinburgh"}}}]}
    return {"id": case_id, "system": "Answer in one sentence.", "prompt": f"[[{case_id}]] Capital of France?",
            "max_tokens": 64, "assert": [{"type": "contains", "value": "Paris"}]}


def serve(fake: FakeOpenAI, table: Sequence[tuple[str, Behaviour, str]]) -> None:
    """Plant each case's answer on the fake."""
    for case_id, behaviour, _ in table:
        fake.plant(case_id, behaviour)


def suite_of(tmp_path: Path, table: Sequence[tuple[str, Behaviour, str]]) -> Path:
    """The fixtures directory of the table's cases."""
    return make_suite(tmp_path, [_case(case_id) for case_id, _, _ in table])


def live_labels(tmp_path: Path, fake: FakeOpenAI, provider: str, *args: str,
                table: Sequence[tuple[str, Behaviour, str]] = LABELS) -> tuple[dict[str, str], dict[str, Any]]:
    """Each case's label from a live run of the real CLI against ``fake`` with ``--provider``; and the report."""
    serve(fake, table)
    suite = suite_of(tmp_path, table)
    result, report = run_report(suite, tmp_path / "out", "--base-url", fake.url, "--model", "m", "--provider",
                                provider, "--max-attempts", "1", "--record", tmp_path / "rec.jsonl", *args,
                                env={"EVAL_API_KEY": "sk-test-key-123"})
    assert report is not None, result.err
    return {c["id"]: c["label"] for c in report["cases"]}, report


def replayed_labels(tmp_path: Path, table: Sequence[tuple[str, Behaviour, str]] = LABELS) -> dict[str, str]:
    """Each case's label from an offline replay of the recording ``live_labels`` wrote: no provider flag."""
    result, report = run_report(suite_of(tmp_path, table), tmp_path / "replayed", "--replay", tmp_path / "rec.jsonl")
    assert report is not None, result.err
    return {c["id"]: c["label"] for c in report["cases"]}
