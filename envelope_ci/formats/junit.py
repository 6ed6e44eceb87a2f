"""Report -> JUnit XML, one testcase per case, agreeing with the gate (each case's ``gate``).

A case that fails the run (a regression, or a case in a stratum whose floor it broke) is a
``failure``; a transport label is an ``error``; a case that is not stable but does not fail
the gate (a known failure, a stretch miss) is ``skipped`` with the reason, so a JUnit
reporter's red or green matches envelope-ci's verdict.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET

from ..model import Gate
from ..report.model import Report
from .escape import clean

# A case's gate -> its JUnit element (None: passed).
JUNIT_KIND = {Gate.FAIL: "failure", Gate.UNDELIVERED: "error", Gate.TOLERATED: "skipped", Gate.PASS: None}


def render_junit(report: Report, suite: str = "envelope-ci") -> str:
    """JUnit XML that Jenkins, GitLab and the common GitHub reporters read."""
    cases = report.cases
    kinds = [JUNIT_KIND[c.gate] for c in cases]
    counts = {k: str(kinds.count(k)) for k in ("failure", "error", "skipped")}
    total_s = f"{sum((c.ms or 0.0) for c in cases) / 1000.0:.3f}"
    root = ET.Element("testsuites", name=suite, tests=str(len(cases)), failures=counts["failure"], errors=counts["error"], time=total_s)
    ts = ET.SubElement(root, "testsuite", name=suite, tests=str(len(cases)), failures=counts["failure"], errors=counts["error"],
                       skipped=counts["skipped"], time=total_s)
    for c, kind in zip(cases, kinds, strict=True):
        # Ids and paths come from users: XML 1.0 cannot carry control characters at all.
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
            ET.SubElement(tc, "skipped", message=f"not stable but not failing the gate: {channel} ({outcome}): {reasons}"[:500])
        else:
            el = ET.SubElement(tc, "failure", message=f"{channel} ({outcome}): {reasons}"[:500], type=channel)
            el.text = reasons + ("\n\nanswer: " + clean(c.preview) if c.preview else "")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
