"""The llm-rubric judge: what it is asked, and its own envelope read as a verdict or as why there is none.

The judge's envelope travels with the model's (``Envelope.judgements``), so grading stays pure
and a replay grades exactly what the live run saw. A judge that did not answer, or did not
answer the JSON it was asked for, says nothing about the model: the case is undelivered.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..model import Case, Envelope
from .assertions.base import JudgeVerdict
from .envelope import AnswerTooDeep, classify, json_payload, loads_answer

RUBRIC_TYPE = "llm-rubric"
JUDGE_SYSTEM = ("You grade an assistant's answer against a rubric. Reply with only a JSON object, "
                '{"pass": true or false, "reason": "one short sentence"}: '
                'pass is true only when the answer meets every part of the rubric.')
NO_VERDICT = "no recorded judge verdict: record it on a live run"


@dataclass(frozen=True)
class Rubric:
    """One llm-rubric assertion, prepared: the rubric text and the named endpoint that judges it."""

    text: str
    endpoint: str


def rubrics(case: Case) -> list[Rubric]:
    """The case's llm-rubric assertions, in order."""
    return [e.value for e in case.expectations if e.kind.name == RUBRIC_TYPE]


def judge_request(case: Case, rubric: Rubric, answer: str) -> Case:
    """The judge's call as a case of its own: the rubric comes first in its prompt, the question and the answer
    after."""
    asked = next((m.get("content") for m in reversed(case.messages) if m.get("role") == "user"), "")
    question = asked if isinstance(asked, str) else json.dumps(asked, ensure_ascii=False)
    prompt = f"Rubric: {rubric.text}\n\nQuestion:\n{question}\n\nAnswer:\n{answer}"
    return Case(id=f"{case.id} (judge {rubric.endpoint})", stratum=None, file=case.file, line=case.line, digest="",
                messages=({"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": prompt}),
                request={"response_format": {"type": "json_object"}})


def verdicts_of(envelope: Envelope, case: Case) -> dict[str, JudgeVerdict]:
    """Each rubric's verdict from the judge envelopes the model's envelope carries (rubric text -> JudgeVerdict)."""
    asked = rubrics(case)
    return {r.text: verdict_of(r, envelope.judgements.get(r.text)) for r in asked} if asked else {}


def verdict_of(rubric: Rubric, env: Envelope | None) -> JudgeVerdict:
    """One judge envelope labelled like any other: undelivered unless it holds the asked ``{"pass", "reason"}``."""
    if env is None:
        return JudgeVerdict(None, f"llm-rubric: {NO_VERDICT}")
    who = f"judge {rubric.endpoint!r}"
    judged = classify(env)
    if judged.label is not None or judged.reply is None:
        why = judged.reasons[0] if judged.reasons else "no answer"
        return JudgeVerdict(None, f"{who} gave no verdict ({(judged.label.value if judged.label else 'empty')}): {why}")
    fingerprint = _fingerprint(judged.reply.model_id, env.request)
    try:
        said: Any = loads_answer(json_payload(judged.reply))
    except (json.JSONDecodeError, AnswerTooDeep):
        said = None
    if not isinstance(said, dict) or not isinstance(said.get("pass"), bool):
        got = (judged.reply.content or "")[:120]
        return JudgeVerdict(None, f'{who} did not answer the asked JSON {{"pass": true|false, "reason": ...}}: '
                            f'got {got!r}', fingerprint)
    return JudgeVerdict(said["pass"], str(said.get("reason") or "no reason given"), fingerprint)


def _fingerprint(model_id: str | None, request: Mapping[str, Any] | None) -> str:
    """``<model id>@<temperature>``: the model the judge said it was, at the temperature it was asked."""
    parts = (request or {}).get("parts") or {}
    model = model_id or parts.get("model") or "?"
    temperature = parts.get("temperature")
    return f"{model}@{float(temperature):g}" if isinstance(temperature, (int, float)) else f"{model}@?"
