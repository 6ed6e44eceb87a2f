"""Envelope + case -> one Grade: the envelope's own label first, then the case's assertions. Pure.

Shape assertions (``schema`` on failure) are judged before content ones (``wrong``): an
answer that is not the JSON asked for is not checked for what it says. Before content, an
llm-rubric judge that gave no verdict makes the case undelivered: it says nothing of the model.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

from ..model import Case, Envelope, Grade, Label
from ..providers.base import Reply
from .assertions.base import Answer, Failure, JudgeVerdict
from .envelope import AnswerTooDeep, EnvelopeClass, classify, json_payload, loads_answer, speaks_json, spoken_text
from .rubric import verdicts_of

# A Markdown code fence opening a line: the answer was dressed up, not given as JSON.
_FENCE = re.compile(r"^[ \t]*```", re.M)
# The assertions' failures in the order they are judged, each with the label it gives.
_SHAPE_THEN_CONTENT = ((Failure.SCHEMA, Label.SCHEMA), (Failure.WRONG, Label.WRONG))


def grade(envelope: Envelope, case: Case) -> Grade:
    """Label one envelope for one case, with what was read to get there."""
    verdicts = verdicts_of(envelope, case)
    label, reasons, reply = _label(classify(envelope), case, verdicts)
    text = envelope.completion if envelope.completion is not None else (spoken_text(reply) if reply else None)
    chars = len(text) if text is not None and not label.is_transport else None
    tokens = reply.completion_tokens if reply and not label.is_transport else None
    estimated = chars is not None and tokens is None
    if estimated:
        tokens = max(1, round(chars / 4)) if chars else 0
    return Grade(
        label=label,
        reasons=(*reasons, *envelope.notes),
        text=text,
        finish_reason=reply.finish_reason if reply else None,
        model_id=reply.model_id if reply else None,
        http_status=envelope.http_status,
        chars=chars,
        tokens=tokens,
        tokens_estimated=estimated,
        elapsed_ms=envelope.elapsed_ms,
        ttft_ms=envelope.ttft_ms,
        attempts=envelope.attempts,
        judge=(",".join(sorted({v.judge for v in verdicts.values() if v.judge})) or None) if verdicts else None,
    )


def _label(judged: EnvelopeClass, case: Case,
           verdicts: Mapping[str, JudgeVerdict]) -> tuple[Label, list[str], Reply | None]:
    reasons = list(judged.reasons)
    if judged.label is not None or judged.reply is None:
        return judged.label or Label.EMPTY, reasons, judged.reply
    reply = judged.reply
    if reply.tool_calls and not (reply.content and reply.content.strip()) and "tools" not in case.request:
        return Label.WRONG, reasons + [f"replied with a tool call {_call_names(reply)} instead of an answer"], reply
    # Assertions read the message text only, never a tool call's name or arguments.
    text = reply.content or reply.refusal or ""
    parsed, has_json = None, False
    if case.reads_json:
        if not speaks_json(reply):
            if case.wants_json:
                return Label.WRONG, reasons + ["no JSON answer to grade"], reply
        elif judged.parsed:  # parsed already, telling a cut answer from a whole one
            parsed, has_json = judged.parsed[0], True
        else:
            payload = json_payload(reply)
            try:
                parsed, has_json = loads_answer(payload), True
            except json.JSONDecodeError as exc:
                if case.wants_json:
                    hint = " (wrapped in a Markdown code fence)" if _FENCE.search(payload) else ""
                    return Label.SCHEMA, reasons + [f"answer is not JSON{hint}: {exc.msg} at char {exc.pos}"], reply
            except AnswerTooDeep as exc:
                if case.wants_json:
                    return Label.SCHEMA, reasons + [f"answer is not JSON that can be graded: {exc}"], reply
    answer = Answer(text, parsed, has_json, reply.tool_calls, verdicts)
    unjudged = [v.reason for v in verdicts.values() if v.passed is None]
    for failure, label in _SHAPE_THEN_CONTENT:
        if failure is Failure.WRONG and unjudged:
            return Label.DROP, reasons + unjudged, reply
        failed = [why for e in case.expectations if failure in e.kind.judged_as
                  for why in e.failures_as(failure, answer, case)]
        if failed:
            return label, reasons + failed, reply
    return Label.RIGHT, reasons, reply


def _call_names(reply: Reply) -> str:
    names = [str(fn.get("name", "?")) for call in reply.tool_calls if isinstance(fn := call.get("function"), dict)]
    return ", ".join(names) or "(unnamed)"


def grade_all(cases: Sequence[Case], envelopes: Mapping[str, Sequence[Envelope]]) -> dict[str, list[Grade]]:
    """Grade every envelope of every case, in order."""
    return {case.id: [grade(e, case) for e in envelopes[case.id]] for case in cases}
