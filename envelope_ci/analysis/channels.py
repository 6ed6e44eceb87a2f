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
    cost_usd: float | None = None  # the median cost of a call, for a case with a ``cost`` budget
    cost_estimated: bool = False  # some of that usage was estimated from characters


def _scaled(value: float, slack: float) -> float:
    """``value`` x ``slack`` without float noise: 400 x 1.15 is 460, not 459.99999999999994."""
    return round(value * slack, 6)


def size_breaches(measure: Measure, max_chars: int | None, pin: Pin | None, t: Thresholds,
                  max_cost: float | None = None) -> list[str]:
    """Why the answer is too big: over the case's own budgets (characters, dollars), or over its pin with slack."""
    out: list[str] = []
    if measure.chars is not None and max_chars is not None and measure.chars > max_chars:
        out.append(f"size: {measure.chars} chars > max_chars {max_chars}")
    if measure.cost_usd is not None and max_cost is not None and measure.cost_usd > max_cost:
        said = " (usage estimated from characters / 4)" if measure.cost_estimated else ""
        out.append(f"cost: ${measure.cost_usd:.6g} per call > ${max_cost:g}{said}")
    if pin is None or measure.chars is None:
        return out
    if pin.chars is not None and measure.chars > size_limit(pin.chars, t):
        out.append(f"size: {measure.chars} chars > pin {pin.chars} x{t.size_slack:g}")
    real_tokens = not measure.tokens_estimated and not pin.tokens_estimated
    if (real_tokens and pin.tokens is not None and measure.tokens is not None
            and measure.tokens > size_limit(pin.tokens, t)):
        out.append(f"size: {measure.tokens} tokens > pin {pin.tokens} x{t.size_slack:g}")
    return out


def size_limit(pinned: float, t: Thresholds) -> float:
    """The most an answer may measure (chars or tokens) against its pin's measure: the pin with size slack."""
    return _scaled(pinned, t.size_slack)


def time_limit_ms(pinned_ms: float, t: Thresholds) -> float:
    """The slowest a case may be: relative slack, but never tighter than the absolute floor."""
    return max(_scaled(pinned_ms, t.time_slack), pinned_ms + t.time_floor_ms)


# p95 says something of a case's tail only over this many repeats, on both sides (docs/gate.md).
P95_MIN_REPEATS = 5


class Timing(Data, frozen=True):
    """What a case's time is judged against: the level its time was measured at, and its repeats."""

    level_ms: float | None = None  # its batch's median time (analysis.levels); None: judged in plain milliseconds
    repeats: int = 1


_PLAIN = Timing()


def scale_of(pin: Pin, timing: Timing) -> float:
    """How much slower the case's batch ran than the pin's: the pin's times are scaled by it before judging."""
    if timing.level_ms is None or not pin.level_ms:
        return 1.0
    return timing.level_ms / pin.level_ms


def time_breaches(measure: Measure, pin: Pin | None, t: Thresholds, timing: Timing | None = None) -> list[str]:
    """Why the answer is too slow against its pin (median over repeats; p95 over enough repeats), at its level."""
    if pin is None:
        return []
    timing = timing or _PLAIN
    scale = scale_of(pin, timing)
    out = []
    for name, now, pinned in (("time", measure.ms, pin.ms), ("time p95", measure.ms_p95, _p95(pin, timing))):
        if now is None or pinned is None:
            continue
        limit = time_limit_ms(pinned * scale, t)
        if now > limit:
            scaled = (f" x{scale:.2f} for the level {pin.level_ms:.0f} → {timing.level_ms:.0f} ms" if scale != 1.0
                      else "")
            out.append(f"{name}: {now:.1f} ms > {limit:.1f} ms (pin {pinned:.1f} ms{scaled})")
    return out


def _p95(pin: Pin, timing: Timing) -> float | None:
    """The pinned p95 when the tail is judged: the pin and the run both have enough repeats to have one."""
    if min(pin.right_of[1], timing.repeats) < P95_MIN_REPEATS:
        return None
    return pin.ms_p95


def channel_for(
    label: Label,
    measure: Measure,
    max_chars: int | None,
    pin: Pin | None,
    comparable: bool,
    thresholds: Thresholds,
    timing: Timing | None = None,
    max_cost: float | None = None,
    max_latency_ms: float | None = None,
) -> tuple[Channel, list[str]]:
    """The first channel that broke, in the method's order, with the envelope reasons.

    A pin from another fingerprint is not a like-for-like baseline, so it is ignored
    for size and time; the case's own budgets (``max_chars``, ``max_cost``, ``max_latency_ms``) still apply.
    """
    judged_pin = pin if comparable else None
    size = size_breaches(measure, max_chars, judged_pin, thresholds, max_cost)
    timing_reasons = latency_breaches(measure, max_latency_ms) + time_breaches(measure, judged_pin, thresholds, timing)
    if label in _LABEL_CHANNEL:
        return _LABEL_CHANNEL[label], size + timing_reasons
    if size:
        return Channel.SIZE, size + timing_reasons
    if timing_reasons:
        return Channel.TIME, timing_reasons
    return Channel.STABLE, _latency_unmeasured(measure, max_latency_ms)


def latency_breaches(measure: Measure, max_latency_ms: float | None) -> list[str]:
    """Why the answer is too slow for the case's own ``latency`` budget: its median time over the delivered repeats,
    in plain milliseconds (a budget is the user's, not the batch's level)."""
    if measure.ms is None or max_latency_ms is None or measure.ms <= max_latency_ms:
        return []
    return [f"latency: {measure.ms:.1f} ms > {max_latency_ms:g} ms"]


def _latency_unmeasured(measure: Measure, max_latency_ms: float | None) -> list[str]:
    """A ``latency`` budget with no time to judge (a bare ``completion`` has none) says so rather than pass unseen."""
    if max_latency_ms is None or measure.ms is not None:
        return []
    return ["latency: not judged, the answer has no time (a bare completion records none)"]
