"""Report -> GitHub-flavoured Markdown (report.md, the PR comment, the job summary).

Deterministic: the same report gives the same bytes. Every untrusted string (ids,
model output, server messages, fixture text) goes through ``escape``.
"""
from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence
from typing import Any

from tabulate import tabulate

from ..model import STRATA_SPEC, UNSTRATIFIED, Channel, Detail, Gate, Outcome, Thresholds, Verdict
from ..report.model import CaseRow, PinBrief, Report, RunInfo
from .escape import cell, fenced, inline

_ICON = {Verdict.PASS: "✅", Verdict.FAIL: "❌", Verdict.INCONCLUSIVE: "⚠️"}


def fmt_rate(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def fmt_num(value: Any, digits: int = 0) -> str:
    if value is None:
        return "–"
    if isinstance(value, float) and digits:
        return f"{value:.{digits}f}"
    return str(round(value)) if isinstance(value, float) else str(value)


# Past this many rows tabulate's column padding costs seconds and buys nothing: GitHub
# renders an unpadded pipe table identically.
PADDED_ROWS_MAX = 500


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A GFM table; cells must already be escaped."""
    rows = list(rows)
    if len(rows) <= PADDED_ROWS_MAX:
        return tabulate(rows, headers=list(headers), tablefmt="github", disable_numparse=True)
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("-" * (len(h) + 2) for h in headers) + "|"]
    lines += ["| " + " | ".join(map(str, row)) + " |" for row in rows]
    return "\n".join(lines)



def headline(report: Report, title: str | None) -> list[str]:
    """The verdict, the counts and rates, the downgraded-pins warning, blockers and notes."""
    s = report.summary
    name = f" — {inline(title)}" if title else ""
    line = (
        f"**{plural(s.total, 'case')}** · {s.stable} stable · {plural(len(report.regressions), 'regression')} · "
        f"{plural(len(report.alerts), 'alert')} · yield {fmt_rate(s.yield_)} · "
        f"accuracy on yield {fmt_rate(s.accuracy_on_yield)} · naive pass rate {fmt_rate(s.naive_pass_rate)}"
    )
    out = [f"## {_ICON[report.verdict]} envelope-ci: {report.verdict.value}{name}", "", line, ""]
    down = report.base.downgraded if report.base else ()
    if down:
        ids = ", ".join(inline(i) for i in down[:20]) + (" …" if len(down) > 20 else "")
        out += [f"> **⚠️ This PR downgrades {plural(len(down), 'pin')} that the base branch had right and stable:** {ids}. "
                "The run is judged against the new pins, so these are not counted as regressions: approve only if intended.", ""]
    out += [f"> **inconclusive:** {inline(blocker)}" for blocker in report.blockers]
    out += [f"> {inline(note)}" for note in report.notes]
    if report.blockers or report.notes:
        out.append("")
    return out


def alerts_section(report: Report) -> list[str]:
    if not report.alert_details:
        return []
    lines = ["### Alerts", ""]
    lines += [f"- `{a.code}` — {inline(a.message)}" for a in report.alert_details]
    return lines + [""]


def _why(case: CaseRow) -> str:
    return cell("; ".join(case.reasons), 160)


# In a comment the not-stable table is cut to this many rows so the summary tables after
# it still fit; the full list is in report.md and the job summary.
FAILING_ROWS_IN_COMMENT = 100
_FAILING_ORDER = {Outcome.REGRESSION: 0, Outcome.UNDELIVERED: 1, Outcome.NEW: 2, Outcome.KNOWN_FAILURE: 3}


def failing_section(report: Report, limit: int | None = None) -> list[str]:
    """Cases not stable, regressions first: why, and a short escaped preview of the answer."""
    failing = sorted((c for c in report.cases if c.gate is not Gate.PASS), key=lambda c: _FAILING_ORDER.get(c.outcome, 9))
    if not failing:
        return []
    rows = [
        [cell(c.id, 60), cell(c.stratum or "–"), c.label.value, c.channel.value, c.outcome.value.replace("_", " "), _why(c), cell(c.preview or "", 80)]
        for c in failing[:limit]
    ]
    lines = [f"### Not stable ({len(failing)})", "", table(["case", "stratum", "label", "channel", "outcome", "why", "answer"], rows), ""]
    if limit is not None and len(failing) > limit:
        lines += [f"_… and {len(failing) - limit} more not-stable cases: see the job summary and report files._", ""]
    return lines


def channels_section(report: Report) -> list[str]:
    rows = [[name, str(count)] for name, count in report.summary.channels.items()]
    return ["### Channels", "", table(["channel", "cases"], rows), ""]


def stratum_bar(name: str, t: Thresholds) -> str:
    """The bar a stratum is held to, in words: its floor, or the watermark it must stay under."""
    spec = next((s for s in (*STRATA_SPEC, UNSTRATIFIED) if s.name == name), None)
    if spec is None:
        return ""
    if spec.floor:
        return f"floor {getattr(t, spec.floor):.2f}"
    return f"watermark < {getattr(t, spec.watermark):.2f}" if spec.watermark else ""


def strata_section(report: Report) -> list[str]:
    t = report.run.thresholds
    rows = [
        [name, str(s.cases), str(s.n), str(s.passed), fmt_rate(s.pass_rate), stratum_bar(name, t), str(s.undelivered)]
        for name, s in report.strata.items()
    ]
    return ["### Strata", "", table(["stratum", "cases", "delivered", "stable", "pass rate", "bar", "undelivered"], rows), ""]


def labels_section(report: Report) -> list[str]:
    s = report.summary
    rows = [[label, str(count)] for label, count in s.counts.items()]
    rates = (
        f"yield **{fmt_rate(s.yield_)}** (gradeable / total) · accuracy on yield **{fmt_rate(s.accuracy_on_yield)}** "
        f"(right / gradeable) · naive pass rate {fmt_rate(s.naive_pass_rate)} (right / total)"
    )
    return ["### Labels", "", table(["label", "count"], rows), "", rates, ""]


def lanes_section(report: Report) -> list[str]:
    lanes = report.lanes
    fp = report.fingerprint
    line = (
        f"lane `{fp.lane}` · endpoint class {inline(str(fp.endpoint_class))} · model {inline(str(fp.model_id))} · "
        f"temperature {fp.temperature} · grader v{inline(str(fp.grader_version))}"
    )
    counts = (
        f"matched fingerprints {lanes.matched_fingerprints} · fingerprint mismatches {lanes.fingerprint_mismatches} "
        f"(size and time not judged) · grade flips {lanes.grade_flips} · unpinned {lanes.unpinned}"
    )
    return ["### Lanes", "", line, "", counts, ""]


def pin_command(run: RunInfo) -> str:
    """The command that rewrites the pins from the same kind of run as this one."""
    words = ["envelope-ci", "run", run.fixtures_dir, "--pins", run.pins, "--lane", "adjudication"]
    if run.endpoint_class not in (None, "unspecified"):
        words += ["--endpoint-class", run.endpoint_class]
    if run.temperature:
        words += ["--temperature", str(run.temperature)]
    if run.mode == "replay" and run.replay:
        words += ["--replay", run.replay]
    command = " ".join(shlex.quote(str(w)) for w in words)
    if run.mode == "live":
        model = shlex.quote(str(run.model_requested or "MODEL"))
        command += f' --base-url "$EVAL_BASE_URL" --model {model}'
    return command + " --write-pins"


def fixtures_section(report: Report) -> list[str]:
    f = report.fixtures
    lines = ["### Fixtures", ""]
    if f.pinned_hash is None:
        lines.append(f"hash `{f.hash[:19]}` · no pins yet")
    elif not f.changed:
        lines.append(f"hash `{f.hash[:19]}` matches the pins")
    else:
        # The pinned hash comes from the PR's own pins file: untrusted, so escaped, not code-spanned.
        lines.append(f"hash `{f.hash[:19]}` ≠ pinned {inline(str(f.pinned_hash), 19)}")
        for key, ids in (("added", f.added), ("removed", f.removed), ("modified", f.modified)):
            if ids:
                lines.append(f"- {key}: " + ", ".join(inline(i) for i in ids[:50]) + (" …" if len(ids) > 50 else ""))
        lines += [
            "",
            "The fixtures changed without a pin update. Run this locally (not in CI), review the diff of the pins file, and commit it in this PR:",
            "",
            fenced(pin_command(report.run), "sh"),
        ]
    return lines + [""]


def _brief(side: PinBrief | None) -> str:
    if side is None:
        return "–"
    return f"{side.label} {fmt_num(side.chars)}c {fmt_num(side.tokens)}t {fmt_num(side.ms)}ms"


def base_section(report: Report, only_changed: bool) -> list[str]:
    base = report.base
    if not base:
        return []
    lines = ["### Pins: base branch → this PR → this run", ""]
    if base.error:
        lines += [f"> base branch pins unavailable: {inline(base.error)}", ""]
    elif not base.present:
        lines += ["> the base branch has no pins yet (first pins in this PR)", ""]
    diff = base.diff
    changed = [d for d in diff if d.pin_changed]
    shown = changed if only_changed else sorted(diff, key=lambda d: not d.pin_changed)
    lines.append(f"{len(changed)} of {len(diff)} case pins changed in this PR (marked **bold**).")
    lines.append("")
    for kind in ("added", "removed", "modified"):
        ids = [d.id for d in diff if d.fixture == kind]
        if ids:
            lines.append(f"- fixture cases {kind} by this PR: " + ", ".join(inline(i) for i in ids[:50]) + (" …" if len(ids) > 50 else ""))
    if any(d.fixture for d in diff):
        lines.append("")
    if shown:
        rows = [
            [f"**{cell(d.id, 60)}**" if d.pin_changed else cell(d.id, 60), d.fixture or "", _brief(d.base), _brief(d.head), _brief(d.run)]
            for d in shown
        ]
        lines += [table(["case", "fixture", "base pin", "head pin", "this run"], rows), ""]
    return lines


def pins_update_section(report: Report) -> list[str]:
    """When this run wrote the pins: what moved, and which regressions the new baseline accepts."""
    update = report.pins_update
    if not update:
        return []
    lines = ["### Pins written by this run", ""]
    if update.accepted_regressions:
        lines.append("**Accepted into the baseline** (regressions against the previous pins): " + ", ".join(inline(i) for i in update.accepted_regressions))
        lines.append("")
    if update.previous_alerts:
        lines += ["The previous pins raised: " + ", ".join(f"`{a}`" for a in update.previous_alerts), ""]
    if update.removed:
        lines += ["Removed: " + ", ".join(inline(i) for i in update.removed), ""]
    rows = [[cell(m.id, 60), _brief(m.from_), _brief(m.to)] for m in update.moved]
    lines += [f"{len(rows)} pins moved.", ""]
    if rows:
        lines += [table(["case", "previous pin", "new pin"], rows), ""]
    return lines


def cases_section(report: Report, detail: Detail) -> list[str]:
    cases = report.cases
    if detail is Detail.FAILING:
        left = sum(1 for c in cases if c.channel is Channel.STABLE)
        return [f"_{left} stable cases are left out of this comment; the full table is in the job summary and report files._", ""]
    # Streamed runs also show time to first token, so slower prefill and longer generation are told apart.
    streamed = any(c.ttft_ms is not None for c in cases)
    rows = []
    for c in cases:
        pin = c.pin
        rows.append([
            cell(c.id, 60), cell(c.stratum or "–"), c.label.value, c.channel.value,
            fmt_num(c.chars), fmt_num(c.tokens) + ("~" if c.tokens_estimated else ""),
            *([fmt_num(c.ttft_ms, 1)] if streamed else []),
            fmt_num(c.ms, 1), fmt_num(c.ms_p95, 1), fmt_num(pin.chars if pin else None), fmt_num(pin.ms if pin else None, 1),
            str(c.attempts), c.outcome.value.replace("_", " "),
        ])
    headers = ["case", "stratum", "label", "channel", "chars", "tokens", *(["ttft ms"] if streamed else []),
               "ms", "p95", "pin chars", "pin ms", "attempts", "outcome"]
    body = table(headers, rows)
    note = "`~` marks a token count estimated as chars/4 (the server reported no usage)."
    if detail is Detail.COLLAPSED:
        return [f"<details><summary>All {len(cases)} cases</summary>", "", body, "", note, "", "</details>", ""]
    return [f"### All cases ({len(cases)})", "", body, "", note, ""]


def render_markdown(report: Report, detail: Detail = Detail.FULL, title: str | None = None) -> str:
    """The whole report as Markdown. ``detail``: full, collapsed (per-case tables folded), failing."""
    detail = Detail(detail)
    parts: list[str] = []
    parts += headline(report, title)
    parts += alerts_section(report)
    parts += failing_section(report, None if detail is Detail.FULL else FAILING_ROWS_IN_COMMENT)
    parts += channels_section(report)
    parts += strata_section(report)
    parts += labels_section(report)
    parts += lanes_section(report)
    parts += fixtures_section(report)
    parts += pins_update_section(report)
    parts += base_section(report, only_changed=detail is Detail.FAILING)
    parts += cases_section(report, detail)
    return "\n".join(parts).rstrip() + "\n"
