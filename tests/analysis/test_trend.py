"""What one pins file measures for its history point (``analysis/trend.py``): counted as a run's report counts."""
from __future__ import annotations

from envelope_ci.analysis.trend import measure
from envelope_ci.findings import StratumRow
from envelope_ci.model import Pin, Pins


def pin(label: str, *, ms: float | None = 100.0, chars: int | None = 50, passes: tuple[int, int] | None = None) -> Pin:
    return Pin(hash="sha256:x", label=label, channel="stable", chars=chars, tokens=None, tokens_estimated=True, ms=ms,
               ms_p95=ms, fingerprint=None, passes=passes)


def pins(**cases: Pin) -> Pins:
    return Pins(fixtures_hash="sha256:0", fingerprint=None, cases=cases)


def test_a_flaky_pin_counts_its_share_of_right_repeats_and_a_drop_is_not_delivered() -> None:
    m = measure(pins(a=pin("right"), b=pin("wrong", passes=(2, 3)), c=pin("drop", ms=None, chars=None)),
                {"a": "easy", "b": "easy", "c": "easy"})
    assert m.strata["easy"] == StratumRow(n=2, passed=1.666667, pass_rate=0.833333, cases=3, undelivered=1)
    assert m.yield_ == 0.666667  # right and wrong, of every case
    assert m.median_ms == 100.0 and m.median_chars == 50.0  # over the pins that measured them


def test_every_stratum_has_a_row_and_unstratified_only_when_a_pin_has_none() -> None:
    stratified = measure(pins(a=pin("right")), {"a": "medium"})
    assert list(stratified.strata) == ["easy", "medium", "stretch"]
    assert stratified.strata["easy"].pass_rate is None
    loose = measure(pins(a=pin("right"), z=pin("wrong")), {"a": "medium"})
    assert loose.strata["unstratified"] == StratumRow(n=1, passed=0, pass_rate=0.0, cases=1, undelivered=0)


def test_empty_pins_measure_nothing_rather_than_zero() -> None:
    m = measure(pins(), {})
    assert m.cases == 0 and m.yield_ is None and m.median_ms is None and m.labels == {}
