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
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import cache, partial
from typing import Any

import tabulate as _tabulate_module
from tabulate import tabulate

from ..findings import PinBrief
from ..model import Channel, Detail, Gate, Verdict
from ..report.model import BaseDiffRow, CaseRow, Report
from ..report.view import (
    FAILING,
    GRID_BAR_COLUMN,
    GRID_CHANNELS,
    GROUPS,
    OUTCOME_WORDS,
    REGRESSIONS,
    TOLERATED,
    UNDELIVERED,
    Move,
    case_groups,
    fmt_rate,
    grid_bar,
    grid_column,
    grid_rows,
    headline_counts,
    measures,
    model_moved,
    plural,
    time_moves,
)
from ..report.view import baseline_lowered as view_baseline_lowered
from .escape import ELLIPSIS, cell, clean, fenced, inline

# Pad cells by code points, never by terminal columns: tabulate measures with wcwidth whenever that happens to
# be importable, so the same report's bytes depended on what else was installed. GitHub renders either the same.
_tabulate_module.WIDE_CHARS_MODE = False

_ICON = {Verdict.PASS: "✅", Verdict.FAIL: "❌", Verdict.INCONCLUSIVE: "⚠️"}


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


# Past this many rows tabulate's column padding costs seconds and buys nothing: GitHub
# renders an unpadded pipe table identically.
PADDED_ROWS_MAX = 500


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
    lowered = view_baseline_lowered(report, inline)
    return [f"> **⚠️ {lowered[0]}** {lowered[1]}", ""] if lowered else []


# A model id in the headline: the fingerprint joins every id the responses named, so a long one is cut.
_MODEL_ID = partial(inline, limit=80)


def quote_paragraphs(texts: Sequence[str]) -> list[str]:
    """One quote block, each text a paragraph of its own: consecutive `> ` lines would join into one paragraph."""
    lines: list[str] = []
    for text in texts:
        lines += [">", f"> {text}"] if lines else [f"> {text}"]
    return lines + [""] if lines else []


def headline(report: Report, title: str | None) -> list[str]:
    """The verdict (and a new model), a lowered baseline, the counts and rates, blockers and notes."""
    model = model_moved(report, _MODEL_ID)
    name = (f" — {inline(title)}" if title else "") + (f" · {model}" if model else "")
    cases, *rest = headline_counts(report)
    line = " · ".join([f"**{cases}**", *rest])
    out = [f"## {_ICON[report.verdict]} envelope-ci: {report.verdict.value}{name}", "", *baseline_lowered(report),
           line, ""]
    return out + quote_paragraphs([*(f"**inconclusive:** {inline(blocker)}" for blocker in report.blockers),
                                   *map(inline, report.notes)])


def alerts_section(report: Report) -> list[str]:
    """Every alert: its code and its sentence."""
    if not report.alert_details:
        return []
    lines = ["### Alerts", ""]
    lines += [f"- `{a.code}` — {inline(a.message)}" for a in report.alert_details]
    return lines + [""]


# The first-screen tables of a comment show this many rows each, so the next steps stay in view.
FIRST_SCREEN_ROWS = 10
# A folded table in the smallest comment level shows this many rows; the rest are in the job summary.
FAILING_ROWS_IN_COMMENT = 100


def case_group_table(cases: Sequence[CaseRow], group: int, limit: int | None) -> tuple[str, list[str]]:
    """One group's title with its count, and its table (at most `limit` rows, then how many more)."""
    if not cases:
        return "", []
    title, with_outcome, sentence = GROUPS[group]
    # Strata, reasons and answers repeat across thousands of rows: each text is escaped once.
    short, why = cache(cell), cache(partial(cell, limit=160))  # cell's own limit (80) for strata and answers
    rows = [
        [cell(c.id, 60), short(c.stratum or "–"), c.label.value, c.channel.value,
         *([OUTCOME_WORDS[c.outcome]] if with_outcome else []), why("; ".join(c.reasons)), short(c.preview or "")]
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


def _alert_code(code: str) -> str:
    """An alert's code (a fixed word of ours) as inline code."""
    return f"`{code}`"


def grid_section(report: Report) -> list[str]:
    """One table in place of channels, strata and labels: cases per stratum and channel, and the stratum's bar."""
    rows = []
    for row in grid_rows(report):
        # Non-zero counts off the stable channel are what broke: bold, so the eye finds them.
        cells = [str(n) if ch is Channel.STABLE or not n else f"**{n}**"
                 for ch, n in zip(GRID_CHANNELS, row.counts, strict=True)]
        rows.append([cell(row.name), *cells, grid_bar(row, _alert_code)])
    headers = ["stratum", *map(grid_column, GRID_CHANNELS), GRID_BAR_COLUMN]
    return ["### Channels by stratum", "", table(headers, rows), ""]


# -- the time chart ----------------------------------------------------------------------------

# At most this many cases in the chart: the ones whose time moved most.
TIME_CHART_MAX = 20
# The chart's height: its title and value axis, then a band per bar (two per case), so one case draws a short chart.
TIME_CHART_FRAME_PX = 110
TIME_CHART_BAR_PX = 22
_MERMAID_LABEL_MAX = 28
# Kept in a Mermaid label: word characters and a little punctuation. Everything else (quotes
# and brackets that end a string or a list, `%%` directives, `#…;` entities, newlines, `@`)
# becomes `_`, so an id can neither break the chart nor reconfigure it.
_MERMAID_UNSAFE = re.compile(r"[^\w .:/+-]+")


def mermaid_label(text: str) -> str:
    """A case id as a Mermaid string's content: inert, one line, at most _MERMAID_LABEL_MAX characters."""
    flat = " ".join(_MERMAID_UNSAFE.sub("_", clean(text)).split())
    return flat if len(flat) <= _MERMAID_LABEL_MAX else flat[: _MERMAID_LABEL_MAX - 1].rstrip() + ELLIPSIS


def distinct_labels(labels: Iterable[str]) -> list[str]:
    """The labels, each made unique by primes: a Mermaid band axis merges equal names, so two that read alike would
    share one bar."""
    out: list[str] = []
    for label in labels:
        while label in out:
            label += "'"
        out.append(label)
    return out


def time_chart(moves: Sequence[Move]) -> str:
    """The Mermaid bar chart of these moves, its height set by their number (Mermaid's default draws one case some
    600 pixels tall)."""
    cases = distinct_labels(mermaid_label(move.case.id) for move in moves)
    labels = [f"{label} · {bar}" for label in cases for bar in ("pin", "this run")]
    # Two series padded with zeros: each bar has its own category, so none hides another,
    # and the pin and this run keep their own colours.
    before = [v for m in moves for v in (round(m.pinned), 0)]
    after = [v for m in moves for v in (0, round(m.now))]
    return "\n".join([
        "---",
        "config:",
        "  xyChart:",
        f"    height: {TIME_CHART_FRAME_PX + TIME_CHART_BAR_PX * len(labels)}",
        "---",
        "xychart-beta horizontal",
        '    title "Time per case (ms): pin (judged against) vs this run"',
        "    x-axis [" + ", ".join(f'"{label}"' for label in labels) + "]",
        '    y-axis "ms"',
        f"    bar [{', '.join(map(str, before))}]",
        f"    bar [{', '.join(map(str, after))}]",
    ])


def time_chart_section(report: Report) -> list[str]:
    """A Mermaid bar chart, in ms, of the cases whose time moved: the pin the gate judged against vs this run (GitHub
    draws it inline)."""
    moves = [m for m in time_moves(report) if m.beyond]
    if not moves:
        return []
    t = report.run.thresholds
    more = f" The {TIME_CHART_MAX} that moved most are drawn." if len(moves) > TIME_CHART_MAX else ""
    whose = " (this PR's, not the base branch's)" if report.base and report.base.present else ""
    return [
        f"### Time moved ({len(moves)})",
        "",
        f"Cases on the time channel or outside the time slack (×{t.time_slack:g}, at least {t.time_floor_ms:g} ms) "
        f"of their pin: each `pin` bar is the pin in {inline(report.run.pins)}{whose} that the gate judged the case "
        f"against, scaled to the latency level the case was measured at when both have one, beside this run.{more}",
        "",
        fenced(time_chart(moves[:TIME_CHART_MAX]), "mermaid"),
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
        for key, ids in (("modified", f.modified), ("added", f.added), ("removed", f.removed),
                         ("retimed (only time or usage moved)", f.retimed)):
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


def _answer_changes_first(row: BaseDiffRow) -> bool:
    """Rows whose case or answer this PR changed sort before those only retimed or only re-measured."""
    return row.fixture not in ("modified", "added", "removed")


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
    # Answer changes first: a re-recorded suite's retimed pins must not bury the one case whose answer moved.
    changed = sorted((d for d in diff if d.pin_changed), key=_answer_changes_first)
    shown = (sorted(diff, key=lambda d: (not d.pin_changed, _answer_changes_first(d))) if detail is Detail.FULL
             else changed)
    limit = FAILING_ROWS_IN_COMMENT if detail is Detail.FAILING else None
    lines += [f"{len(changed)} of {len(diff)} case pins changed in this PR"
              + (" (marked **bold**)." if detail is Detail.FULL else "."), ""]
    for kind in ("modified", "added", "removed", "retimed"):
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
            f"{_fmt_tenths(c.ms_p95)} | {pin_chars} | {pin_ms} | {c.attempts} | {OUTCOME_WORDS[c.outcome]} |")


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
