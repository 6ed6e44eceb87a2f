"""``similar``: the answer means much the same as an expected text, by the cosine similarity of their embeddings.

The embeddings come from the endpoint named ``embeddings`` in envelope-ci.yaml (OpenAI's
``/v1/embeddings`` shape). They are read, never fetched, here: the live run attaches each
embeddings call's envelope to the model's (``Envelope.embeddings``, by the text embedded), so
grading stays pure and a replay grades what the live run saw. An embedding that did not
arrive says nothing of the model: grading makes the case undelivered, never ``wrong``.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ...model import Case, Data, Envelope, Label
from ...providers.base import Reply
from ...sources.endpoints import EMBEDDINGS
from ..envelope import classify
from .base import Answer, AssertionType, Failure, Resolve

SIMILAR_TYPE = "similar"
NO_EMBEDDING = "no recorded embedding: record it on a live run"
_SHOWN = 60  # the most of an expected text a reason quotes

Vector = tuple[float, ...]


class Similar(Data, frozen=True):
    """One ``similar`` assertion, prepared: the expected texts (one is enough) and the cosine it must reach."""

    texts: tuple[str, ...]
    threshold: float


class Embedded(Data, frozen=True):
    """The embeddings a case's ``similar`` assertions need, read from the envelope: the vectors by text, why any is
    missing, and the models that made them (``embeddings:<model id>``, for the case's fingerprint)."""

    vectors: Mapping[str, Vector]
    missing: tuple[str, ...]
    models: tuple[str, ...]


NOTHING_EMBEDDED = Embedded({}, (), ())


def answer_text(reply: Reply) -> str:
    """The text ``similar`` compares, as every text assertion reads it: the content, else the refusal."""
    return reply.content or reply.refusal or ""


def similars(case: Case) -> list[Similar]:
    """The case's ``similar`` assertions (negated or not), in order."""
    return [e.value for e in case.expectations if e.kind.name == SIMILAR_TYPE]


def texts_to_embed(case: Case, reply: Reply) -> list[str]:
    """Every text the case's ``similar`` assertions compare, once each: the answer's (when it has one) first."""
    asked = similars(case)
    if not asked:
        return []
    answer = answer_text(reply)
    return list(dict.fromkeys([*([answer] if answer else []), *(t for s in asked for t in s.texts)]))


def embedded(envelope: Envelope, case: Case, reply: Reply) -> Embedded:
    """The vectors the case's ``similar`` assertions compare, from the embeddings the envelope carries."""
    wanted = texts_to_embed(case, reply)
    if not wanted:
        return NOTHING_EMBEDDED
    vectors: dict[str, Vector] = {}
    missing: list[str] = []
    models: set[str] = set()
    for text in wanted:
        env = envelope.embeddings.get(text)
        vector, why = read_vector(env)
        if env is None or vector is None:
            missing.append(f"similar: the {EMBEDDINGS!r} endpoint gave no embedding of {_which(text, reply)}: {why}")
            continue
        vectors[text] = vector
        models.add(_model_of(env))
    if len({len(v) for v in vectors.values()}) > 1:
        missing.append(f"similar: the {EMBEDDINGS!r} endpoint gave embeddings of different lengths "
                       f"({', '.join(map(str, sorted({len(v) for v in vectors.values()})))}): not one model's")
    return Embedded(vectors, tuple(missing), tuple(sorted(models)))


def _which(text: str, reply: Reply) -> str:
    return "the answer" if text == answer_text(reply) else repr(_shown(text))


def read_vector(env: Envelope | None) -> tuple[Vector | None, str]:
    """The embedding an embeddings call's envelope holds, or None and why: not there, not delivered, not the shape
    asked for."""
    if env is None:
        return None, NO_EMBEDDING
    judged = classify(env)
    if judged.label is Label.DROP:
        return None, judged.reasons[0] if judged.reasons else "no response"
    data = env.body.get("data") if isinstance(env.body, dict) else None
    found = data[0].get("embedding") if isinstance(data, list) and data and isinstance(data[0], dict) else None
    if not isinstance(found, list) or not found or not all(_is_number(x) for x in found):
        return None, "the body is not OpenAI's embeddings shape {data: [{embedding: [numbers]}]}"
    vector = tuple(float(x) for x in found)
    if not all(math.isfinite(x) for x in vector) or not any(vector):
        return None, "the embedding is all zeros or not finite: it has no direction to compare"
    return vector, ""


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _model_of(env: Envelope) -> str:
    """The embeddings model, for the case's fingerprint: as its body names it, else as it was asked for."""
    body = env.body if isinstance(env.body, dict) else {}
    parts = (env.request or {}).get("parts")
    named = body.get("model") or (parts.get("model") if isinstance(parts, dict) else None)
    return f"embeddings:{named if isinstance(named, str) and named else '?'}"


def cosine(a: Vector, b: Vector) -> float:
    """The cosine of the angle between two vectors of one length, neither all zeros."""
    dot = math.fsum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(math.fsum(x * x for x in a)) * math.sqrt(math.fsum(y * y for y in b)))


def _scores(answer: Answer, value: Similar) -> list[tuple[float, str]]:
    """Each expected text's similarity to the answer, best first; none when the answer has no text."""
    mine = answer.embeddings.get(answer.text) if answer.text else None
    if mine is None:
        return []
    found = [(cosine(mine, answer.embeddings[t]), t) for t in value.texts if t in answer.embeddings]
    return sorted(found, key=lambda pair: -pair[0])


def _shown(text: str) -> str:
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "…"


def _check(answer: Answer, value: Similar, case: Any) -> list[str]:
    if not answer.text:
        return ["similar: the answer has no text to compare"]
    scores = _scores(answer, value)
    if not scores:  # no embedding: grading has made the case undelivered already
        return []
    best, text = scores[0]
    return [] if best >= value.threshold else [f"similar: {best:.3f} < {value.threshold:g} to {_shown(text)!r}"]


def _check_not(answer: Answer, value: Similar, case: Any) -> list[str]:
    return [f"similar: {score:.3f} >= {value.threshold:g} to the forbidden {_shown(text)!r}"
            for score, text in _scores(answer, value) if score >= value.threshold]


def _prepare(value: Mapping[str, Any], resolve: Resolve) -> Similar:
    texts = value["value"]
    return Similar(tuple([texts] if isinstance(texts, str) else texts), float(value["threshold"]))


ASSERTION = AssertionType(
    name=SIMILAR_TYPE,
    failure=Failure.WRONG,
    check=_check,
    check_not=_check_not,
    value_schema={"anyOf": [{"type": "string", "minLength": 1},
                            {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}}]},
    description=("An expected text, or a list of them (one is enough): the cosine similarity of the answer's "
                 "embedding and its must reach 'threshold' (embeddings from the endpoint 'embeddings' of "
                 "envelope-ci.yaml)."),
    prepare=_prepare,
    entry_keys={"threshold": {"type": "number", "minimum": -1, "maximum": 1,
                              "description": "similar: the least cosine similarity that passes, from -1 to 1."}},
)
