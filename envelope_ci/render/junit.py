"""report dict -> JUnit XML, one testcase per case, agreeing with the gate.

A case that fails the run (a regression, or a case in a stratum whose floor it broke) is a
``failure``; a transport label is an ``error``; a case that is not stable but does not fail
the gate (a known failure, a stretch miss) is ``skipped`` with the reason, so a JUnit
reporter's red or green matches envelope-ci's verdict.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from typing import Any

from .escape import clean

_FLOOR_ALERTS = ("easy_regression", "medium_regression")


def junit_kind(case: Mapping[str, Any], failing_strata: set[str]) -> str | None:
    """``failure``, ``error``, ``skipped`` or None (passed) for one case of the report."""
    if case["channel"] == "transport":
        return "error"
    if case["channel"] == "stable":
        return None
    if case["outcome"] == "regression" or (case["stratum"] or "unstratified") in failing_strata:
        return "failure"
    return "skipped"


def render_junit(report: Mapping[str, Any], suite: str = "envelope-ci") -> str:
    """JUnit XML that Jenkins, GitLab and the common GitHub reporters read."""
    cases = report["cases"]
    failing_strata = {a["stratum"] for a in report.get("alert_details", []) if a.get("code") in _FLOOR_ALERTS and a.get("stratum")}
    kinds = [junit_kind(c, failing_strata) for c in cases]
    counts = {k: str(kinds.count(k)) for k in ("failure", "error", "skipped")}
    total_s = f"{sum((c['ms'] or 0.0) for c in cases) / 1000.0:.3f}"
    root = ET.Element("testsuites", name=suite, tests=str(len(cases)), failures=counts["failure"], errors=counts["error"], time=total_s)
    ts = ET.SubElement(root, "testsuite", name=suite, tests=str(len(cases)), failures=counts["failure"], errors=counts["error"],
                       skipped=counts["skipped"], time=total_s)
    for c, kind in zip(cases, kinds, strict=True):
        # Ids and paths come from users: XML 1.0 cannot carry control characters at all.
        attrs = {"classname": f"{suite}.{c['stratum'] or 'unstratified'}", "name": clean(c["id"]), "time": f"{(c['ms'] or 0.0) / 1000.0:.3f}"}
        if c.get("file"):
            attrs["file"] = clean(c["file"])
        if c.get("line"):
            attrs["line"] = str(c["line"])
        tc = ET.SubElement(ts, "testcase", attrs)
        if kind is None:
            continue
        reasons = clean("; ".join(c.get("reasons", [])))
        if kind == "error":
            ET.SubElement(tc, "error", message=f"{c['label']}: {reasons}"[:500], type=c["label"]).text = reasons
        elif kind == "skipped":
            ET.SubElement(tc, "skipped", message=f"not stable but not failing the gate: {c['channel']} ({c['outcome']}): {reasons}"[:500])
        else:
            el = ET.SubElement(tc, "failure", message=f"{c['channel']} ({c['outcome']}): {reasons}"[:500], type=c["channel"])
            el.text = reasons + ("\n\nanswer: " + clean(c["preview"]) if c.get("preview") else "")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
