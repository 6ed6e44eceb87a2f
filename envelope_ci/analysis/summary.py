"""Label and channel counts and the three rates: naive pass rate, yield, accuracy on yield."""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from ..findings import Summary
from ..model import Channel, Label
from .cases import Judged


def rate(num: float, den: int) -> float | None:
    """A ratio, or None (JSON null) when there is nothing to divide by: never NaN."""
    return round(num / den, 6) if den else None


def summarize(results: Sequence[Judged]) -> Summary:
    """Label counts (all six) and the three rates, none folded into another."""
    by_label = Counter(r.label for r in results)  # counted by member: a member's ``.value`` is a slow lookup per case
    by_channel = Counter(r.channel for r in results)
    counts = {label.value: by_label[label] for label in Label}
    channels = {c.value: by_channel[c] for c in Channel}
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
