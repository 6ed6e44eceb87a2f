"""Report -> report.html: one self-contained page to read a run in a browser, offline.

No network: the style, the charts (SVG drawn here) and one small script (the outcome filter) are inline, and
a Content-Security-Policy allows those two by their digests and nothing else, so even text that escaped its
escaping could load or run nothing. With scripts off every case is shown and only the filter is gone.

What it shows is the report's view (``report.view``), the same one report.md renders: the headline, what broke,
the next steps, the channel x stratum grid as a heat map, time and size against the pins, then every case with its
answer beside the pinned one (``report.pinned_answers``: read from git at the pins' commit) with the words that
changed marked. Every untrusted text (ids, answers, reasons, paths, commands) goes through ``_text``.
"""
from __future__ import annotations

import base64
import difflib
import hashlib
import html
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from ..model import Channel, Detail, Outcome, Verdict
from ..report import view
from ..report.model import CaseRow, Report
from .base import ReportFormat
from .escape import ELLIPSIS, clean

if TYPE_CHECKING:  # read only when a page is asked for: a merge that writes none loads no grading or YAML
    from ..report.pinned_answers import PinnedAnswers


def _text(value: object) -> str:
    """Untrusted text as HTML text or an attribute's value: cleaned (``escape.clean``), then every markup character
    escaped."""
    return html.escape(clean(str(value)), quote=True)


def _short(value: str, limit: int) -> str:
    """Untrusted text on one line, at most ``limit`` characters, escaped."""
    flat = " ".join(clean(value).split())
    return html.escape(flat if len(flat) <= limit else flat[: limit - 1] + ELLIPSIS, quote=True)


_STYLE = """
body{font:15px/1.45 system-ui,sans-serif;margin:0 auto;max-width:70rem;padding:1rem 1.5rem;color:#1f2328}
h1{font-size:1.6rem;margin:.2rem 0}h2{font-size:1.25rem;margin:1.6rem 0 .5rem;border-bottom:1px solid #d0d7de}
h3{font-size:1rem;margin:0 0 .3rem}h4{font-size:.85rem;margin:.4rem 0 .2rem;color:#57606a}
code,pre{font:13px/1.4 ui-monospace,monospace}pre{white-space:pre-wrap;word-break:break-word;margin:0}
table{border-collapse:collapse;margin:.4rem 0}th,td{border:1px solid #d0d7de;padding:.25rem .5rem;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.verdict-pass{color:#1a7f37}.verdict-fail{color:#cf222e}.verdict-inconclusive{color:#9a6700}
.warning{border-left:4px solid #cf222e;padding:.3rem .8rem;background:#fff1f0}
.notes{border-left:4px solid #d0d7de;padding:0 .8rem;color:#57606a}
.ok1{background:#dafbe1}.ok2{background:#aceebb}.ok3{background:#6fdd8b}.ok4{background:#4ac26b}
.bad1{background:#ffebe9}.bad2{background:#ffcecb}.bad3{background:#ff8182}.bad4{background:#fa4549;color:#fff}
.chart{max-width:100%;height:auto}.chart text{font:12px system-ui,sans-serif;fill:#1f2328}
.chart .pin{fill:#8c959f}.chart .run{fill:#0969da}.chart .beyond{fill:#cf222e;font-weight:bold}
.chart .axis{stroke:#8c959f}
#filter button{margin:0 .3rem .3rem 0;padding:.2rem .6rem;border:1px solid #d0d7de;border-radius:1rem;
background:#f6f8fa}
#filter button[aria-pressed=true]{background:#0969da;color:#fff}
.case{border:1px solid #d0d7de;border-radius:6px;padding:.6rem .8rem;margin:.6rem 0}
.case.gate-fail{border-left:4px solid #cf222e}.case.gate-undelivered{border-left:4px solid #9a6700}
.case.gate-tolerated{border-left:4px solid #8c959f}.case.gate-pass{border-left:4px solid #1a7f37}
.facts,.where,.note{margin:.2rem 0;color:#57606a}.reasons{margin:.2rem 0}
.answers{display:flex;gap:.8rem;flex-wrap:wrap}.answers>div{flex:1 1 20rem;min-width:0}
.answer{background:#f6f8fa;padding:.4rem .5rem;border-radius:4px}
del{background:#ffcecb;text-decoration:line-through}ins{background:#aceebb;text-decoration:none}
[hidden]{display:none!important}
"""

# Shows the filter (hidden to readers without scripts), and on a click hides the cases of other outcomes.
_SCRIPT = """
(function () {
  var bar = document.getElementById("filter");
  var cases = document.querySelectorAll("#cases .case");
  function show(outcome) {
    cases.forEach(function (c) { c.hidden = outcome !== "all" && c.dataset.outcome !== outcome; });
    bar.querySelectorAll("button").forEach(function (b) {
      b.setAttribute("aria-pressed", String(b.dataset.outcome === outcome));
    });
  }
  bar.hidden = false;
  bar.addEventListener("click", function (event) {
    var button = event.target.closest("button");
    if (button) { show(button.dataset.outcome); }
  });
  window.addEventListener("hashchange", function () { show("all"); });
})();
"""


def _digest(source: str) -> str:
    """A CSP source allowing exactly this inline text."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode()).digest()).decode() + "'"


_CSP = (f"default-src 'none'; style-src {_digest(_STYLE)}; script-src {_digest(_SCRIPT)}; "
        "img-src 'none'; base-uri 'none'; form-action 'none'")

_ICON = {Verdict.PASS: "✅", Verdict.FAIL: "❌", Verdict.INCONCLUSIVE: "⚠️"}


# -- the first screen --------------------------------------------------------------------------


def _head(report: Report) -> str:
    """The document's head: its title, the policy that allows only the inline style and script, the style."""
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"{_CSP}\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>envelope-ci: {report.verdict.value}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n")


def _headline(report: Report) -> list[str]:
    """The verdict (and a new model), a lowered baseline, the counts and rates, blockers and notes."""
    model = view.model_moved(report, _text)
    out = [f"<header><h1 class=\"verdict-{report.verdict.value}\">{_ICON[report.verdict]} envelope-ci: "
           f"{report.verdict.value}</h1>", f"<p>{model}</p>" if model else "", "</header>"]
    lowered = view.baseline_lowered(report, _code)
    if lowered:
        out.append(f"<p class=\"warning\"><strong>{lowered[0]}</strong> {lowered[1]}</p>")
    cases, *rest = view.headline_counts(report)
    out.append(f"<p><strong>{cases}</strong> · " + " · ".join(rest) + "</p>")
    said = [*(f"<p><strong>inconclusive:</strong> {_text(b)}</p>" for b in report.blockers),
            *(f"<p>{_text(n)}</p>" for n in report.notes)]
    return out + ([f"<div class=\"notes\">{''.join(said)}</div>"] if said else [])


def _alerts(report: Report) -> list[str]:
    """Every alert: its code and its sentence."""
    if not report.alert_details:
        return []
    items = "".join(f"<li><code>{_text(a.code)}</code> — {_text(a.message)}</li>" for a in report.alert_details)
    return ["<h2>Alerts</h2>", f"<ul>{items}</ul>"]


def _broken(groups: Mapping[int, Sequence[CaseRow]], anchors: Mapping[str, int]) -> list[str]:
    """What fails the gate or was not delivered, a table per group, each case linked to its card below."""
    out: list[str] = []
    for group in (view.REGRESSIONS, view.FAILING, view.UNDELIVERED):
        cases = groups.get(group, ())
        if not cases:
            continue
        title, with_outcome, sentence = view.GROUPS[group]
        head = "".join(f"<th>{h}</th>" for h in ("case", "stratum", "label", "channel",
                                                 *(["outcome"] if with_outcome else []), "why"))
        rows = "".join(
            f"<tr><td><a href=\"#case-{anchors[c.id]}\"><code>{_text(c.id)}</code></a></td>"
            f"<td>{_text(c.stratum or '–')}</td><td>{c.label.value}</td><td>{c.channel.value}</td>"
            + (f"<td>{view.OUTCOME_WORDS[c.outcome]}</td>" if with_outcome else "")
            + f"<td>{_text('; '.join(c.reasons))}</td></tr>" for c in cases)
        out += [f"<h2>{title} ({len(cases)})</h2>", f"<p>{sentence}</p>" if sentence else "",
                f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"]
    return out


def _next_steps(report: Report) -> list[str]:
    """What to do about this run, each step with its exact command."""
    if not report.next_steps:
        return []
    items = "".join(f"<li><p>{_text(s.why)}</p>"
                    + (f"<pre><code>{_text(s.command)}</code></pre>" if s.command else "") + "</li>"
                    for s in report.next_steps)
    return ["<h2>Next steps</h2>", f"<ol>{items}</ol>"]


# -- the heat map and the charts ----------------------------------------------------------------


def _code(text: str) -> str:
    """An id, label, path or alert as inline code."""
    return f"<code>{_text(text)}</code>"


def _heat(n: int, of: int, stable: bool) -> str:
    """A grid cell's class: a number, shaded in four steps by its share of the stratum's cases (0 unshaded)."""
    if not n:
        return ' class="n"'
    step = 1 + min(3, 4 * n // max(of, 1))
    return f' class="n {"ok" if stable else "bad"}{step}"'


def _grid(report: Report) -> list[str]:
    """Cases per stratum and channel as a heat map: green on stable, red where a channel broke."""
    head = "".join(f"<th>{view.grid_column(ch)}</th>" for ch in view.GRID_CHANNELS)
    rows = []
    for row in view.grid_rows(report):
        cells = "".join(f"<td{_heat(n, row.cases, ch is Channel.STABLE)}>{n}</td>"
                        for ch, n in zip(view.GRID_CHANNELS, row.counts, strict=True))
        rows.append(f"<tr><th>{_text(row.name)}</th>{cells}<td>{view.grid_bar(row, _code)}</td></tr>")
    return ["<h2>Channels by stratum</h2>",
            f"<table class=\"grid\"><thead><tr><th>stratum</th>{head}<th>{view.GRID_BAR_COLUMN}</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>"]


# The charts: at most this many cases each (those beyond the slack first, then those that moved most), drawn in a
# box this wide with room for the ids on the left and each bar's value on its right.
CHART_MAX = 30
_WIDTH, _LABELS, _BARS, _BAR, _TOP = 760, 230, 460, 14, 8
_LABEL_CHARS = 34


def _chart(moves: Sequence[view.Move], what: str, unit: str) -> list[str]:
    """One chart of each case's pinned measure (grey) beside this run's (blue); an id beyond the slack is red."""
    title = f"{what.capitalize()} against the pins ({unit})"
    if not moves:
        return [f"<h3>{title}</h3>", f"<p>No case has both a pinned and a measured {what}.</p>"]
    shown = moves[:CHART_MAX]
    top = max(max(m.pinned, m.now) for m in shown) or 1.0
    height = _TOP + len(shown) * (2 * _BAR + 6) + 24
    svg = [f"<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" width=\"{_WIDTH}\" "
           f"height=\"{height}\" viewBox=\"0 0 {_WIDTH} {height}\"><title>{title}</title>"]
    for i, move in enumerate(shown):
        svg.append(_chart_row(move, _TOP + i * (2 * _BAR + 6), top, unit))
    bottom = height - 18
    svg.append(f"<line class=\"axis\" x1=\"{_LABELS}\" y1=\"{_TOP - 4}\" x2=\"{_LABELS}\" y2=\"{bottom}\"/>"
               f"<rect class=\"pin\" x=\"{_LABELS}\" y=\"{bottom + 5}\" width=\"10\" height=\"10\"/>"
               f"<text x=\"{_LABELS + 14}\" y=\"{bottom + 14}\">pin (judged against)</text>"
               f"<rect class=\"run\" x=\"{_LABELS + 150}\" y=\"{bottom + 5}\" width=\"10\" height=\"10\"/>"
               f"<text x=\"{_LABELS + 164}\" y=\"{bottom + 14}\">this run</text></svg>")
    beyond = sum(m.beyond for m in moves)
    more = f" The {CHART_MAX} that moved most are drawn, of {len(moves)}." if len(moves) > CHART_MAX else ""
    return [f"<h3>{title}</h3>",
            f"<p>{view.plural(beyond, 'case')} on the {what} channel or outside its slack, in red.{more}</p>", *svg]


def _chart_row(move: view.Move, y: int, top: float, unit: str) -> str:
    """One case's two bars, its id and their values."""
    label = _short(move.case.id, _LABEL_CHARS)
    beyond = ' class="beyond"' if move.beyond else ""
    out = [f"<text x=\"{_LABELS - 6}\" y=\"{y + _BAR + 4}\" text-anchor=\"end\"{beyond}>{label}</text>"]
    for row, (kind, name, value) in enumerate((("pin", "pin", move.pinned), ("run", "this run", move.now))):
        width = max(1.0, round(value / top * _BARS, 1))
        out.append(f"<rect class=\"{kind}\" x=\"{_LABELS}\" y=\"{y + row * _BAR}\" width=\"{width}\" "
                   f"height=\"{_BAR - 2}\"><title>{label}: {name} {value:.0f} {unit}</title></rect>"
                   f"<text x=\"{_LABELS + width + 4}\" y=\"{y + row * _BAR + _BAR - 3}\">{value:.0f}</text>")
    return "".join(out)


def _charts(report: Report) -> list[str]:
    """Time and size, each case's pin beside this run."""
    return ["<h2>Against the pins</h2>", *_chart(view.time_moves(report), "time", "ms"),
            *_chart(view.size_moves(report), "size", "chars")]


# -- every case ----------------------------------------------------------------------------------


def _filter(report: Report) -> str:
    """The outcome filter's buttons, hidden until the script shows them."""
    counts = Counter(c.outcome for c in report.cases)
    buttons = [f"<button type=\"button\" data-outcome=\"all\" aria-pressed=\"true\">all ({len(report.cases)})</button>",
               *(f"<button type=\"button\" data-outcome=\"{o.value}\" aria-pressed=\"false\">"
                 f"{view.OUTCOME_WORDS[o]} ({counts[o]})</button>" for o in Outcome if counts[o])]
    return ("<div id=\"filter\" role=\"group\" aria-label=\"Show the cases of one outcome\" hidden>"
            + "".join(buttons) + "</div>")


# Words, runs of spaces and single other characters: what a changed answer's marks are made of.
_TOKENS = re.compile(r"\s+|\w+|[^\w\s]")


def marked(pinned: str, now: str) -> tuple[str, str]:
    """Both answers as escaped HTML, the words only the pinned one has in ``<del>``, those only this run has in
    ``<ins>``."""
    before, after = _TOKENS.findall(clean(pinned)), _TOKENS.findall(clean(now))
    left, right = [], []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes():
        old, new = html.escape("".join(before[i1:i2])), html.escape("".join(after[j1:j2]))
        if op == "equal":
            left.append(old)
            right.append(new)
            continue
        left.append(f"<del>{old}</del>" if old else "")
        right.append(f"<ins>{new}</ins>" if new else "")
    return "".join(left), "".join(right)


_NO_ANSWER = "<p class=\"note\">No answer.</p>"


def _answer(title: str, body: str | None) -> str:
    """One answer under its title, already escaped; none said so."""
    return f"<div><h4>{title}</h4><pre class=\"answer\">{body}</pre></div>" if body is not None else _NO_ANSWER


def _answers(case: CaseRow, report: Report, pinned: PinnedAnswers) -> str:
    """This run's answer beside the pinned one, the changes marked; or why the pinned one cannot be shown."""
    now = case.preview
    read = pinned.texts.get(case.id) if case.pin is not None else None
    then = read if read is not None or not view.graded_as_pinned(case, report) else now
    if then is None:
        note = f"<p class=\"note\">{_no_pinned_answer(case, report, pinned)}</p>"
        return f"{note}<div class=\"answers\">{_answer('This run', None if now is None else _text(now))}</div>"
    if now == then:
        return f"<div class=\"answers\">{_answer('This run (the same as pinned)', _text(now))}</div>"
    title = "Pinned" + (f" (recorded at {_text((pinned.commit or '')[:12])})" if read is not None else "")
    if now is None:
        return f"<div class=\"answers\">{_NO_ANSWER}{_answer(title, _text(then))}</div>"
    old, new = marked(then, now)
    return f"<div class=\"answers\">{_answer('This run', new)}{_answer(title, old)}</div>"


def _no_pinned_answer(case: CaseRow, report: Report, pinned: PinnedAnswers) -> str:
    """Why the pinned answer is not shown, and what the digests say in its place."""
    if case.pin is None:
        return "New case: no pin to compare with."
    if view.graded_as_pinned(case, report):
        return "The case's digest is its pin's: it was pinned with no answer either."
    said = pinned.unknown or pinned.why.get(case.id)
    why = _text(said) if said else "its fixture file had no recorded answers at the pins' commit"
    kept = f"The pins keep no answer text, and git could not show the pinned one: {why}."
    if report.run.mode == "offline":
        return f"The answer's digest changed since the pins (its recorded answer, request or assertions differ). {kept}"
    return kept


def _case(index: int, case: CaseRow, report: Report, pinned: PinnedAnswers) -> str:
    """One case's card: its outcome and gate, measures against its pin, reasons, and its answer against the pin's."""
    pin = case.pin
    against = (f"pin: {_text(pin.label)} · {view.measures(pin.chars, pin.tokens, pin.ms)}" if pin is not None
               else "no pin")
    where = f"{case.file}:{case.line}" if case.line else case.file
    reasons = "".join(f"<li>{_text(r)}</li>" for r in case.reasons)
    return (f"<article class=\"case gate-{case.gate.value}\" id=\"case-{index}\" data-outcome=\"{case.outcome.value}\">"
            f"<h3><code>{_text(case.id)}</code></h3>"
            f"<p class=\"facts\"><strong>{view.OUTCOME_WORDS[case.outcome]}</strong> · gate {case.gate.value} · "
            f"{case.label.value} on {case.channel.value} · stratum {_text(case.stratum or '–')} · "
            f"{view.measures(case.chars, case.tokens, case.ms) or 'not measured'} · {against}</p>"
            f"<p class=\"where\">{_text(where)}</p>" + (f"<ul class=\"reasons\">{reasons}</ul>" if reasons else "")
            + _answers(case, report, pinned) + "</article>\n")


# -- the page ------------------------------------------------------------------------------------


def html_parts(report: Report, pinned: PinnedAnswers | None = None) -> Iterator[str]:
    """The page in parts: everything above the cases whole, then a case at a time, then the script.

    ``pinned``: the pinned answers, read from git when not given. There is one detail level: a page is cut to fit
    nowhere.
    """
    if pinned is None:
        from ..report.pinned_answers import read_pinned_answers

        pinned = read_pinned_answers(report)
    anchors = {c.id: i for i, c in enumerate(report.cases)}
    top: list[str] = [_head(report), *_headline(report), *_alerts(report), *_broken(view.case_groups(report), anchors),
                      *_next_steps(report), *_grid(report), *_charts(report),
                      f"<h2>Cases ({len(report.cases)})</h2>", _filter(report), "<section id=\"cases\">\n"]
    yield "\n".join(p for p in top if p)
    for index, case in enumerate(report.cases):
        yield _case(index, case, report, pinned)
    yield f"</section>\n<script>{_SCRIPT}</script>\n</body>\n</html>\n"


def render_html(report: Report, pinned: PinnedAnswers | None = None) -> str:
    """The whole page (``html_parts`` joined)."""
    return "".join(html_parts(report, pinned))


def _render(report: Report, detail: Detail) -> str:
    return render_html(report)


def _parts(report: Report, detail: Detail) -> Iterable[str]:
    return html_parts(report)


HTML = ReportFormat("html", "report.html", _render,
                    "one self-contained page: heat map, charts, cases filterable by outcome, answers against the pins",
                    _parts)
