"""Envelope + case -> one Grade: the envelope's own label first, then the case's assertions. Pure.

Shape assertions (``schema`` on failure) are judged before content ones (``wrong``): an
answer that is not the JSON asked for is not checked for what it says. Before content, an
llm-rubric judge that gave no verdict, or an embedding ``similar`` needs that did not arrive,
makes the case undelivered: it says nothing of the model. Budgets (``max-chars``, ``cost``,
``latency``) are not judged here but in analysis, on the median of repeats: the grade carries
what they read (size, time, and the call's cost where a case asks for it).
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from msgspec.structs import replace

from ..model import Case, Envelope, Grade, Label
from ..providers.base import Reply
from .assertions.base import Answer, Failure, JudgeVerdict, Usage
from .assertions.cost import cost_of
from .assertions.similar import NOTHING_EMBEDDED, Embedded, answer_text, embedded
from .envelope import AnswerTooDeep, EnvelopeClass, classify, json_payload, loads_answer, speaks_json, spoken_text
from .rubric import verdicts_of

# A Markdown code fence opening a line: the answer was dressed up, not given as JSON.
_FENCE = re.compile(r"^[ \t]*```", re.M)
# The assertions' failures in the order they are judged, each with the label it gives.
_SHAPE_THEN_CONTENT = ((Failure.SCHEMA, Label.SCHEMA), (Failure.WRONG, Label.WRONG))


def grade(envelope: Envelope, case: Case) -> Grade:
    """Label one envelope for one case, with what was read to get there."""
    judged = classify(envelope)
    reply = judged.reply
    text = envelope.completion if envelope.completion is not None else (spoken_text(reply) if reply else None)
    verdicts = verdicts_of(envelope, case)
    found = embedded(envelope, case, reply) if judged.label is None and reply is not None else NOTHING_EMBEDDED
    seen = _seen(envelope, reply, text, case, verdicts, found)
    label, reasons = _label(judged, case, seen, found.missing)
    usage = seen.usage if not label.is_transport else None
    return Grade(
        label=label,
        reasons=(*reasons, *envelope.notes),
        text=text,
        finish_reason=reply.finish_reason if reply else None,
        model_id=reply.model_id if reply else None,
        http_status=envelope.http_status,
        chars=len(text) if text is not None and usage is not None else None,
        tokens=usage.output_tokens if usage is not None else None,
        tokens_estimated=usage is not None and usage.output_estimated,
        elapsed_ms=envelope.elapsed_ms,
        ttft_ms=envelope.ttft_ms,
        attempts=envelope.attempts,
        judge=",".join(sorted({*(v.judge for v in verdicts.values() if v.judge), *found.models})) or None,
        level_ms=envelope.level_ms,
        provider=envelope.provider,
        cost_usd=cost_of(usage, seen.model_id, case) if usage is not None and case.prices is not None else None,
        cost_estimated=usage is not None and case.prices is not None and usage.estimated,
    )


def _seen(envelope: Envelope, reply: Reply | None, text: str | None, case: Case, verdicts: Mapping[str, JudgeVerdict],
          found: Embedded) -> Answer:
    """What assertions see of the envelope besides the text (filled in by ``_label``): usage, model id, times,
    provider, the judges' verdicts and the embeddings."""
    return Answer("", verdicts=verdicts, embeddings=found.vectors,
                  usage=_usage(reply, text, case) if reply is not None and text is not None else None,
                  model_id=reply.model_id if reply else None, elapsed_ms=envelope.elapsed_ms,
                  ttft_ms=envelope.ttft_ms, provider=envelope.provider if envelope.completion is None else None)


def _usage(reply: Reply, text: str, case: Case) -> Usage:
    """The call's tokens as the server counted them; what it did not count, estimated as characters / 4."""
    given_in, given_out = reply.prompt_tokens, reply.completion_tokens
    return Usage(given_in if given_in is not None else prompt_tokens_estimate(case),
                 given_out if given_out is not None else _estimate(len(text)), given_in is None, given_out is None)


def prompt_tokens_estimate(case: Case) -> int:
    """The tokens a case's messages come to, estimated as characters / 4 (what a server did not count; what a
    token rate limit will charge, before it answers)."""
    return _estimate(sum(map(_chars, case.messages)))


def _estimate(chars: int) -> int:
    return max(1, round(chars / 4)) if chars else 0


def _chars(message: Mapping[str, Any]) -> int:
    """The characters of a message's text: its content, or the text of its content parts."""
    content = message.get("content")
    if isinstance(content, str):
        return len(content)
    parts = content if isinstance(content, list) else []
    return sum(len(p["text"]) for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str))


def _label(judged: EnvelopeClass, case: Case, seen: Answer, unembedded: Sequence[str]) -> tuple[Label, list[str]]:
    reasons = list(judged.reasons)
    if judged.label is not None or judged.reply is None:
        return judged.label or Label.EMPTY, reasons
    reply = judged.reply
    if reply.tool_calls and not (reply.content and reply.content.strip()) and "tools" not in case.request:
        return Label.WRONG, reasons + [f"replied with a tool call {_call_names(reply)} instead of an answer"]
    # Assertions read the message text only, never a tool call's name or arguments.
    text = answer_text(reply)
    parsed, has_json = None, False
    if case.reads_json:
        if not speaks_json(reply):
            if case.wants_json:
                return Label.WRONG, reasons + ["no JSON answer to grade"]
        elif judged.parsed:  # parsed already, telling a cut answer from a whole one
            parsed, has_json = judged.parsed[0], True
        else:
            payload = json_payload(reply)
            try:
                parsed, has_json = loads_answer(payload), True
            except json.JSONDecodeError as exc:
                if case.wants_json:
                    hint = " (wrapped in a Markdown code fence)" if _FENCE.search(payload) else ""
                    return Label.SCHEMA, reasons + [f"answer is not JSON{hint}: {exc.msg} at char {exc.pos}"]
            except AnswerTooDeep as exc:
                if case.wants_json:
                    return Label.SCHEMA, reasons + [f"answer is not JSON that can be graded: {exc}"]
    answer = replace(seen, text=text, parsed=parsed, has_json=has_json, tool_calls=reply.tool_calls)
    # a judge or an embedding that did not arrive says nothing of the model: undelivered, before content
    unjudged = [*(v.reason for v in seen.verdicts.values() if v.passed is None), *unembedded]
    for failure, label in _SHAPE_THEN_CONTENT:
        if failure is Failure.WRONG and unjudged:
            return Label.DROP, reasons + unjudged
        failed = [why for e in case.expectations if failure in e.kind.judged_as
                  for why in e.failures_as(failure, answer, case)]
        if failed:
            return label, reasons + failed
    return Label.RIGHT, reasons


def _call_names(reply: Reply) -> str:
    names = [str(fn.get("name", "?")) for call in reply.tool_calls if isinstance(fn := call.get("function"), dict)]
    return ", ".join(names) or "(unnamed)"


def grade_all(cases: Sequence[Case], envelopes: Mapping[str, Sequence[Envelope]]) -> dict[str, list[Grade]]:
    """Grade every envelope of every case, in order."""
    return {case.id: [grade(e, case) for e in envelopes[case.id]] for case in cases}
