"""report dict -> JUnit XML: one testcase per case; a broken channel is a failure, transport an error."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from typing import Any

from .escape import clean


def render_junit(report: Mapping[str, Any], suite: str = "envelope-ci") -> str:
    """JUnit XML that Jenkins, GitLab and the common GitHub reporters read."""
    cases = report["cases"]
    failures = sum(1 for c in cases if c["channel"] not in ("stable", "transport"))
    errors = sum(1 for c in cases if c["channel"] == "transport")
    total_s = sum((c["ms"] or 0.0) for c in cases) / 1000.0
    root = ET.Element("testsuites", name=suite, tests=str(len(cases)), failures=str(failures), errors=str(errors), time=f"{total_s:.3f}")
    ts = ET.SubElement(root, "testsuite", name=suite, tests=str(len(cases)), failures=str(failures), errors=str(errors), skipped="0", time=f"{total_s:.3f}")
    for c in cases:
        # Ids and paths come from users: XML 1.0 cannot carry control characters at all.
        attrs = {"classname": f"{suite}.{c['stratum'] or 'unstratified'}", "name": clean(c["id"]), "time": f"{(c['ms'] or 0.0) / 1000.0:.3f}"}
        if c.get("file"):
            attrs["file"] = clean(c["file"])
        if c.get("line"):
            attrs["line"] = str(c["line"])
        tc = ET.SubElement(ts, "testcase", attrs)
        reasons = clean("; ".join(c.get("reasons", [])))
        if c["channel"] == "transport":
            ET.SubElement(tc, "error", message=f"{c['label']}: {reasons}"[:500], type=c["label"]).text = reasons
        elif c["channel"] != "stable":
            el = ET.SubElement(tc, "failure", message=f"{c['channel']} ({c['outcome']}): {reasons}"[:500], type=c["channel"])
            el.text = reasons + ("\n\nanswer: " + clean(c["preview"]) if c.get("preview") else "")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
