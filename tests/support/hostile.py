"""Untrusted text that tries to become markup, in every format a report is rendered to: the escaping tests of
report.md (``tests/formats/test_escape.py``) and of report.html (``tests/formats/test_html.py``, and in a browser
``tests/formats/test_html_browser.py``) feed the same strings, the page's tests as a whole report of them."""
from __future__ import annotations

from msgspec.structs import replace

from envelope_ci.findings import Alert, PinBrief, StratumRow
from envelope_ci.model import Gate, Outcome, Verdict
from envelope_ci.report.model import BaseDiff, BaseDiffRow, ModelChange, NextStep, Report
from envelope_ci.report.pinned_answers import PinnedAnswers

NASTY = [
    "@octocat",
    "owner/repo#1",
    "a | b \\| c \\\\| d",
    "x\\",
    "```\n| injected | row |\n```",
    "<!-- envelope-ci:default -->",
    "</details><details open><summary>fake</summary>",
    "<img src=x> <a href='https://evil.example'>login</a>",
    "[ok](https://evil.example) ![t](https://t.example/p.png) https://x.example",
    "&lt;script&gt; &amp;",
    "`code | span` ``double``",
    "*a* _b_ ~~c~~ **d**",
    "\u202eevil\u202c",
    "line1\r\nline2",
]

# What only a page has to fear besides: a script, an attribute broken out of, a closed element, a style, a
# link to follow, SVG's own markup, a lone surrogate.
HTML_NASTY = [
    "<script>alert(1)</script>",
    "\"><svg onload=alert(1)>",
    "' onmouseover='alert(1)",
    "</code></pre></article></section><script>document.title='x'</script>",
    "<style>body{display:none}</style>",
    "<a href=\"javascript:alert(1)\">click</a>",
    "</text><foreignObject><iframe src=//evil.example></iframe></foreignObject>",
    "]]><![CDATA[<b>x</b>",
    "lone \ud800 surrogate",
]

HOSTILE = [*NASTY, *HTML_NASTY]

GATES = [(Gate.FAIL, Outcome.REGRESSION), (Gate.UNDELIVERED, Outcome.UNDELIVERED),
         (Gate.TOLERATED, Outcome.KNOWN_FAILURE), (Gate.PASS, Outcome.UNCHANGED), (Gate.FAIL, Outcome.IMPROVEMENT)]
HOSTILE_STRATUM = "<script>alert('stratum')</script>"


def hostile_report(example: Report) -> Report:
    """The example with every untrusted text a hostile string: ids, strata, reasons, answers, files, notes, alerts,
    next steps, the base branch's model and downgrades, the pins' path."""
    rows = []
    for i, text in enumerate(HOSTILE):
        gate, outcome = GATES[i % len(GATES)]
        rows.append(replace(example.cases[i % len(example.cases)], id=text, reasons=(text,), preview=text, file=text,
                            stratum=HOSTILE_STRATUM if i % 3 == 0 else "easy", gate=gate, outcome=outcome))
    brief = PinBrief(10, 3, 400.0, HOSTILE[1])
    base = BaseDiff(HOSTILE[2], None, True, tuple(BaseDiffRow(t, brief, None, None, True, "modified") for t in HOSTILE),
                    downgraded=tuple(HOSTILE), model_change=ModelChange(HOSTILE[3], HOSTILE[4]))
    return replace(example, verdict=Verdict.FAIL, cases=tuple(rows), notes=tuple(HOSTILE), blockers=tuple(HOSTILE),
                   alert_details=tuple(Alert(t, HOSTILE_STRATUM, t) for t in HOSTILE), base=base,
                   strata={**example.strata, HOSTILE_STRATUM: StratumRow(1, 1, 1.0, 1, 0)},
                   next_steps=tuple(NextStep(t, t) for t in HOSTILE), run=replace(example.run, pins=HOSTILE[5]))


def pinned_differently(report: Report) -> PinnedAnswers:
    """Pinned answers unlike every case's own (another hostile string), so each is shown marked up against it."""
    return PinnedAnswers({c.id: HOSTILE[(i + 1) % len(HOSTILE)] for i, c in enumerate(report.cases)}, "0123456789ab")
