"""history.json -> Markdown: history.md, and the trend section the Action folds into the PR comment.

One Mermaid ``xychart-beta`` line chart per measure (each stratum's pass rate, yield, median time,
median size), which GitHub draws inline. Commit subjects are untrusted text and go through
``escape``; a chart's labels are commit ids and PR numbers, reduced by ``mermaid_label``.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..model import STRATA
from ..report.history_model import History, HistoryPoint
from ..report.model import stratum_name
from .escape import cell, fenced, inline
from .markdown import distinct_labels, fmt_num, fmt_rate, mermaid_label, plural, table

_SHORT = 7


@dataclass(frozen=True)
class Measure:
    """What one chart draws: its title, its y-axis, whether it is a rate (drawn from 0 to 1), each point's value."""

    title: str
    axis: str
    rate: bool
    value: Callable[[HistoryPoint], float | None]


def stratum_measure(name: str) -> Measure:
    """A stratum's pass rate, from 0 to 1."""
    def value(p: HistoryPoint) -> float | None:
        row = p.strata.get(name)
        return row.pass_rate if row else None

    return Measure(f"{name} pass rate", "pass rate", True, value)


MEASURES = (
    Measure("yield", "yield", True, lambda p: p.yield_),
    Measure("median time", "ms", False, lambda p: p.median_ms),
    Measure("median size", "chars", False, lambda p: p.median_chars),
)


def strata_of(history: History) -> list[str]:
    """The strata any point has, in the report's order (unstratified last, only when some point has it)."""
    seen = {name for p in history.points for name in p.strata}
    return [name for name in (*STRATA, stratum_name(None)) if name in seen]


def point_label(point: HistoryPoint) -> str:
    """How a chart's axis names a point: its PR when the commit names one, else its short commit id."""
    return f"PR {point.pr}" if point.pr is not None else point.commit[:_SHORT]


def line_chart(points: Sequence[HistoryPoint], measure: Measure) -> str | None:
    """A Mermaid line chart of one measure over the points that have it (a line has no gaps), or None when none
    has."""
    drawn = [(point_label(p), v) for p in points if (v := measure.value(p)) is not None]
    if not drawn:
        return None
    labels = distinct_labels(mermaid_label(label) for label, _ in drawn)
    values = [f"{v:.3f}".rstrip("0").rstrip(".") if measure.rate else f"{v:.0f}" for _, v in drawn]
    return "\n".join([
        "xychart-beta",
        f'    title "{mermaid_label(measure.title)}"',
        "    x-axis [" + ", ".join(f'"{label}"' for label in labels) + "]",
        f'    y-axis "{measure.axis}"' + (" 0 --> 1" if measure.rate else ""),
        f"    line [{', '.join(values)}]",
    ])


def chart_section(points: Sequence[HistoryPoint], measure: Measure, level: str = "###") -> list[str]:
    """A measure's heading and chart; nothing when no point measured it."""
    chart = line_chart(points, measure)
    unit = "" if measure.rate else f" ({measure.axis})"
    return [] if chart is None else [f"{level} {measure.title.capitalize()}{unit}", "", fenced(chart, "mermaid"), ""]


def _stratum_cell(point: HistoryPoint, name: str) -> str:
    """A stratum's pass rate at a point, with what it counts (`0.750 (3/4)`)."""
    row = point.strata.get(name)
    return "–" if row is None else f"{fmt_rate(row.pass_rate)} ({fmt_num(row.passed, 2)}/{row.n})"


def _pr_cell(point: HistoryPoint) -> str:
    # Escaped like any `#N`: a table of old PRs must not add a reference to each one's timeline on every push.
    return cell(f"#{point.pr}") if point.pr is not None else "–"


def changes_table(points: Sequence[HistoryPoint], strata: Sequence[str], subjects: bool = True) -> str:
    """One row per commit, oldest first: when, which commit and PR, each stratum's pass rate, yield, time, size."""
    headers = ["date", "commit", "PR", "cases", *strata, "yield", "median ms", "median chars"]
    rows = [[cell(p.date[:10]), f"`{p.commit[:_SHORT]}`", _pr_cell(p), str(p.cases),
             *(_stratum_cell(p, s) for s in strata), fmt_rate(p.yield_), fmt_num(p.median_ms),
             fmt_num(p.median_chars)] + ([cell(p.subject, 72)] if subjects else []) for p in points]
    return table(headers + (["subject"] if subjects else []), rows)


def label_moves(points: Sequence[HistoryPoint]) -> list[tuple[str, list[str]]]:
    """Each case whose pinned label changed over the points, with its labels in order (a run of one label once)."""
    ids = sorted({cid for p in points for cid in p.labels})
    moved = []
    for cid in ids:
        steps: list[str] = []
        for p in points:
            label = p.labels.get(cid, "no pin")
            if not steps or steps[-1] != label:
                steps.append(label)
        if len(set(steps) - {"no pin"}) > 1:
            moved.append((cid, steps))
    return moved


def _notes(history: History) -> list[str]:
    """The notes in one quote, each a paragraph of its own."""
    if not history.notes:
        return []
    return ["\n>\n".join(f"> {inline(note, 600)}" for note in history.notes), ""]


def _lead(history: History) -> str:
    """What the points are: how many, of which file, on which branch, over which dates."""
    points = history.points
    span = f", from {cell(points[0].date[:10])} to {cell(points[-1].date[:10])}" if points else ""
    return (f"{plural(len(points), 'commit')} changed {inline(history.pins)} on the first-parent history of "
            f"{inline(history.ref)} (`{history.commit[:12]}`; at most {history.last} asked), oldest first{span}.")


def render_history(history: History) -> str:
    """history.md: the changes table, a chart per measure, and the cases whose pinned label moved."""
    points, strata = history.points, strata_of(history)
    lines = [f"## envelope-ci history: {inline(history.pins)}", "", _lead(history), "", *_notes(history)]
    if points:
        lines += ["### Changes", "", changes_table(points, strata), ""]
        for measure in (*map(stratum_measure, strata), *MEASURES):
            lines += chart_section(points, measure)
        moves = label_moves(points)
        lines += [f"### Labels that moved ({len(moves)})", ""]
        lines += [table(["case", "pinned label, oldest to newest"],
                        [[cell(cid), " → ".join(steps)] for cid, steps in moves]) if moves
                  else "No case's pinned label moved.", ""]
    return "\n".join(lines)


def trend_details(history: History, strata: Sequence[str]) -> str:
    """The comment's collapsed section: the trend of ``strata`` over the base branch's last pin changes."""
    points = history.points
    names = [s for s in strata if s in strata_of(history)] or strata_of(history)
    summary = (f"Trend of {', '.join(inline(s) for s in names) or 'the strata'} over the last "
               f"{plural(len(points), 'change')} of the base branch's pins")
    body = [*_notes(history)]
    if points:
        body += [changes_table(points, names, subjects=False), ""]
        for name in names:
            body += chart_section(points, stratum_measure(name), "####")
    else:
        body += ["No commit of the base branch changed the pins.", ""]
    return "\n".join([f"<details><summary>{summary}</summary>", "", *body, "</details>", ""])
