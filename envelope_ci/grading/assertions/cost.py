"""``cost``: what one call may cost in dollars, from its usage and the prices in ``envelope-ci.yaml``; the size channel.

No price list ships in the package (prices change): ``prices:`` in envelope-ci.yaml gives
dollars per million input and output tokens by model id, and a case that asks for ``cost`` of
a model without a price is bad input. Like ``max-chars``, a dearer answer is not wrong, it is
too big: the label stays, and ``analysis.channels`` judges the median cost of the repeats.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from msgspec.structs import replace

from ...errors import Problem, UsageError
from ...model import COST_TYPE, Case
from .base import Answer, Failure, Usage
from .budget import budget_assertion

Prices = Mapping[str, Mapping[str, float]]
PRICES_HINT = "prices: {MODEL_ID: {input: DOLLARS, output: DOLLARS}} per million tokens"
# A dated snapshot's suffix (gpt-4o-mini-2024-07-18): its price is the model's unless the snapshot has its own.
_SNAPSHOT = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8})$")  # gpt-4o-2024-08-06, claude-sonnet-4-20250514


def price_of(prices: Prices, model_id: str) -> Mapping[str, float] | None:
    """The price of ``model_id``: its own, else that of the model it is a dated snapshot of; never a prefix's (a
    price of gpt-4o is not gpt-4o-mini's)."""
    return prices.get(model_id) or prices.get(_SNAPSHOT.sub("", model_id))


def cost_of(usage: Usage, model_id: str | None, case: Case) -> float:
    """Dollars for one call: input tokens x input price + output tokens x output price, prices per million tokens."""
    prices = case.prices or {}
    price = price_of(prices, model_id) if model_id else None
    if price is None:
        raise UsageError([Problem(case.file, case.line, "assert", _unpriced(model_id, prices))])
    return (usage.input_tokens * price["input"] + usage.output_tokens * price["output"]) / 1e6


def _unpriced(model_id: str | None, prices: Prices) -> str:
    if model_id is None:
        return "cost: the answer names no model id (its body has no 'model'), so it cannot be priced"
    return (f"cost: no price for model {model_id!r} under 'prices' in envelope-ci.yaml "
            f"(it prices {', '.join(sorted(prices))}); add it: {PRICES_HINT}")


def cost_reason(dollars: float, budget: float, estimated: bool) -> str:
    """The reason a call is over its budget, saying when its usage was estimated."""
    said = " (usage estimated from characters / 4)" if estimated else ""
    return f"cost: ${dollars:.6g} per call > ${budget:g}{said}"


def _check(answer: Answer, value: float, case: Case) -> list[str]:
    if answer.usage is None or case.prices is None:
        return []
    dollars = cost_of(answer.usage, answer.model_id, case)
    return [cost_reason(dollars, value, answer.usage.estimated)] if dollars > value else []


def priced(cases: Sequence[Case], prices: Prices, shown: str) -> list[Case]:
    """The cases with the prices bound to those that ask for ``cost``; without any price, each such case is bad input
    on its line."""
    asking = [c for c in cases if c.max_cost is not None]
    if asking and not prices:
        raise UsageError([Problem(c.file, c.line, "assert", f"cost needs prices, and {shown} sets none: {PRICES_HINT}")
                          for c in asking])
    return [replace(c, prices=prices) if c.max_cost is not None else c for c in cases]


ASSERTION = budget_assertion(
    COST_TYPE, Failure.SIZE, "dollars per call", _check,
    "The most one call may cost, in dollars, from its usage and the prices under 'prices' in envelope-ci.yaml (the "
    "size channel, on the median of repeats).")
