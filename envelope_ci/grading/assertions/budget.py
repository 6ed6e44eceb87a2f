"""The ``assert`` entry of a budget (``cost``, ``latency``): a positive number, as ``value`` or as ``threshold``.

promptfoo writes these budgets as ``threshold`` (``{type: cost, threshold: 0.002}``); envelope-ci
takes that spelling as well as ``value``, one of them, so a promptfoo suite reads the same.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import AssertionType, Check, Failure, Resolve

THRESHOLD = "threshold"


def budget_schema(unit: str) -> dict[str, Any]:
    """The JSON-Schema fragment of a budget in ``unit``: a number above zero."""
    return {"type": "number", "exclusiveMinimum": 0, "description": f"The budget, in {unit}."}


def budget_problem(value: Mapping[str, Any]) -> tuple[str, str] | None:
    """Exactly one of ``value`` and ``threshold``: two budgets in one entry would leave the reader guessing."""
    given = [key for key in ("value", THRESHOLD) if value.get(key) is not None]
    if len(given) == 1:
        return None
    if given:
        return "", "give the budget once, as value or as threshold (promptfoo's name), not both"
    return "", "give the budget as value (or threshold, promptfoo's name)"


def budget_of(value: Mapping[str, Any], resolve: Resolve) -> float:
    """The budget, whichever key gave it."""
    given = value["value"] if value.get("value") is not None else value[THRESHOLD]
    return float(given)


def budget_assertion(name: str, failure: Failure, unit: str, check: Check, description: str) -> AssertionType:
    """A budget's assertion type: its value in ``unit``, given as ``value`` or ``threshold``, and no ``not-`` form."""
    return AssertionType(name=name, failure=failure, check=check, value_schema=budget_schema(unit),
                         value_optional=True, description=description, value_problem=budget_problem,
                         prepare=budget_of, entry_keys={THRESHOLD: budget_schema(unit)},
                         optional_keys=frozenset({THRESHOLD}))
