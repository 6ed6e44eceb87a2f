"""``latency``: how long the answer may take, in milliseconds, send to last byte; the time channel.

A slow answer is not wrong, it is late: the label stays, and ``analysis.channels`` judges the
median time of the case's delivered repeats against the budget, as it judges a pin's time.
Offline, the time is the recording's ``elapsed_ms``.
"""
from __future__ import annotations

from typing import Any

from ...model import LATENCY_TYPE
from .base import Answer, Failure
from .budget import budget_assertion


def latency_reason(ms: float, budget: float) -> str:
    """The reason an answer is over its time budget."""
    return f"latency: {ms:.1f} ms > {budget:g} ms"


def _check(answer: Answer, value: float, case: Any) -> list[str]:
    ms = answer.elapsed_ms
    return [latency_reason(ms, value)] if ms is not None and ms > value else []


ASSERTION = budget_assertion(
    LATENCY_TYPE, Failure.TIME, "milliseconds", _check,
    "The most milliseconds an answer may take, send to last byte (the time channel, on the median of repeats).")
