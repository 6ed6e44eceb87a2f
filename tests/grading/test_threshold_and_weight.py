"""promptfoo's ``threshold`` is taken where it is a pass-or-fail line on one measure (``similar``, ``cost``,
``latency``); ``weight`` and a case-level ``threshold``, which would let a failed assertion pass a case, are refused
as unknown keys, never read and ignored (docs/assertions.md, "threshold and weight")."""
from __future__ import annotations

from typing import Any

import pytest

from envelope_ci.sources.cases import checked
from envelope_ci.sources.parse import RawCase


def problems(data: dict[str, Any]) -> list[tuple[str | None, str]]:
    raw = RawCase({"id": "c", "prompt": "p", **data}, "cases.yaml", 3, {"assert": 4, "threshold": 5})
    return [(p.field, p.message) for p in checked(raw).problems]


@pytest.mark.parametrize("entry", [
    {"type": "similar", "value": "five days", "threshold": 0.8},
    {"type": "cost", "threshold": 0.002},
    {"type": "latency", "threshold": 1500},
])
def test_threshold_is_taken_where_it_is_a_line_on_one_measure(entry: dict[str, Any]) -> None:
    assert problems({"assert": [entry]}) == []


@pytest.mark.parametrize("entry", [
    {"type": "contains", "value": "refund", "threshold": 0.5},
    {"type": "llm-rubric", "value": "polite", "endpoint": "judge", "threshold": 0.5},
])
def test_threshold_on_a_pass_or_fail_assertion_is_refused(entry: dict[str, Any]) -> None:
    assert problems({"assert": [entry]}) != []


def test_weight_is_refused_as_an_unknown_key_not_ignored() -> None:
    entry = {"type": "similar", "value": "five days", "threshold": 0.8, "weight": 2}
    assert ("assert.0.weight", "unknown key") in problems({"assert": [entry]})


def test_a_case_level_threshold_is_refused_as_an_unknown_key() -> None:
    found = problems({"threshold": 0.5, "assert": [{"type": "contains", "value": "refund"}]})
    assert [field for field, message in found if message.startswith("unknown key")] == ["threshold"]
