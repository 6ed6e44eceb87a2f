"""Label and channel counts and the three rates: naive pass rate, yield, accuracy on yield."""
from __future__ import annotations

from collections.abc import Sequence

from ..model import Channel, Label
from ..report.model import Summary
from .cases import CaseResult


def rate(num: int, den: int) -> float | None:
    """A ratio, or None (JSON null) when there is nothing to divide by: never NaN."""
    return round(num / den, 6) if den else None


def summarize(results: Sequence[CaseResult]) -> Summary:
    """Label counts (all six) and the three rates, none folded into another."""
    counts = {label.value: 0 for label in Label}
    channels = {c.value: 0 for c in Channel}
    for r in results:
        counts[r.label.value] += 1
        channels[r.channel.value] += 1
    total = len(results)
    right, wrong = counts[Label.RIGHT.value], counts[Label.WRONG.value]
    return Summary(
        total=total,
        counts=counts,
        channels=channels,
        naive_pass_rate=rate(right, total),
        yield_=rate(right + wrong, total),
        accuracy_on_yield=rate(right, right + wrong),
        delivered=total - counts[Label.DROP.value] - counts[Label.EMPTY.value],
        stable=channels[Channel.STABLE.value],
    )
