"""Report -> the one-screen summary printed on stdout: a lowered baseline first, the next steps last."""
from __future__ import annotations

from collections.abc import Sequence

from ..model import Label
from ..report.model import Report
from ..report.view import case_group, fmt_rate, model_moved, plural
from .escape import clean

MAX_LISTED = 10


def _one_line(text: str, limit: int = 100) -> str:
    """Terminal-safe text on one line, cut to `limit` characters."""
    flat = " ".join(clean(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _head(report: Report) -> list[str]:
    """The verdict line, a new model and a lowered baseline right under it, then the counts, rates, strata and
    lanes."""
    s = report.summary
    lanes = report.lanes
    down = report.base.downgraded if report.base else ()
    model = model_moved(report, _one_line)
    return [
        f"envelope-ci: {report.verdict.value.upper()}  ({plural(s.total, 'case')}, {s.stable} stable, "
        f"{plural(len(report.regressions), 'regression')}, {plural(len(report.alerts), 'alert')})",
        *([model] if model else []),
        *([f"WARNING: this change downgrades {len(down)} pin(s) the base branch had right and stable — "
           f"baseline lowered: {_one_line(', '.join(down[:MAX_LISTED]), 200)}; "
           f"have a code owner review {_one_line(report.run.pins, 200)}"] if down else []),
        "labels: " + " ".join(f"{k}={v}" for k, v in s.counts.items()),
        f"naive_pass_rate={fmt_rate(s.naive_pass_rate)} yield={fmt_rate(s.yield_)} "
        f"accuracy_on_yield={fmt_rate(s.accuracy_on_yield)}",
        "strata: " + "  ".join(f"{name} {v.passed:.4g}/{v.n} ({fmt_rate(v.pass_rate)})"
                               for name, v in report.strata.items()),
        f"lanes: matched={lanes.matched_fingerprints} mismatched={lanes.fingerprint_mismatches} "
        f"flips={lanes.grade_flips} unpinned={lanes.unpinned}",
    ]


def _failing(report: Report) -> list[str]:
    """The first cases not stable, in the report's groups: regressions, other failures, undelivered, known failures."""
    lines = []
    ranked = sorted((group, i, c) for i, c in enumerate(report.cases) if (group := case_group(c)) is not None)
    failing = [c for _, _, c in ranked]
    for case in failing[:MAX_LISTED]:
        where = f"{case.file}:{case.line}" if case.line else case.file
        lines.append(f"  {case.outcome.value:<13} {_one_line(case.id, 200)} [{case.label.value}/{case.channel.value}] "
                     f"{_one_line(where, 200)} — {_one_line('; '.join(case.reasons))}")
    if len(failing) > MAX_LISTED:
        lines.append(f"  … and {len(failing) - MAX_LISTED} more not-stable cases (see report.md)")
    return lines


def _pins(report: Report) -> list[str]:
    """What writing the pins moved and accepted."""
    lines = []
    update = report.pins_update
    if update:
        lines.append(f"pins: {len(update.moved)} moved, {len(update.removed)} removed; "
                     "judged against the new pins above")
        if update.accepted_regressions:
            ids = ", ".join(clean(i) for i in update.accepted_regressions[:MAX_LISTED])
            lines.append(f"pins: ACCEPTED into the baseline, regressions against the previous pins: {ids}")
        if update.previous_alerts:
            lines.append("pins: the previous pins raised: " + ", ".join(update.previous_alerts))
    return lines


def _next_steps(report: Report) -> list[str]:
    """What to do, each step's exact command on its own indented line (whole: it is meant to be copied)."""
    lines = []
    for step in report.next_steps:
        lines.append(f"next: {_one_line(step.why, 300)}")
        if step.command:
            lines.append("    " + clean(step.command).replace("\n", " "))
    return lines


def render_console(report: Report, files: Sequence[str] = ()) -> str:
    """Verdict, counts and rates, strata, alerts, the first failing cases, the files written, and the next steps
    last."""
    s = report.summary
    lines = _head(report)
    lines += [f"ALERT {alert.code}: {_one_line(alert.message, 200)}" for alert in report.alert_details]
    lines += [f"INCONCLUSIVE: {_one_line(blocker, 200)}" for blocker in report.blockers]
    if s.total and s.counts.get(Label.DROP.value, 0) + s.counts.get(Label.EMPTY.value, 0) == s.total:
        first = report.cases[0].reasons[:1] if report.cases else ()
        lines.append(f"NOTHING DELIVERED: all {s.total} cases got no gradeable answer "
                     f"({_one_line(first[0], 120) if first else 'see report.md'}); "
                     "check --base-url, the server and the network")
    lines += _failing(report)
    lines += _pins(report)
    lines += [f"note: {_one_line(note, 200)}" for note in report.notes]
    if files:
        lines.append("wrote: " + ", ".join(files))
    lines += _next_steps(report)
    return "\n".join(lines)
