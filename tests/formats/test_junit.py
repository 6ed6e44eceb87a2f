"""junit.xml is written as text, for a 100k-case merge: it must be byte for byte what ElementTree writes.

Checked over the bundled examples' reports and over generated ones with hostile text; and it is red exactly when
the verdict is, every alert a failing testcase of its own.
"""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec.structs import replace

from envelope_ci.findings import Alert
from envelope_ci.formats.escape import clean
from envelope_ci.formats.junit import JUNIT_KIND, render_junit
from envelope_ci.model import Channel, Gate, Label, Outcome, Verdict
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
    cases, alerts = report.cases, report.alert_details
    kinds = [JUNIT_KIND[c.gate] for c in cases] + ["failure"] * len(alerts)
    counts = {k: str(kinds.count(k)) for k in ("failure", "error", "skipped")}
    total_s = f"{sum((c.ms or 0.0) for c in cases) / 1000.0:.3f}"
    tests = str(len(kinds))
    root = ET.Element("testsuites", name=suite, tests=tests, failures=counts["failure"],
                      errors=counts["error"], time=total_s)
    ts = ET.SubElement(root, "testsuite", name=suite, tests=tests, failures=counts["failure"],
                       errors=counts["error"], skipped=counts["skipped"], time=total_s)
    for a in alerts:
        name = f"{clean(a.code)} ({clean(a.stratum)})" if a.stratum else clean(a.code)
        tc = ET.SubElement(ts, "testcase", classname=f"{suite}.alert", name=name, time="0.000")
        ET.SubElement(tc, "failure", message=clean(a.message)[:500], type=clean(a.code)).text = clean(a.message)
    for c, kind in zip(cases, kinds[:len(cases)], strict=True):
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


ALERTS = st.builds(Alert, code=XML_TEXT, stratum=st.none() | XML_TEXT, message=XML_TEXT)


@settings(max_examples=150)
@given(rows=st.lists(ROWS, max_size=6), alerts=st.lists(ALERTS, max_size=3).map(tuple))
def test_junit_of_any_cases_and_alerts_is_what_element_tree_writes(rows, alerts):
    template = example_report("support-bot")
    base = template.cases[0]
    cases = tuple(replace(base, id=i, stratum=s, reasons=r, preview=p, file=f, line=n, ms=ms, gate=g, label=lab,
                          channel=ch, outcome=o)
                  for i, s, r, p, f, n, ms, g, lab, ch, o in rows)
    report = replace(template, cases=cases, alert_details=alerts)
    assert render_junit(report) == element_tree_junit(report)


@pytest.mark.parametrize("suite", SUITES)
def test_junit_is_red_exactly_when_the_verdict_fails(suite):
    report = example_report(suite)
    root = ET.fromstring(render_junit(report).encode("utf-8"))
    assert (int(root.get("failures")) > 0) == (report.verdict is Verdict.FAIL), report.alerts
    # A run-level alert fails the verdict with every case passing: the junit is red all the same.
    alarmed = replace(report, verdict=Verdict.FAIL, alerts=(*report.alerts, "fixtures_changed"),
                      alert_details=(*report.alert_details, Alert("fixtures_changed", None, "the fixtures changed")))
    assert int(ET.fromstring(render_junit(alarmed).encode("utf-8")).get("failures")) > 0


def test_every_alert_is_a_failing_testcase_of_its_own():
    report = replace(example_report("support-bot"), verdict=Verdict.FAIL, alert_details=(
        Alert("stale_recording", None, "2 recordings answer another request: a (model), b <body> & more"),
        Alert("latency_shift", None, "time moved on 3 cases"),  # a code this module has never heard of
        Alert("thin_stratum", "medium", "medium has 2 delivered cases, fewer than 3"),
    ))
    root = ET.fromstring(render_junit(report).encode("utf-8"))
    [suite] = root.findall("testsuite")
    alerts = [tc for tc in suite.findall("testcase") if tc.get("classname") == "envelope-ci.alert"]
    assert [tc.get("name") for tc in alerts] == ["stale_recording", "latency_shift", "thin_stratum (medium)"]
    failures = [tc.find("failure") for tc in alerts]
    assert [f.get("type") for f in failures] == ["stale_recording", "latency_shift", "thin_stratum"]
    assert failures[0].text == failures[0].get("message") == "2 recordings answer another request: a (model), b <body> & more"
    cases = len(report.cases)
    assert (suite.get("tests"), suite.get("failures")) == (str(cases + 3), str(3 + len(report.regressions)))
    assert root.get("tests") == suite.get("tests") and root.get("failures") == suite.get("failures")


def test_an_alert_with_no_case_still_makes_a_suite_of_its_own():
    report = replace(example_report("support-bot"), cases=(), alert_details=(Alert("fixtures_changed", None, "x"),))
    root = ET.fromstring(render_junit(report).encode("utf-8"))
    [tc] = root.iter("testcase")
    assert tc.get("name") == "fixtures_changed" and tc.find("failure") is not None and root.get("failures") == "1"
    assert render_junit(report) == element_tree_junit(report)
