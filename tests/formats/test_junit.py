"""junit.xml is written as text, for a 100k-case merge: it must be byte for byte what ElementTree writes.

Checked over the bundled examples' reports and over generated ones with hostile text.
"""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec.structs import replace

from envelope_ci.formats.escape import clean
from envelope_ci.formats.junit import JUNIT_KIND, render_junit
from envelope_ci.model import Channel, Gate, Label, Outcome
from envelope_ci.report.model import Report
from tests.support.strategies import EDGE_TEXT
from tests.support.suites import EXAMPLES, example_report_text

pytestmark = pytest.mark.usefixtures("clean_env")

SUITES = ["support-bot", "planted", "booking-agent",
          *(f"alerts/{p.name}" for p in sorted((EXAMPLES / "alerts").iterdir()))]


def example_report(suite: str) -> Report:
    return Report.from_json(json.loads(example_report_text(suite)))


def element_tree_junit(report: Report, suite: str = "envelope-ci") -> str:
    """junit.xml as an ElementTree, indented and serialised: what the text writer must equal byte for byte."""
    cases = report.cases
    kinds = [JUNIT_KIND[c.gate] for c in cases]
    counts = {k: str(kinds.count(k)) for k in ("failure", "error", "skipped")}
    total_s = f"{sum((c.ms or 0.0) for c in cases) / 1000.0:.3f}"
    root = ET.Element("testsuites", name=suite, tests=str(len(cases)), failures=counts["failure"],
                      errors=counts["error"], time=total_s)
    ts = ET.SubElement(root, "testsuite", name=suite, tests=str(len(cases)), failures=counts["failure"],
                       errors=counts["error"], skipped=counts["skipped"], time=total_s)
    for c, kind in zip(cases, kinds, strict=True):
        attrs = {"classname": f"{suite}.{c.stratum_name}", "name": clean(c.id), "time": f"{(c.ms or 0.0) / 1000.0:.3f}"}
        if c.file:
            attrs["file"] = clean(c.file)
        if c.line:
            attrs["line"] = str(c.line)
        tc = ET.SubElement(ts, "testcase", attrs)
        if kind is None:
            continue
        reasons = clean("; ".join(c.reasons))
        label, channel, outcome = c.label.value, c.channel.value, c.outcome.value
        if kind == "error":
            ET.SubElement(tc, "error", message=f"{label}: {reasons}"[:500], type=label).text = reasons
        elif kind == "skipped":
            message = f"not stable but not failing the gate: {channel} ({outcome}): {reasons}"
            ET.SubElement(tc, "skipped", message=message[:500])
        else:
            el = ET.SubElement(tc, "failure", message=f"{channel} ({outcome}): {reasons}"[:500], type=channel)
            el.text = reasons + ("\n\nanswer: " + clean(c.preview) if c.preview else "")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


@pytest.mark.parametrize("suite", SUITES)
def test_junit_of_every_example_is_what_element_tree_writes(suite):
    report = example_report(suite)
    assert render_junit(report) == element_tree_junit(report)


# No XML writer writes a lone surrogate.
XML_TEXT = EDGE_TEXT.map(lambda t: t.replace("\ud800", "").replace("\udfff", ""))
ROWS = st.tuples(
    XML_TEXT, st.none() | XML_TEXT, st.lists(XML_TEXT, max_size=3).map(tuple), st.none() | XML_TEXT, XML_TEXT,
    st.none() | st.integers(0, 10**6), st.none() | st.floats(0, 1e7), st.sampled_from(Gate), st.sampled_from(Label),
    st.sampled_from(Channel), st.sampled_from(Outcome))


@settings(max_examples=150)
@given(rows=st.lists(ROWS, max_size=6))
def test_junit_of_any_cases_is_what_element_tree_writes(rows):
    template = example_report("support-bot")
    base = template.cases[0]
    cases = tuple(replace(base, id=i, stratum=s, reasons=r, preview=p, file=f, line=n, ms=ms, gate=g, label=lab,
                          channel=ch, outcome=o)
                  for i, s, r, p, f, n, ms, g, lab, ch, o in rows)
    report = replace(template, cases=cases)
    assert render_junit(report) == element_tree_junit(report)
