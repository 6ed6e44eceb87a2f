"""Repeats -> one case result: its label, measurements, fingerprint and outcome against its pin."""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Protocol

from ..model import DEFAULT_PROVIDER, Case, Channel, Data, Fingerprint, Grade, Label, Outcome, Pin, Thresholds
from .channels import Measure, Timing, channel_for
from .evidence import flaky_judgement

_SEVERITY = [Label.TRUNCATED, Label.SCHEMA, Label.WRONG, Label.RIGHT]


class CaseResult(Data, frozen=True):
    """One case, graded over its repeats and judged against its pin."""

    case: Case
    label: Label
    channel: Channel
    reasons: tuple[str, ...]
    measure: Measure
    grades: tuple[Grade, ...]
    fingerprint: Fingerprint
    pin: Pin | None
    comparable: bool | None
    outcome: Outcome
    level_ms: float | None = None  # the level its time was measured at (analysis.levels), when it has its own
    passes: tuple[int, int] = (0, 0)  # right repeats out of delivered ones: what a pin keeps, what a stratum counts

    @property
    def id(self) -> str:
        return self.case.id

    @property
    def stratum(self) -> str | None:
        return self.case.stratum

    @property
    def repeats(self) -> int:
        return len(self.grades)

    @property
    def delivered(self) -> bool:
        return not self.label.is_transport

    @property
    def lost_repeats(self) -> tuple[int, ...]:
        """The repeats (1-based) still dropped or empty after retries while others were delivered: lost evidence."""
        return lost_repeats_of(self.label, (g.label for g in self.grades))

    @property
    def shown(self) -> Grade:
        """The repeat whose label the case carries: its text and reasons are the ones shown."""
        return shown_repeat(self.grades, self.label)


def lost_repeats_of(label: Label, repeats: Iterable[Label]) -> tuple[int, ...]:
    """The repeats (1-based) of a delivered case (its ``label``) that were dropped or empty: none of an
    undelivered one."""
    if label.is_transport:
        return ()
    return tuple(i for i, repeat in enumerate(repeats, start=1) if repeat.is_transport)


class Judged(Protocol):
    """What the whole-run analysis (``conclude``: strata, lanes, the gate, the next steps) reads of one case's result.

    A run's ``CaseResult``; a merge's rows (``report.read_shards.RowResult``): a merge has the rows,
    not the cases, measures and grades they came from.
    """

    @property
    def id(self) -> str: ...
    @property
    def stratum(self) -> str | None: ...
    @property
    def label(self) -> Label: ...
    @property
    def channel(self) -> Channel: ...
    @property
    def outcome(self) -> Outcome: ...
    @property
    def reasons(self) -> tuple[str, ...]: ...
    @property
    def pin(self) -> Pin | None: ...
    @property
    def comparable(self) -> bool | None: ...
    @property
    def fingerprint(self) -> Fingerprint: ...
    @property
    def repeats(self) -> int: ...
    @property
    def delivered(self) -> bool: ...
    @property
    def lost_repeats(self) -> tuple[int, ...]: ...
    @property
    def passes(self) -> tuple[int, int]: ...
    @property
    def level_ms(self) -> float | None: ...


def passes_of(labels: Iterable[Label]) -> tuple[int, int]:
    """(right, delivered) over a case's repeats: transport says nothing of the model, so it is not counted."""
    delivered = [label for label in labels if not label.is_transport]
    return sum(label is Label.RIGHT for label in delivered), len(delivered)


def shown_repeat(grades: Sequence[Grade], label: Label) -> Grade:
    """The first repeat with the case's label, else the last: the one whose text and reasons a case shows."""
    if len(grades) == 1:
        return grades[0]
    return next((g for g in grades if g.label is label), grades[-1])


def _distinct(values: Sequence[str | None]) -> str | None:
    """The distinct values set, sorted and joined by commas; None when none is: the model ids or judges of a
    case's repeats."""
    if len(values) == 1:
        return values[0] or None
    return ",".join(sorted({v for v in values if v})) or None


def answered(grade: Grade) -> bool:
    """An answer a provider's wire format carried: a drop names no format it was read in, a bare completion none."""
    return not grade.label.is_transport and grade.http_status is not None


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile: an observed value, never an interpolation."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def median(values: list[float]) -> float:
    """``statistics.median``, without its generality: it is asked once per case, mostly of one value."""
    if len(values) == 1:
        return values[0]
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _median_int(values: list[int]) -> int | None:
    """``statistics.median_low`` as an int (the lower middle value of an even count)."""
    return int(sorted(values)[(len(values) - 1) // 2]) if values else None


def case_label(grades: Sequence[Grade]) -> Label:
    """The worst delivered repeat; transport only when nothing was delivered."""
    if len(grades) == 1:  # the commonest case: its one label, whatever it is
        return grades[0].label
    delivered = [g.label for g in grades if not g.label.is_transport]
    if delivered:
        return min(delivered, key=_SEVERITY.index)
    return grades[-1].label


def measure_of(grades: Sequence[Grade]) -> Measure:
    """Median size and time over delivered repeats, p95 of time."""
    if len(grades) == 1:
        return _measure_of_one(grades[0])
    ok = [g for g in grades if not g.label.is_transport]
    times = [g.elapsed_ms for g in ok if g.elapsed_ms is not None]
    # Tokens the server counted beat an estimate: judge on the repeats that reported usage,
    # and call the figure estimated only when none did.
    reported = [g.tokens for g in ok if g.tokens is not None and not g.tokens_estimated]
    estimated = [g.tokens for g in ok if g.tokens is not None and g.tokens_estimated]
    priced = [g for g in ok if g.cost_usd is not None]
    return Measure(
        chars=_median_int([g.chars for g in ok if g.chars is not None]),
        tokens=_median_int(reported or estimated),
        tokens_estimated=not reported and bool(estimated),
        ms=round(median(times), 3) if times else None,
        ms_p95=round(percentile(times, 0.95) or 0.0, 3) if times else None,
        cost_usd=median([g.cost_usd for g in priced if g.cost_usd is not None]) if priced else None,
        cost_estimated=any(g.cost_estimated for g in priced),
    )


def _measure_of_one(g: Grade) -> Measure:
    """``measure_of`` one repeat, the commonest case, without the lists: its own figures, or none if undelivered."""
    if g.label.is_transport:
        return _NOTHING_MEASURED
    if g.elapsed_ms is None:
        return Measure(g.chars, g.tokens, g.tokens is not None and g.tokens_estimated, None, None, g.cost_usd,
                       g.cost_estimated)
    # ``or 0.0`` as the general path's p95 has it: an int 0 is written 0.0 there, and report.json must not change.
    return Measure(g.chars, g.tokens, g.tokens is not None and g.tokens_estimated, round(g.elapsed_ms, 3),
                   round(g.elapsed_ms or 0.0, 3), g.cost_usd, g.cost_estimated)


_NOTHING_MEASURED = Measure(None, None, False, None, None)


def pinned_good(pin: Pin) -> bool:
    """The pin recorded a right answer within its envelope: a last-good baseline."""
    return pin.label == Label.RIGHT.value and pin.channel == Channel.STABLE.value


def outcome_of(label: Label, channel: Channel, pin: Pin | None, passes: tuple[int, int] = (1, 1),
               alpha: float = 0.05) -> tuple[Outcome, str | None]:
    """Regression when the pin was right and in its envelope and now is not, or when a flaky pin's rate dropped.

    A pin right in some repeats but not all is judged on its rate (``evidence``); the reason
    says how the rates compare either way.
    """
    if label.is_transport:
        return Outcome.UNDELIVERED, None
    if pin is None:
        return Outcome.NEW, None
    was_good = pinned_good(pin)
    now_good = channel is Channel.STABLE
    if was_good and not now_good:
        return Outcome.REGRESSION, None
    if not was_good and now_good:
        return Outcome.IMPROVEMENT, None
    if not was_good:
        return _against_a_pin_not_good(pin.right_of, passes, alpha)
    return Outcome.UNCHANGED, None


def _against_a_pin_not_good(pinned: tuple[int, int], passes: tuple[int, int],
                            alpha: float) -> tuple[Outcome, str | None]:
    """A case whose pin was no last-good baseline and is still not stable: a regression when it was right every
    time (its pin broke a size or time budget) and now is not, or when a flaky pin's rate dropped."""
    if passes[0] == passes[1]:  # right every time now too: what still fails is its envelope, as pinned
        return Outcome.KNOWN_FAILURE, None
    if pinned[0] == pinned[1]:
        return Outcome.REGRESSION, None
    if pinned[0] == 0:
        return Outcome.KNOWN_FAILURE, None
    dropped, why = flaky_judgement(pinned, passes, alpha)
    return (Outcome.REGRESSION if dropped else Outcome.KNOWN_FAILURE), why


@lru_cache(maxsize=256)
def _fingerprint(lane: str, endpoint_class: str, model_id: str | None, temperature: float, grader_version: str,
                 judge: str | None, provider: str | None) -> Fingerprint:
    """One shared object per distinct fingerprint: a 100k-case run has a handful, not one per case."""
    return Fingerprint(lane, endpoint_class, model_id, temperature, grader_version, judge,
                       provider or DEFAULT_PROVIDER)


def _repeats_reasons(grades: Sequence[Grade], label: Label) -> list[str]:
    """What a case's several repeats add to its reasons: each one's label, and each delivered case's repeat that
    was lost."""
    said = ["repeats: " + ",".join(g.label.value for g in grades)]
    if label.is_transport:
        return said
    return said + [f"repeat {i} of {len(grades)} got no gradeable answer: {(g.reasons or ('undelivered',))[0]}"
                   for i, g in enumerate(grades, start=1) if g.label.is_transport]


def judge_case(
    case: Case,
    grades: Sequence[Grade],
    run_fp: Fingerprint,
    pin: Pin | None,
    thresholds: Thresholds,
    level_ms: float | None = None,
) -> CaseResult:
    """Aggregate one case's repeats and compare them with its pin, its time at the level it was measured at."""
    label = case_label(grades)
    measure = measure_of(grades)
    # A case may set its own temperature; what was sent is what the measurement means.
    temperature = float(case.request.get("temperature", run_fp.temperature))
    judges = _distinct([g.judge for g in grades])  # an llm-rubric's judge is part of the experiment
    fp = _fingerprint(run_fp.lane, run_fp.endpoint_class, _distinct([g.model_id for g in grades]), temperature,
                      run_fp.grader_version, judges, _distinct([g.provider for g in grades if answered(g)]))
    comparable = None
    if pin is not None:
        comparable = pin.fingerprint is not None and pin.fingerprint.comparable_key() == fp.comparable_key()
    # Size and time are judged against the last-good measurement only: a failing answer's
    # size is no baseline (a fix that answers at full length is not a size regression).
    baseline = pin if pin is not None and pinned_good(pin) else None
    passes = passes_of(g.label for g in grades)
    channel, envelope_reasons = channel_for(label, measure, case.max_chars, baseline, bool(comparable), thresholds,
                                            Timing(level_ms, passes[1]), case.max_cost, case.max_latency_ms)
    reasons = [*shown_repeat(grades, label).reasons, *envelope_reasons]
    outcome, flaky = outcome_of(label, channel, pin, passes, thresholds.flip_alpha)
    if flaky:
        reasons.append(flaky)
    if pin is not None and not comparable and not label.is_transport:
        reasons.append("size/time not compared with the pin: its fingerprint is another experiment "
                       f"({fp.differences(pin.fingerprint)})")
    if len(grades) > 1:
        reasons += _repeats_reasons(grades, label)
    # a str enum: compared in C, not by .value
    if not any(e.kind.failure in ("schema", "wrong") for e in case.expectations):
        reasons.append("no expectation: this case can only fail on envelope channels "
                       "(transport, truncation, size, time)")
    return CaseResult(case, label, channel, tuple(reasons), measure, tuple(grades), fp, pin, comparable, outcome,
                      level_ms, passes)


