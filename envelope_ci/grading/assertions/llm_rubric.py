"""``llm-rubric``: a judge model, a named endpoint of envelope-ci.yaml, says whether the answer meets a rubric.

The verdict is read, never fetched, here: the live run attaches the judge's envelope to the
model's (``grading.rubric``), and grading turns a judge that gave no verdict into an
undelivered case before any content assertion is checked.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..rubric import Rubric
from .base import Answer, AssertionType, Failure, Resolve


def _prepare(value: Mapping[str, Any], resolve: Resolve) -> Rubric:
    return Rubric(value["value"], value["endpoint"])


def _check(answer: Answer, value: Rubric, case: Any) -> list[str]:
    verdict = answer.verdicts.get(value.text)
    if verdict is None or verdict.passed is not False:  # no verdict: grading has made the case undelivered already
        return []
    return [f"judge {value.endpoint!r}: {verdict.reason} (rubric: {value.text[:80]!r})"]


ASSERTION = AssertionType(
    name="llm-rubric",
    failure=Failure.WRONG,
    check=_check,
    value_schema={"type": "string", "minLength": 1},
    description=("A rubric a judge model (the endpoint named by 'endpoint', defined in envelope-ci.yaml) "
                 "must find the answer meets."),
    prepare=_prepare,
    entry_keys={"endpoint": {"type": "string", "minLength": 1,
                             "description": "The judge: a name under 'endpoints' in envelope-ci.yaml."}},
)
