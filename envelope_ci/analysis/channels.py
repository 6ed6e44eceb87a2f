"""Label + measurements + pin -> the one channel a case is reported under. Pure."""
from __future__ import annotations

from ..model import Channel, Data, Label, Pin, Thresholds

_LABEL_CHANNEL = {
    Label.DROP: Channel.TRANSPORT,
    Label.EMPTY: Channel.TRANSPORT,
    Label.TRUNCATED: Channel.TRUNCATED,
    Label.SCHEMA: Channel.SCHEMA,
    Label.WRONG: Channel.CORRECTNESS,
}


class Measure(Data, frozen=True):
    """A case's envelope figures, aggregated over its delivered repeats."""

    chars: int | None
    tokens: int | None
    tokens_estimated: bool
    ms: float | None
    ms_p95: float | None


def _scaled(value: float, slack: float) -> float:
    """``value`` x ``slack`` without float noise: 400 x 1.15 is 460, not 459.99999999999994."""
    return round(value * slack, 6)


def size_breaches(measure: Measure, max_chars: int | None, pin: Pin | None, t: Thresholds) -> list[str]:
    """Why the answer is too big: over the case's own budget, or over its pin with slack."""
    out: list[str] = []
    if measure.chars is not None and max_chars is not None and measure.chars > max_chars:
        out.append(f"size: {measure.chars} chars > max_chars {max_chars}")
    if pin is None or measure.chars is None:
        return out
    if pin.chars is not None and measure.chars > _scaled(pin.chars, t.size_slack):
        out.append(f"size: {measure.chars} chars > pin {pin.chars} x{t.size_slack:g}")
    real_tokens = not measure.tokens_estimated and not pin.tokens_estimated
    if (real_tokens and pin.tokens is not None and measure.tokens is not None
            and measure.tokens > _scaled(pin.tokens, t.size_slack)):
        out.append(f"size: {measure.tokens} tokens > pin {pin.tokens} x{t.size_slack:g}")
    return out


def time_limit_ms(pinned_ms: float, t: Thresholds) -> float:
    """The slowest a case may be: relative slack, but never tighter than the absolute floor."""
    return max(_scaled(pinned_ms, t.time_slack), pinned_ms + t.time_floor_ms)


def time_breaches(measure: Measure, pin: Pin | None, t: Thresholds) -> list[str]:
    """Why the answer is too slow against its pin (median over repeats)."""
    if pin is None or pin.ms is None or measure.ms is None:
        return []
    limit = time_limit_ms(pin.ms, t)
    if measure.ms > limit:
        return [f"time: {measure.ms:.1f} ms > {limit:.1f} ms (pin {pin.ms:.1f} ms)"]
    return []


def channel_for(
    label: Label,
    measure: Measure,
    max_chars: int | None,
    pin: Pin | None,
    comparable: bool,
    thresholds: Thresholds,
) -> tuple[Channel, list[str]]:
    """The first channel that broke, in the method's order, with the envelope reasons.

    A pin from another fingerprint is not a like-for-like baseline, so it is ignored
    for size and time; the case's own ``max_chars`` budget still applies.
    """
    judged_pin = pin if comparable else None
    size = size_breaches(measure, max_chars, judged_pin, thresholds)
    timing = time_breaches(measure, judged_pin, thresholds)
    if label in _LABEL_CHANNEL:
        return _LABEL_CHANNEL[label], size + timing
    if size:
        return Channel.SIZE, size + timing
    if timing:
        return Channel.TIME, timing
    return Channel.STABLE, []
