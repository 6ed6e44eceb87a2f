"""Report -> GitHub-flavoured Markdown: report.md and the job summary in full, the PR comment as their short form.

Deterministic: the same report gives the same bytes. Every untrusted string (ids, model
output, server messages, fixture text, the commands built from them) goes through ``escape``.

Every detail level starts with what broke and what to do: the headline (a lowered baseline
first), the alerts, the cases that fail the gate or were not delivered, the next steps, one
channel x stratum table and a chart of the cases whose time moved. ``Detail.FULL`` (report.md)
then shows every other section open and whole; the comment's levels (``COLLAPSED``,
``FAILING``) fold them into ``<details>`` and cut the long tables.
"""
from __future__ import annotations

import re
import textwrap
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import cache, partial
from operator import attrgetter
from typing import Any

import tabulate as _tabulate_module
from tabulate import tabulate

from ..analysis.channels import time_limit_ms
from ..findings import PinBrief
from ..model import STRATA_SPEC, UNSTRATIFIED, Channel, Detail, Gate, Outcome, Thresholds, Verdict
from ..report.model import CaseRow, Report, stratum_name
from .escape import ELLIPSIS, cell, clean, fenced, inline

# Pad cells by code points, never by terminal columns: tabulate measures with wcwidth whenever that happens to
# be importable, so the same report's bytes depended on what else was installed. GitHub renders either the same.
_tabulate_module.WIDE_CHARS_MODE = False

_ICON = {Verdict.PASS: "✅", Verdict.FAIL: "❌", Verdict.INCONCLUSIVE: "⚠️"}


def fmt_rate(value: float | None) -> str:
    """A rate to three places, or n/a when its denominator was 0."""
    return "n/a" if value is None else f"{value:.3f}"


def fmt_num(value: Any, digits: int = 0) -> str:
    """A table number: – when not measured, floats to `digits` places."""
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}" if digits else str(round(value))
    return str(value)


def _fmt_whole(value: Any) -> str:
    """``fmt_num(value)``, an int (the common case) formatted at once."""
    return str(value) if value.__class__ is int else fmt_num(value)


def _fmt_tenths(value: Any) -> str:
    """``fmt_num(value, 1)``, a float (the common case) formatted at once."""
    return f"{value:.1f}" if value.__class__ is float else fmt_num(value, 1)


def measures(chars: int | None, tokens: int | None, ms: float | None) -> str:
    """A measurement in words with units (`70 chars · 20 tok · 412 ms`); what was not measured is left out."""
    parts = [f"{chars} chars" if chars is not None else "", f"{tokens} tok" if tokens is not None else "",
             f"{ms:.0f} ms" if ms is not None else ""]
    return " · ".join(p for p in parts if p)


# Past this many rows tabulate's column padding costs seconds and buys nothing: GitHub
# renders an unpadded pipe table identically.
PADDED_ROWS_MAX = 500


def plural(count: int, noun: str) -> str:
    """`1 case`, `2 cases`."""
    return f"{count} {noun}" + ("" if count == 1 else "s")


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A GFM table; cells must already be escaped text."""
    rows = list(rows)
    if len(rows) <= PADDED_ROWS_MAX:
        return tabulate(rows, headers=list(headers), tablefmt="github", disable_numparse=True)
    return table_of_lines(headers, ["| " + " | ".join(row) + " |" for row in rows])


# Between two cells of a table's line. A cell's own ``|`` is escaped (``\|``), so no cell holds this.
_CELL_BETWEEN = " | "


def table_of_lines(headers: Sequence[str], lines: Sequence[str]) -> str:
    """A GFM table of rows already written as lines (``| a | b |``): unpadded when long, padded by ``table``
    otherwise."""
    return "".join(_table_parts(headers, lines, len(lines)))


def _table_parts(headers: Sequence[str], lines: Iterable[str], count: int) -> Iterator[str]:
    """``table_of_lines`` of ``count`` lines in parts: a long table's head, then a line each row as it comes."""
    if count <= PADDED_ROWS_MAX:
        yield table(headers, [line[2:-2].split(_CELL_BETWEEN) for line in lines])
        return
    yield "\n".join(["| " + _CELL_BETWEEN.join(headers) + " |",
                     "|" + "|".join("-" * (len(h) + 2) for h in headers) + "|"])
    for line in lines:
        yield "\n"
        yield line


def folded(title: str, body: list[str], detail: Detail, summary: str = "") -> list[str]:
    """A section: open under a heading in full reports, a collapsed `<details>` in the comment.

    `title` and `summary` are HTML (a `<summary>` is not Markdown): only our own words and numbers.
    """
    if detail is Detail.FULL:
        return [f"### {title}", "", *body]
    return [f"<details><summary>{title}{summary}</summary>", "", *body, "</details>", ""]


def _ids(ids: Sequence[str], limit: int | None = None) -> str:
    """Escaped ids, comma-separated, at most `limit` of them."""
    more = limit is not None and len(ids) > limit
    return ", ".join(inline(i) for i in ids[:limit]) + (" …" if more else "")


# -- the first screen --------------------------------------------------------------------------


def baseline_lowered(report: Report) -> list[str]:
    """The warning that this PR's pins lower the bar for cases the base branch had right and stable."""
    base = report.base
    if not base or not base.downgraded:
        return []
    rows = {d.id: d for d in base.diff}

    def how(cid: str) -> str:
        row = rows.get(cid)
        if row is None or row.head is None:
            return f"{inline(cid)} (pin removed)"
        if row.base is not None and row.base.label != row.head.label:
            return f"{inline(cid)} ({inline(row.base.label)} → {inline(row.head.label)})"
        return inline(cid)

    down = base.downgraded
    listed = ", ".join(how(cid) for cid in down[:20]) + (" …" if len(down) > 20 else "")
    return [
        f"> **⚠️ Baseline lowered. This PR downgrades {plural(len(down), 'pin')} "
        "that the base branch had right and stable:** "
        f"{listed}. The run is judged against the new pins, so these are not counted as regressions: approve only if "
        f"intended, after a code owner has reviewed {inline(report.run.pins)}.",
        "",
    ]


def headline(report: Report, title: str | None) -> list[str]:
    """The verdict, a lowered baseline, the counts and rates, blockers and notes."""
    s = report.summary
    name = f" — {inline(title)}" if title else ""
    line = (
        f"**{plural(s.total, 'case')}** · {s.stable} stable · {plural(len(report.regressions), 'regression')} · "
        f"{plural(len(report.alerts), 'alert')} · yield {fmt_rate(s.yield_)} · "
        f"accuracy on yield {fmt_rate(s.accuracy_on_yield)} · naive pass rate {fmt_rate(s.naive_pass_rate)}"
    )
    out = [f"## {_ICON[report.verdict]} envelope-ci: {report.verdict.value}{name}", "", *baseline_lowered(report),
           line, ""]
    out += [f"> **inconclusive:** {inline(blocker)}" for blocker in report.blockers]
    out += [f"> {inline(note)}" for note in report.notes]
    if report.blockers or report.notes:
        out.append("")
    return out


def alerts_section(report: Report) -> list[str]:
    """Every alert: its code and its sentence."""
    if not report.alert_details:
        return []
    lines = ["### Alerts", ""]
    lines += [f"- `{a.code}` — {inline(a.message)}" for a in report.alert_details]
    return lines + [""]


# The not-stable cases, in the groups the report shows apart: (title, shows the outcome,
# sentence under the title). Known failures are never mixed with regressions.
REGRESSIONS, FAILING, UNDELIVERED, TOLERATED = range(4)
_GROUPS = {
    REGRESSIONS: ("Regressions", False, ""),
    FAILING: ("Other cases failing the gate", True,
              "Not regressions against their pins, but their stratum is under its floor."),
    UNDELIVERED: ("Undelivered", False, "No gradeable answer after retries: the run is inconclusive, not red."),
    TOLERATED: ("Known failures and tolerated misses", True,
                "Not stable, but not failing the gate: wrong in the pins too, or a miss the stratum allows."),
}
# The first-screen tables of a comment show this many rows each, so the next steps stay in view.
FIRST_SCREEN_ROWS = 10
# A folded table in the smallest comment level shows this many rows; the rest are in the job summary.
FAILING_ROWS_IN_COMMENT = 100


# An outcome as the tables word it.
_OUTCOME_WORDS = {o: o.value.replace("_", " ") for o in Outcome}


def case_group(case: CaseRow) -> int | None:
    """Which table a case belongs in, from its outcome and gate; None for a stable case."""
    if case.gate is Gate.PASS:
        return None
    if case.outcome is Outcome.REGRESSION:
        return REGRESSIONS
    return {Gate.FAIL: FAILING, Gate.UNDELIVERED: UNDELIVERED, Gate.TOLERATED: TOLERATED}[case.gate]


def case_groups(report: Report) -> dict[int, list[CaseRow]]:
    """The cases not stable, by the table they belong in, in report order.

    One pass over the cases for every table. Most cases are stable (in no group): the gate alone says so.
    """
    groups: dict[int, list[CaseRow]] = {}
    passed = Gate.PASS
    for c in report.cases:
        group = case_group(c) if c.gate is not passed else None
        if group is not None:
            groups.setdefault(group, []).append(c)
    return groups


def case_group_table(cases: Sequence[CaseRow], group: int, limit: int | None) -> tuple[str, list[str]]:
    """One group's title with its count, and its table (at most `limit` rows, then how many more)."""
    if not cases:
        return "", []
    title, with_outcome, sentence = _GROUPS[group]
    # Strata, reasons and answers repeat across thousands of rows: each text is escaped once.
    short, why = cache(cell), cache(partial(cell, limit=160))  # cell's own limit (80) for strata and answers
    rows = [
        [cell(c.id, 60), short(c.stratum or "–"), c.label.value, c.channel.value,
         *([_OUTCOME_WORDS[c.outcome]] if with_outcome else []), why("; ".join(c.reasons)), short(c.preview or "")]
        for c in cases[:limit]
    ]
    headers = ["case", "stratum", "label", "channel", *(["outcome"] if with_outcome else []), "why", "answer"]
    lines = [sentence, ""] if sentence else []
    lines += [table(headers, rows), ""]
    if limit is not None and len(cases) > limit:
        lines += [f"_… and {len(cases) - limit} more: every case is in the job summary and the report files._", ""]
    return f"{title} ({len(cases)})", lines


def broken_section(groups: dict[int, list[CaseRow]], detail: Detail) -> list[str]:
    """What fails the gate or was not delivered, each case with its reason, under its own heading."""
    limit = None if detail is Detail.FULL else FIRST_SCREEN_ROWS
    lines: list[str] = []
    for group in (REGRESSIONS, FAILING, UNDELIVERED):
        title, body = case_group_table(groups.get(group, []), group, limit)
        if body:
            lines += [f"### {title}", "", *body]
    return lines


def next_steps_section(report: Report) -> list[str]:
    """What to do about this run: one item per step, its exact command (untrusted text) fenced under it."""
    if not report.next_steps:
        return []
    lines = ["### Next steps", ""]
    for step in report.next_steps:
        lines += [f"- {inline(step.why)}", ""]
        if step.command:
            # Indented as a whole (blank lines too), the fence stays inside its list item.
            lines += [textwrap.indent(fenced(step.command, "sh"), "  ", lambda _: True), ""]
    return lines


def stratum_bar(name: str, t: Thresholds) -> str:
    """The bar a stratum is held to, in words: its floor, or the watermark it must stay under."""
    spec = next((s for s in (*STRATA_SPEC, UNSTRATIFIED) if s.name == name), None)
    if spec is None:
        return ""
    if spec.floor:
        return f"floor {getattr(t, spec.floor):.2f}"
    return f"watermark < {getattr(t, spec.watermark):.2f}" if spec.watermark else ""


# The channel x stratum table's columns, in the order the method reads them; transport is undelivered.
GRID_CHANNELS = (Channel.STABLE, Channel.CORRECTNESS, Channel.SCHEMA, Channel.SIZE, Channel.TIME, Channel.TRUNCATED,
                 Channel.TRANSPORT)


def grid_section(report: Report) -> list[str]:
    """One table in place of channels, strata and labels: cases per stratum and channel, and the stratum's bar."""
    # Counted by the stratum field, then by its row name.
    counts: Counter[tuple[str, Channel]] = Counter()
    for (stratum, channel), n in Counter(map(attrgetter("stratum", "channel"), report.cases)).items():
        counts[(stratum_name(stratum), channel)] += n
    t = report.run.thresholds
    rows = []
    for name, stratum in report.strata.items():
        # Non-zero counts off the stable channel are what broke: bold, so the eye finds them.
        cells = [str(n) if ch is Channel.STABLE or not n else f"**{n}**"
                 for ch in GRID_CHANNELS for n in [counts[(name, ch)]]]
        codes = ", ".join(f"`{a.code}`" for a in report.alert_details if a.stratum == name)
        bar = " · ".join(
            p for p in (fmt_rate(stratum.pass_rate), stratum_bar(name, t), f"❌ {codes}" if codes else "") if p)
        rows.append([cell(name), *cells, bar])
    headers = ["stratum", *("undelivered" if ch is Channel.TRANSPORT else ch.value for ch in GRID_CHANNELS),
               "pass rate · bar"]
    return ["### Channels by stratum", "", table(headers, rows), ""]


# -- the time chart ----------------------------------------------------------------------------

# At most this many cases in the chart: the ones whose time moved most.
TIME_CHART_MAX = 20
_MERMAID_LABEL_MAX = 28
# Kept in a Mermaid label: word characters and a little punctuation. Everything else (quotes
# and brackets that end a string or a list, `%%` directives, `#…;` entities, newlines, `@`)
# becomes `_`, so an id can neither break the chart nor reconfigure it.
_MERMAID_UNSAFE = re.compile(r"[^\w .:/+-]+")


def mermaid_label(text: str) -> str:
    """A case id as a Mermaid string's content: inert, one line, at most _MERMAID_LABEL_MAX characters."""
    flat = " ".join(_MERMAID_UNSAFE.sub("_", clean(text)).split())
    return flat if len(flat) <= _MERMAID_LABEL_MAX else flat[: _MERMAID_LABEL_MAX - 1].rstrip() + ELLIPSIS


def time_moves(report: Report) -> list[tuple[CaseRow, float, float]]:
    """(case, pinned ms, this run's ms) for cases on the time channel or outside the time slack either way, most
    moved first."""
    base = report.base
    base_ms = {d.id: d.base.ms for d in base.diff if d.base} if base and base.present else None
    t = report.run.thresholds
    moves = []
    for c in report.cases:
        before = base_ms.get(c.id) if base_ms is not None else (c.pin.ms if c.pin else None)
        if before is None or c.ms is None:
            continue
        if c.channel is Channel.TIME or c.ms > time_limit_ms(before, t) or before > time_limit_ms(c.ms, t):
            moves.append((c, before, c.ms))
    return sorted(moves, key=lambda m: (m[0].channel is not Channel.TIME, -max(m[1], m[2]) / max(min(m[1], m[2]), 1.0)))


def time_chart_section(report: Report) -> list[str]:
    """A Mermaid bar chart, pin vs this run in ms, of the cases whose time moved (GitHub draws it inline)."""
    moves = time_moves(report)
    if not moves:
        return []
    pin = "base pin" if report.base and report.base.present else "pin"
    shown = moves[:TIME_CHART_MAX]
    labels: list[str] = []
    for c, _, _ in shown:
        label = mermaid_label(c.id)
        # A band axis merges equal names: two ids that read alike get a number each.
        while f"{label} · {pin}" in labels:
            label += "'"
        labels += [f"{label} · {pin}", f"{label} · this run"]
    # Two series padded with zeros: each bar has its own category, so none hides another,
    # and the pin and this run keep their own colours.
    before = [v for _, b, _ in shown for v in (round(b), 0)]
    after = [v for _, _, a in shown for v in (0, round(a))]
    chart = "\n".join([
        "xychart-beta horizontal",
        f'    title "Time per case (ms): {pin} vs this run"',
        "    x-axis [" + ", ".join(f'"{label}"' for label in labels) + "]",
        '    y-axis "ms"',
        f"    bar [{', '.join(map(str, before))}]",
        f"    bar [{', '.join(map(str, after))}]",
    ])
    t = report.run.thresholds
    more = f" The {TIME_CHART_MAX} that moved most are drawn." if len(moves) > TIME_CHART_MAX else ""
    return [
        f"### Time moved ({len(moves)})",
        "",
        f"Cases on the time channel or outside the time slack (×{t.time_slack:g}, at least {t.time_floor_ms:g} ms) "
        f"of their {pin}.{more}",
        "",
        fenced(chart, "mermaid"),
        "",
    ]


# -- the sections folded in a comment ---------------------------------------------------------


def tolerated_section(groups: dict[int, list[CaseRow]], detail: Detail) -> list[str]:
    """Known failures and tolerated misses: their own table, apart from what broke."""
    title, body = case_group_table(groups.get(TOLERATED, []), TOLERATED,
                                   FAILING_ROWS_IN_COMMENT if detail is Detail.FAILING else None)
    return folded(title, body, detail) if body else []


def labels_section(report: Report, detail: Detail) -> list[str]:
    """The six labels and the three rates, each rate with what it divides."""
    s = report.summary
    rows = [[label, str(count)] for label, count in s.counts.items()]
    rates = (
        f"yield **{fmt_rate(s.yield_)}** (gradeable / total) · accuracy on yield **{fmt_rate(s.accuracy_on_yield)}** "
        f"(right / gradeable) · naive pass rate {fmt_rate(s.naive_pass_rate)} (right / total)"
    )
    body = [table(["label", "count"], rows), "", rates, ""]
    return folded("Labels and yield", body, detail,
                  f": yield {fmt_rate(s.yield_)} · accuracy on yield {fmt_rate(s.accuracy_on_yield)}")


def lanes_section(report: Report, detail: Detail) -> list[str]:
    """The run's fingerprint and how many cases were judged like-for-like against their pins."""
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
    summary = (f": {lanes.matched_fingerprints} matched · {lanes.fingerprint_mismatches} mismatched · "
               f"{lanes.unpinned} unpinned")
    return folded("Lanes", [line, "", counts, ""], detail, summary)


def fixtures_section(report: Report, detail: Detail) -> list[str]:
    """The fixtures hash against the pins, and which cases changed (the command that re-pins is a next step)."""
    f = report.fixtures
    lines = []
    if f.pinned_hash is None:
        lines.append(f"hash `{f.hash[:19]}` · no pins yet")
    elif not f.changed:
        lines.append(f"hash `{f.hash[:19]}` matches the pins")
    else:
        # The pinned hash comes from the PR's own pins file: untrusted, so escaped, not code-spanned.
        lines.append(f"hash `{f.hash[:19]}` ≠ pinned {inline(str(f.pinned_hash), 19)}")
        for key, ids in (("added", f.added), ("removed", f.removed), ("modified", f.modified)):
            if ids:
                lines.append(f"- {key}: {_ids(ids, 50)}")
        lines += ["", "The fixtures changed without a pin update: the next steps say how to re-pin."]
    state = "no pins yet" if f.pinned_hash is None else ("changed since the pins" if f.changed else "match the pins")
    return folded("Fixtures", [*lines, ""], detail, f": {state}")


def _brief(side: PinBrief | None) -> str:
    """A pin or a run in words: `right · 70 chars · 20 tok · 412 ms`, or – for none."""
    if side is None:
        return "–"
    return " · ".join(p for p in (cell(side.label), measures(side.chars, side.tokens, side.ms)) if p)


def pins_update_section(report: Report, detail: Detail) -> list[str]:
    """When this run wrote the pins: what moved, and which regressions the new baseline accepts."""
    update = report.pins_update
    if not update:
        return []
    lines = []
    if update.accepted_regressions:
        lines += ["**Accepted into the baseline** (regressions against the previous pins): "
                  + _ids(update.accepted_regressions), ""]
    if update.previous_alerts:
        lines += ["The previous pins raised: " + ", ".join(f"`{a}`" for a in update.previous_alerts), ""]
    if update.removed:
        lines += ["Removed: " + _ids(update.removed), ""]
    rows = [[cell(m.id, 60), _brief(m.from_), _brief(m.to)] for m in update.moved]
    lines += [f"{plural(len(rows), 'pin')} moved.", ""]
    if rows:
        lines += [table(["case", "previous pin", "new pin"], rows), ""]
    return folded("Pins written by this run", lines, detail, f": {len(rows)} moved")


def base_section(report: Report, detail: Detail) -> list[str]:
    """The base branch's pins against this PR's and this run: every row in full, only the changed ones in a comment."""
    base = report.base
    if not base:
        return []
    lines = []
    if base.error:
        lines += [f"> base branch pins unavailable: {inline(base.error)}", ""]
    elif not base.present:
        lines += ["> the base branch has no pins yet (first pins in this PR)", ""]
    diff = base.diff
    changed = [d for d in diff if d.pin_changed]
    shown = sorted(diff, key=lambda d: not d.pin_changed) if detail is Detail.FULL else changed
    limit = FAILING_ROWS_IN_COMMENT if detail is Detail.FAILING else None
    lines += [f"{len(changed)} of {len(diff)} case pins changed in this PR"
              + (" (marked **bold**)." if detail is Detail.FULL else "."), ""]
    for kind in ("added", "removed", "modified"):
        ids = [d.id for d in diff if d.fixture == kind]
        if ids:
            lines.append(f"- fixture cases {kind} by this PR: {_ids(ids, 50)}")
    if any(d.fixture for d in diff):
        lines.append("")
    if shown:
        rows = [
            [f"**{cell(d.id, 60)}**" if d.pin_changed else cell(d.id, 60), d.fixture or "", _brief(d.base),
             _brief(d.head), _brief(d.run)]
            for d in shown[:limit]
        ]
        lines += [table(["case", "fixture", "base pin", "head pin", "this run"], rows), ""]
    if limit is not None and len(shown) > limit:
        lines += [f"_… and {len(shown) - limit} more changed pins: see the job summary and report files._", ""]
    return folded("Pins: base branch → this PR → this run", lines, detail, f": {len(changed)} of {len(diff)} changed")


def cases_section(report: Report, detail: Detail, full_table: str | None = None) -> list[str]:
    """Every case with its measures and its pin's; the smallest comment level keeps only the cases not stable.

    ``full_table`` is ``cases_table(report.cases)`` made already (a merge makes it while it reads).
    """
    cases = list(report.cases)
    note = ["`~` marks a token count estimated as chars/4 (the server reported no usage).", ""]
    title = f"All cases ({len(cases)})"
    if detail is not Detail.FAILING:
        return folded(title, [full_table if full_table is not None else cases_table(cases), "", *note], detail)
    failing = [c for c in cases if c.gate is not Gate.PASS]
    more = len(failing) - FAILING_ROWS_IN_COMMENT
    note = [(f"_… and {more} more not-stable cases. " if more > 0 else "_")
            + f"{len(cases) - len(failing)} stable cases are left out of this comment; "
            "the full table is in the job summary and report files._", ""]
    return folded(f"Cases not stable ({len(failing)})", [cases_table(failing[:FAILING_ROWS_IN_COMMENT]), "", *note],
                  detail)


def cases_table(cases: Sequence[CaseRow]) -> str:
    """The table of these cases: a line each, in their order. It reads no gate: a merge makes it from its shards'
    rows."""
    return "".join(cases_table_parts(cases))


def cases_table_parts(cases: Sequence[CaseRow]) -> Iterator[str]:
    """``cases_table`` in parts, each case's line made as it is asked for (a long table's lines are never all held)."""
    # Streamed runs also show time to first token, so slower prefill and longer generation are told apart.
    streamed = any(c.ttft_ms is not None for c in cases)
    stratum = cache(cell)  # few strata: each escaped once
    lines = (_case_line(c, streamed, stratum) for c in cases)
    headers = ["case", "stratum", "label", "channel", "chars", "tokens", *(["ttft ms"] if streamed else []),
               "ms", "p95", "pin chars", "pin ms", "attempts", "outcome"]
    yield from _table_parts(headers, lines, len(cases))


# The pin's cells of a case without one.
_NO_PIN = (fmt_num(None), fmt_num(None))


def _case_line(c: CaseRow, streamed: bool, stratum: Callable[[str], str]) -> str:
    """One row of the cases table as its line, its numbers as ``fmt_num`` words them."""
    pin = c.pin
    pin_chars, pin_ms = _NO_PIN if pin is None else (_fmt_whole(pin.chars), _fmt_tenths(pin.ms))
    tokens = _fmt_whole(c.tokens)
    ttft = f"{_fmt_tenths(c.ttft_ms)} | " if streamed else ""
    return (f"| {cell(c.id, 60)} | {stratum(c.stratum or '–')} | {c.label._value_} | {c.channel._value_} | "
            f"{_fmt_whole(c.chars)} | {tokens + '~' if c.tokens_estimated else tokens} | {ttft}{_fmt_tenths(c.ms)} | "
            f"{_fmt_tenths(c.ms_p95)} | {pin_chars} | {pin_ms} | {c.attempts} | {_OUTCOME_WORDS[c.outcome]} |")


def render_markdown(report: Report, detail: Detail = Detail.FULL, title: str | None = None,
                    full_table: str | None = None) -> str:
    """The report as Markdown. ``detail``: full (report.md), collapsed or failing (the comment's levels).

    ``full_table``: the table of every case (``cases_table``) when it was made already.
    """
    detail = Detail(detail)
    parts: list[str] = []
    parts += headline(report, title)
    parts += alerts_section(report)
    groups = case_groups(report)
    parts += broken_section(groups, detail)
    parts += next_steps_section(report)
    parts += grid_section(report)
    parts += time_chart_section(report)
    parts += tolerated_section(groups, detail)
    parts += labels_section(report, detail)
    parts += lanes_section(report, detail)
    parts += fixtures_section(report, detail)
    parts += pins_update_section(report, detail)
    parts += base_section(report, detail)
    parts += cases_section(report, detail, full_table)
    return "\n".join(parts).rstrip() + "\n"


# Where report.md's table of every case goes while the rest is rendered (``markdown_parts``): escaped text holds no NUL.
_TABLE_HERE = "\x00cases table\x00"


def markdown_parts(report: Report, detail: Detail = Detail.FULL) -> Iterator[str]:
    """``render_markdown``'s text in parts, the table of every case (report.md's bulk) a line at a time as it is
    written.

    The rest is rendered whole around a mark where that table goes, and cut at it. The parts join
    to ``render_markdown``'s text: its final ``rstrip`` stops at the note after the table, and would
    stop at the table's last ``|`` were nothing after it.
    """
    if Detail(detail) is not Detail.FULL:
        yield render_markdown(report, detail)
        return
    before, *after = render_markdown(report, detail, full_table=_TABLE_HERE).split(_TABLE_HERE)
    if len(after) != 1:  # the mark is ours alone; were it not, the table goes in whole
        yield render_markdown(report, detail)
        return
    yield before
    yield from cases_table_parts(report.cases)
    yield after[0]
