"""What a report shows, decided once: the headline's counts, the groups of cases by what broke, the channel x stratum
counts, and what moved against the pins. report.md and report.html both render this; neither decides it again.

Pure, and free of any format: every text it gives back is untrusted or plain words, escaped by the format that
renders it.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from operator import attrgetter
from typing import NamedTuple

from ..analysis.channels import Timing, scale_of, size_limit, time_limit_ms
from ..model import STRATA_SPEC, UNSTRATIFIED, Channel, Gate, Outcome, Thresholds
from .model import BaseDiffRow, CaseRow, Report, stratum_name


def fmt_rate(value: float | None) -> str:
    """A rate to three places, or n/a when its denominator was 0."""
    return "n/a" if value is None else f"{value:.3f}"


def plural(count: int, noun: str) -> str:
    """`1 case`, `2 cases`."""
    return f"{count} {noun}" + ("" if count == 1 else "s")


def measures(chars: int | None, tokens: int | None, ms: float | None) -> str:
    """A measurement in words with units (`70 chars · 20 tok · 412 ms`); what was not measured is left out."""
    parts = [f"{chars} chars" if chars is not None else "", f"{tokens} tok" if tokens is not None else "",
             f"{ms:.0f} ms" if ms is not None else ""]
    return " · ".join(p for p in parts if p)


# -- the headline ------------------------------------------------------------------------------


def headline_counts(report: Report) -> tuple[str, ...]:
    """The headline's figures in words, the number of cases first: every format's first line says the same."""
    s = report.summary
    return (plural(s.total, "case"), f"{s.stable} stable", plural(len(report.regressions), "regression"),
            plural(len(report.alerts), "alert"), f"yield {fmt_rate(s.yield_)}",
            f"accuracy on yield {fmt_rate(s.accuracy_on_yield)}", f"naive pass rate {fmt_rate(s.naive_pass_rate)}")


def model_moved(report: Report, text: Callable[[str], str]) -> str:
    """`model A → B in this PR's pins` when the PR re-pins on another model than the base branch's, else "".

    ``text`` makes a model id safe where it goes (Markdown, HTML, a terminal line).
    """
    change = report.base.model_change if report.base else None
    if change is None:
        return ""
    before, after = (text(m) if m else "no model id" for m in (change.base, change.head))
    return f"model {before} → {after} in this PR's pins"


class Downgrade(NamedTuple):
    """A case the base branch had right and stable that this PR's pins no longer do: its pin gone, or its label."""

    id: str
    removed: bool
    labels: tuple[str, str] | None  # (base label, head label) when the label moved


def downgrades(report: Report) -> list[Downgrade]:
    """The lowered baseline, case by case, in the report's order (``base.downgraded``)."""
    base = report.base
    if not base or not base.downgraded:
        return []
    rows = {d.id: d for d in base.diff}
    return [_downgrade(cid, rows.get(cid)) for cid in base.downgraded]


# The lowered baseline names at most this many cases; the rest are counted (report.json keeps them all).
DOWNGRADES_LISTED = 20


def baseline_lowered(report: Report, code: Callable[[str], str]) -> tuple[str, str] | None:
    """The lowered-baseline warning in one wording for every format: its bold lead, then the cases (``code``: an id,
    label or path in the format's code style) and what to do; None when nothing was downgraded."""
    down = downgrades(report)
    if not down:
        return None

    def how(d: Downgrade) -> str:
        if d.removed:
            return f"{code(d.id)} (pin removed)"
        return f"{code(d.id)} ({code(d.labels[0])} → {code(d.labels[1])})" if d.labels else code(d.id)

    listed = ", ".join(how(d) for d in down[:DOWNGRADES_LISTED]) + (" …" if len(down) > DOWNGRADES_LISTED else "")
    return (f"Baseline lowered. This PR downgrades {plural(len(down), 'pin')} that the base branch had right and "
            "stable:", f"{listed}. The run is judged against the new pins, so these are not counted as regressions: "
            f"approve only if intended, after a code owner has reviewed {code(report.run.pins)}.")


def graded_as_pinned(case: CaseRow, report: Report) -> bool:
    """Whether this run graded the very answer pinned: an offline run of a pinned case that ``fixtures.modified``
    (``analysis.fixtures.change_of``) does not name, so its digest but for recorded times is its pin's."""
    return report.run.mode == "offline" and case.pin is not None and case.id not in report.fixtures.modified


def _downgrade(cid: str, row: BaseDiffRow | None) -> Downgrade:
    """How one case was downgraded: its pin removed, its label moved, or neither (it is no longer stable)."""
    if row is None or row.head is None:
        return Downgrade(cid, True, None)
    if row.base is not None and row.base.label != row.head.label:
        return Downgrade(cid, False, (row.base.label, row.head.label))
    return Downgrade(cid, False, None)


# -- the cases by what broke -------------------------------------------------------------------

# The not-stable cases, in the groups the report shows apart. Known failures are never mixed with regressions.
REGRESSIONS, FAILING, UNDELIVERED, TOLERATED = range(4)


class Group(NamedTuple):
    """How a group of cases is shown: its title, whether its rows name their outcome, the sentence under it."""

    title: str
    with_outcome: bool
    sentence: str


GROUPS: Mapping[int, Group] = {
    REGRESSIONS: Group("Regressions", False, ""),
    FAILING: Group("Other cases failing the gate", True,
                   "Not regressions against their pins, but their stratum is under its floor."),
    UNDELIVERED: Group("Undelivered", False, "No gradeable answer after retries: the run is inconclusive, not red."),
    TOLERATED: Group("Known failures and tolerated misses", True,
                     "Not stable, but not failing the gate: wrong in the pins too, or a miss the stratum allows."),
}

# An outcome as the reports word it.
OUTCOME_WORDS: Mapping[Outcome, str] = {o: o.value.replace("_", " ") for o in Outcome}


def case_group(case: CaseRow) -> int | None:
    """Which group a case belongs in, from its outcome and gate; None for a stable case."""
    if case.gate is Gate.PASS:
        return None
    if case.outcome is Outcome.REGRESSION:
        return REGRESSIONS
    return {Gate.FAIL: FAILING, Gate.UNDELIVERED: UNDELIVERED, Gate.TOLERATED: TOLERATED}[case.gate]


def case_groups(report: Report) -> dict[int, list[CaseRow]]:
    """The cases not stable, by the group they belong in, in report order.

    One pass over the cases for every group. Most cases are stable (in no group): the gate alone says so.
    """
    groups: dict[int, list[CaseRow]] = {}
    passed = Gate.PASS
    for c in report.cases:
        group = case_group(c) if c.gate is not passed else None
        if group is not None:
            groups.setdefault(group, []).append(c)
    return groups


# -- channels by stratum -----------------------------------------------------------------------

# The channel x stratum grid's columns, in the order the method reads them; transport is undelivered.
GRID_CHANNELS = (Channel.STABLE, Channel.CORRECTNESS, Channel.SCHEMA, Channel.SIZE, Channel.TIME, Channel.TRUNCATED,
                 Channel.TRANSPORT)


def grid_column(channel: Channel) -> str:
    """A grid column's heading: transport is what the reader knows as undelivered."""
    return "undelivered" if channel is Channel.TRANSPORT else channel.value


def stratum_bar(name: str, t: Thresholds) -> str:
    """The bar a stratum is held to, in words: its floor, or the watermark it must stay under."""
    spec = next((s for s in (*STRATA_SPEC, UNSTRATIFIED) if s.name == name), None)
    if spec is None:
        return ""
    if spec.floor:
        return f"floor {getattr(t, spec.floor):.2f}"
    return f"watermark < {getattr(t, spec.watermark):.2f}" if spec.watermark else ""


class GridRow(NamedTuple):
    """One stratum of the grid: its cases per channel (``GRID_CHANNELS``' order), pass rate, bar and alerts."""

    name: str
    counts: tuple[int, ...]
    cases: int
    pass_rate: float | None
    bar: str
    alerts: tuple[str, ...]


# The grid's last column, and its cell: one wording for every format.
GRID_BAR_COLUMN = "pass rate · bar"


def grid_bar(row: GridRow, code: Callable[[str], str]) -> str:
    """A stratum's pass rate, bar and broken alerts (``code``: an alert in the format's code style)."""
    codes = ", ".join(code(alert) for alert in row.alerts)
    return " · ".join(p for p in (fmt_rate(row.pass_rate), row.bar, f"❌ {codes}" if codes else "") if p)


def grid_rows(report: Report) -> list[GridRow]:
    """Cases per stratum and channel, a row per stratum of the report, with the stratum's bar and its alerts."""
    # Counted by the stratum field, then by its row name.
    counts: Counter[tuple[str, Channel]] = Counter()
    for (stratum, channel), n in Counter(map(attrgetter("stratum", "channel"), report.cases)).items():
        counts[(stratum_name(stratum), channel)] += n
    t = report.run.thresholds
    return [GridRow(name, tuple(counts[(name, ch)] for ch in GRID_CHANNELS), row.cases, row.pass_rate,
                    stratum_bar(name, t), tuple(a.code for a in report.alert_details if a.stratum == name))
            for name, row in report.strata.items()]


# -- what moved against the pins ----------------------------------------------------------------


class Move(NamedTuple):
    """One case's measure against its pin's; ``beyond``: on that channel, or outside its slack either way."""

    case: CaseRow
    pinned: float
    now: float
    beyond: bool


def _moves(report: Report, measure: str, limit: Callable[[float, Thresholds], float], channel: Channel,
           scaled: Callable[[CaseRow, float], float] = lambda _, pinned: pinned) -> list[Move]:
    """Every case with a pinned and a measured ``measure`` (a field of both a row and a pin), against each other: those
    on ``channel`` or beyond its ``limit`` either way first, then the largest ratio. ``scaled``: the pinned figure as
    the gate judged it."""
    t = report.run.thresholds
    moves = []
    for c in report.cases:
        pinned, now = getattr(c.pin, measure) if c.pin else None, getattr(c, measure)
        before = scaled(c, pinned) if pinned is not None else None
        if before is None or now is None:
            continue
        moves.append(Move(c, before, now, c.channel is channel or now > limit(before, t) or before > limit(now, t)))
    return sorted(moves, key=lambda m: (not m.beyond, m.case.channel is not channel,
                                        -max(m.pinned, m.now) / max(min(m.pinned, m.now), 1.0)))


def time_moves(report: Report) -> list[Move]:
    """Every case's time against its pin's, those beyond the time slack first.

    The pin is the case's own (``pin``): the one the gate judged it against, never the base branch's, at this run's
    latency level as the gate scaled it (docs/gate.md, "Time against its level").
    """
    return _moves(report, "ms", time_limit_ms, Channel.TIME,
                  lambda c, pinned: pinned * scale_of(c.pin, Timing(c.level_ms)) if c.pin else pinned)


def size_moves(report: Report) -> list[Move]:
    """Every case's length in characters against its pin's, those beyond the size slack first."""
    return _moves(report, "chars", size_limit, Channel.SIZE)
