"""Report -> JUnit XML, one testcase per alert and per case, agreeing with the verdict and each case's ``gate``.

Every alert fails the run, and most are tied to no case (``fixtures_changed``, ``stale_recording``,
a stratum too thin), so each alert is a failing testcase of its own, first. A case that fails the
run (a regression, or a case in a stratum whose floor it broke) is a ``failure``; a transport
label is an ``error``; a case that is not stable but does not fail the gate (a known failure, a
stretch miss) is ``skipped`` with the reason, so a JUnit reporter's red or green matches
envelope-ci's verdict.

The XML is written as text, a line per element, laid out as ElementTree's ``indent`` and
``tostring`` would (tests/formats/test_junit.py checks the bytes against them): a tree of every
case, built and then serialised, was the slowest part of writing a big run's reports.
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache

from ..findings import Alert
from ..model import Gate
from ..report.model import CaseRow, Report, stratum_name
from .escape import clean

# A case's gate -> its JUnit element (None: passed).
JUNIT_KIND = {Gate.FAIL: "failure", Gate.UNDELIVERED: "error", Gate.TOLERATED: "skipped", Gate.PASS: None}

# XML escapes in one pass each (every character replaced at most once, so `&` is never escaped twice):
# element text needs `&`, `<` and `>`; an attribute value also its quote and the whitespace a parser would normalise.
_TEXT = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
_ATTRIBUTE = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;",
                            "\r": "&#13;", "\n": "&#10;", "\t": "&#09;"})
# What each table replaces: most values have none of it, and a search is cheaper than a translate through a table.
_IN_TEXT = re.compile("[&<>]")
_IN_ATTRIBUTE = re.compile('[&<>"\r\n\t]')


def _value(text: str) -> str:
    """An attribute value, escaped."""
    return text.translate(_ATTRIBUTE) if _IN_ATTRIBUTE.search(text) else text


def _attrs(pairs: dict[str, str]) -> str:
    """` name="value"` for each attribute, values escaped."""
    return "".join(f' {name}="{_value(value)}"' for name, value in pairs.items())


def _element(tag: str, attrs: dict[str, str], text: str = "") -> str:
    """One childless element: its escaped text, or self-closed when it has none."""
    if not text:
        return f"<{tag}{_attrs(attrs)} />"
    return f"<{tag}{_attrs(attrs)}>{text.translate(_TEXT) if _IN_TEXT.search(text) else text}</{tag}>"


def _testcase(c: CaseRow, kind: str | None, classname: str, place: str) -> str:
    """One case's testcase element, its failure, error or skipped inside it, indented at the testsuite's children's
    level.

    ``classname`` and ``place`` (the file attribute) come escaped: most cases share theirs with many others.
    """
    # Ids and paths come from users: XML 1.0 cannot carry control characters at all.
    line = f' line="{c.line}"' if c.line else ""
    attrs = f' classname="{classname}" name="{_value(clean(c.id))}" time="{(c.ms or 0.0) / 1000.0:.3f}"{place}{line}'
    if kind is None:
        return f"<testcase{attrs} />"
    reasons = clean("; ".join(c.reasons))
    # attributes: ``.value`` is a Python property
    label, channel, outcome = c.label._value_, c.channel._value_, c.outcome._value_
    if kind == "error":
        inner = _element("error", {"message": f"{label}: {reasons}"[:500], "type": label}, reasons)
    elif kind == "skipped":
        inner = _element(
            "skipped", {"message": f"not stable but not failing the gate: {channel} ({outcome}): {reasons}"[:500]})
    else:
        inner = _element("failure", {"message": f"{channel} ({outcome}): {reasons}"[:500], "type": channel},
                         reasons + ("\n\nanswer: " + clean(c.preview) if c.preview else ""))
    return f"<testcase{attrs}>\n      {inner}\n    </testcase>"


def _alert_testcase(alert: Alert, suite: str) -> str:
    """One alert as a failing testcase: the verdict fails on it, whether or not a case does."""
    code = clean(alert.code)
    name = f"{code} ({clean(alert.stratum)})" if alert.stratum else code
    message = clean(alert.message)
    inner = _element("failure", {"message": message[:500], "type": code}, message)
    return (f'<testcase classname="{_value(suite)}.alert" name="{_value(name)}" time="0.000">\n      {inner}\n'
            "    </testcase>")


def render_junit(report: Report, suite: str = "envelope-ci") -> str:
    """JUnit XML that Jenkins, GitLab and the common GitHub reporters read."""
    return "".join(junit_parts(report, suite))


def junit_parts(report: Report, suite: str = "envelope-ci") -> Iterator[str]:
    """``render_junit``'s text in parts, a testcase each, made as they are asked for: written as they come, no text is
    ever whole."""
    cases, alerts = report.cases, report.alert_details
    kinds = [JUNIT_KIND[c.gate] for c in cases]
    counts = {k: str(kinds.count(k)) for k in ("error", "skipped")}
    counts["failure"] = str(kinds.count("failure") + len(alerts))  # every alert is a failing testcase
    tests = str(len(alerts) + len(cases))
    total_s = f"{sum((c.ms or 0.0) for c in cases) / 1000.0:.3f}"
    root = _attrs({"name": suite, "tests": tests, "failures": counts["failure"], "errors": counts["error"],
                   "time": total_s})
    head = _attrs({"name": suite, "tests": tests, "failures": counts["failure"], "errors": counts["error"],
                   "skipped": counts["skipped"], "time": total_s})
    yield f'<?xml version="1.0" encoding="UTF-8"?>\n<testsuites{root}>\n  '
    if not cases and not alerts:
        yield f"<testsuite{head} />\n</testsuites>\n"
        return
    yield f"<testsuite{head}>"
    for alert in alerts:
        yield "\n    "
        yield _alert_testcase(alert, suite)
    # Each stratum's classname (by the field: its row name is a property) and each file's attribute escaped once, as
    # the cases come.
    classname = cache(lambda stratum: _value(f"{suite}.{stratum_name(stratum)}"))
    place = cache(lambda file: f' file="{_value(clean(file))}"' if file else "")
    for c, kind in zip(cases, kinds, strict=True):
        yield "\n    "
        yield _testcase(c, kind, classname(c.stratum), place(c.file))
    yield "\n  </testsuite>\n</testsuites>\n"
