"""What one pins file says of the suite, for its history: each stratum's pass rate, yield, median time and size, and
each case's label.

The pins are measurements a reviewed run made, so they are read as that run's results: a stratum's
pass rate counts its delivered pins by their share of right repeats (``strata.py``), yield is
(right + wrong) / cases (``summary.py``).
"""
from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping

import msgspec

from ..findings import StratumRow
from ..model import STRATA_SPEC, UNSTRATIFIED, Data, Label, Pin, Pins
from .strata import whole
from .summary import rate


class PinsMeasures(Data, frozen=True):
    """One pins file's measures: the point a history draws for the commit that wrote it."""

    cases: int
    strata: Mapping[str, StratumRow]  # easy, medium, stretch always; unstratified only when some pin has none
    yield_: float | None = msgspec.field(name="yield")
    median_ms: float | None
    median_chars: float | None
    labels: Mapping[str, str]  # case id -> its pinned label


def measure(pins: Pins, strata: Mapping[str, str | None]) -> PinsMeasures:
    """The measures of ``pins``, each case in the stratum ``strata`` gives it (unstratified when none)."""
    cases = pins.cases
    labels = [pin.label for pin in cases.values()]
    right, wrong = labels.count(Label.RIGHT.value), labels.count(Label.WRONG.value)
    return PinsMeasures(
        cases=len(cases),
        strata=_strata_rows(cases, strata),
        yield_=rate(right + wrong, len(cases)),
        median_ms=_median(pin.ms for pin in cases.values()),
        median_chars=_median(pin.chars for pin in cases.values()),
        labels={cid: cases[cid].label for cid in sorted(cases)},
    )


def _strata_rows(cases: Mapping[str, Pin], strata: Mapping[str, str | None]) -> dict[str, StratumRow]:
    """Each stratum's row over its pins, as a run's report would count the run that wrote them."""
    rows: dict[str, StratumRow] = {}
    for spec in (*STRATA_SPEC, UNSTRATIFIED):
        mine = [pin for cid, pin in cases.items() if (strata.get(cid) or UNSTRATIFIED.name) == spec.name]
        if spec is UNSTRATIFIED and not mine:
            continue
        delivered = [pin for pin in mine if not Label(pin.label).is_transport]
        passed = sum((_share(pin) for pin in delivered), 0.0)
        rows[spec.name] = StratumRow(n=len(delivered), passed=whole(passed), pass_rate=rate(passed, len(delivered)),
                                     cases=len(mine), undelivered=len(mine) - len(delivered))
    return rows


def _share(pin: Pin) -> float:
    """A pin's share of right repeats: a flaky pin counts in part, as its case would in a run."""
    right, repeats = pin.right_of
    return right / repeats if right < repeats else 1.0


def _median(values: Iterable[float | int | None]) -> float | None:
    """The median of the values measured, rounded to 0.1; None when none was."""
    measured = [v for v in values if v is not None]
    return round(float(statistics.median(measured)), 1) if measured else None
