"""report dict -> the one-screen summary printed on stdout."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .escape import clean
from .markdown import plural

MAX_LISTED = 10


def _one_line(text: str, limit: int = 100) -> str:
    flat = " ".join(clean(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def render_console(report: Mapping[str, Any], files: list[str] | None = None) -> str:
    """Verdict, counts and rates, strata, alerts and the first failing cases."""
    s = report["summary"]
    c = s["counts"]

    def r(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.3f}"

    lines = [
        f"envelope-ci: {report['verdict'].upper()}  ({plural(s['total'], 'case')}, {s['stable']} stable, "
        f"{plural(len(report['regressions']), 'regression')}, {plural(len(report['alerts']), 'alert')})",
        "labels: " + " ".join(f"{k}={v}" for k, v in c.items()),
        f"naive_pass_rate={r(s['naive_pass_rate'])} yield={r(s['yield'])} accuracy_on_yield={r(s['accuracy_on_yield'])}",
        "strata: " + "  ".join(f"{name} {v['passed']}/{v['n']} ({r(v['pass_rate'])})" for name, v in report["strata"].items()),
    ]
    lanes = report["lanes"]
    lines.append(
        f"lanes: matched={lanes['matched_fingerprints']} mismatched={lanes['fingerprint_mismatches']} "
        f"flips={lanes['grade_flips']} unpinned={lanes['unpinned']}"
    )
    for alert in report.get("alert_details", []):
        lines.append(f"ALERT {alert['code']}: {_one_line(alert['message'], 200)}")
    for blocker in report.get("blockers", []):
        lines.append(f"INCONCLUSIVE: {_one_line(blocker, 200)}")
    if s["total"] and c.get("drop", 0) + c.get("empty", 0) == s["total"]:
        first = report["cases"][0]["reasons"][:1] if report["cases"] else []
        lines.append(f"NOTHING DELIVERED: all {s['total']} cases got no gradeable answer ({_one_line(first[0], 120) if first else 'see report.md'}); "
                     "check --base-url, the server and the network")
    failing = [case for case in report["cases"] if case["channel"] != "stable"]
    failing.sort(key=lambda case: case["outcome"] != "regression")
    for case in failing[:MAX_LISTED]:
        where = f"{case['file']}:{case['line']}" if case.get("line") else case.get("file", "")
        lines.append(f"  {case['outcome']:<13} {_one_line(case['id'], 200)} [{case['label']}/{case['channel']}] {_one_line(where, 200)} — {_one_line('; '.join(case['reasons']))}")
    if len(failing) > MAX_LISTED:
        lines.append(f"  … and {len(failing) - MAX_LISTED} more not-stable cases (see report.md)")
    update = report.get("pins_update")
    if update:
        lines.append(f"pins: {len(update['moved'])} moved, {len(update['removed'])} removed; judged against the new pins above")
        if update["accepted_regressions"]:
            ids = ", ".join(clean(i) for i in update["accepted_regressions"][:MAX_LISTED])
            lines.append(f"pins: ACCEPTED into the baseline, regressions against the previous pins: {ids}")
        if update["previous_alerts"]:
            lines.append("pins: the previous pins raised: " + ", ".join(update["previous_alerts"]))
    down = (report.get("base") or {}).get("downgraded") or []
    if down:
        lines.append(f"WARNING: this change downgrades {len(down)} pin(s) the base branch had right and stable: {', '.join(clean(i) for i in down[:MAX_LISTED])}")
    for note in report.get("notes", []):
        lines.append(f"note: {_one_line(note, 200)}")
    if files:
        lines.append("wrote: " + ", ".join(files))
    return "\n".join(lines)
