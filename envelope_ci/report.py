"""The run's findings as one plain dict: the report.json contract, and what renderers read.

Changing a key here changes the report.json contract in DESIGN.md; bump REPORT_VERSION
when a key changes meaning or disappears.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .analysis import Alert, CaseResult
from .canonical import LONE_SURROGATE
from .model import Fingerprint, Outcome, Pins, Verdict
from .pins import pin_to_dict

REPORT_VERSION = 1
PREVIEW_CHARS = 240


def scrub(value: Any) -> Any:
    """Plain data with every lone UTF-16 surrogate (a server's ``\\ud800`` escape) as U+FFFD.

    Such a string is not Unicode text: it could not be written as UTF-8 and would make
    report.json (or the comment) fail far from its cause.
    """
    if isinstance(value, str):
        return LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {scrub(k): scrub(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub(v) for v in value]
    return value


def case_entry(r: CaseResult) -> dict[str, Any]:
    """One case's row in report.json: the contract keys first, diagnosis after."""
    shown = r.shown
    ttfts = [g.ttft_ms for g in r.grades if g.ttft_ms is not None and not g.label.is_transport]
    return {
        "id": r.case.id,
        "stratum": r.case.stratum,
        "label": r.label.value,
        "channel": r.channel.value,
        "chars": r.measure.chars,
        "tokens": r.measure.tokens,
        "tokens_estimated": r.measure.tokens_estimated,
        "ms": r.measure.ms,
        "ms_p95": r.measure.ms_p95,
        "ttft_ms": round(sorted(ttfts)[len(ttfts) // 2], 3) if ttfts else None,
        "http_status": shown.http_status,
        "finish_reason": scrub(shown.finish_reason),
        "model_id": scrub(r.fingerprint.model_id),
        "attempts": sum(g.attempts for g in r.grades),
        "repeats": len(r.grades),
        "outcome": r.outcome.value,
        "comparable": r.comparable,
        "reasons": scrub(list(r.reasons)),
        "preview": scrub(shown.text[:PREVIEW_CHARS]) if shown.text is not None else None,
        "file": r.case.file,
        "line": r.case.line,
        "pin": pin_to_dict(r.pin) if r.pin else None,
    }


def base_diff(results: Sequence[CaseResult], base: Pins | None, head: Pins | None) -> list[dict[str, Any]]:
    """Per case: the base branch's pin, the head's pin, and this run; which pins the PR moved."""
    def brief(pin: Any) -> dict[str, Any] | None:
        if pin is None:
            return None
        return {"chars": pin.chars, "tokens": pin.tokens, "ms": pin.ms, "label": pin.label}

    def fixture(b: Any, digest: str) -> str | None:
        # The base pin's case hash is the case as the base branch had it.
        if base is None:
            return None
        return "added" if b is None else ("modified" if b.hash != digest else None)

    rows = []
    seen = set()
    for r in results:
        seen.add(r.case.id)
        b = base.cases.get(r.case.id) if base else None
        h = head.cases.get(r.case.id) if head else None
        rows.append({
            "id": r.case.id,
            "base": brief(b),
            "head": brief(h),
            "run": {"chars": r.measure.chars, "tokens": r.measure.tokens, "ms": r.measure.ms, "label": r.label.value},
            "pin_changed": brief(b) != brief(h) or (b is not None and h is not None and b.hash != h.hash),
            "fixture": fixture(b, r.case.digest),
        })
    for cid in sorted(set(base.cases if base else ()) - seen):
        rows.append({"id": cid, "base": brief(base.cases[cid]) if base else None, "head": None, "run": None, "pin_changed": True, "fixture": "removed"})
    return rows


def build_report(
    *,
    verdict: Verdict,
    results: Sequence[CaseResult],
    summary: Mapping[str, Any],
    strata: Mapping[str, Any],
    alerts: Sequence[Alert],
    lanes: Mapping[str, Any],
    fixtures: Mapping[str, Any],
    fingerprint: Fingerprint,
    run_info: Mapping[str, Any],
    blockers: Sequence[str] = (),
    notes: Sequence[str] = (),
    base: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Assemble report.json. Deterministic: fixture order, no timestamps unless given in run_info."""
    by_outcome = {o: [r.case.id for r in results if r.outcome is o] for o in Outcome}
    # Only text that came from a server can hold lone surrogates (fixtures reject them), so
    # only those fields are scrubbed: walking every value of a 100k-case report costs seconds.
    return {
        "report_version": REPORT_VERSION,
        "verdict": verdict.value,
        "alerts": list(dict.fromkeys(a.code for a in alerts)),
        "alert_details": scrub([a.as_dict() for a in alerts]),
        "blockers": scrub(list(blockers)),
        "notes": scrub(list(notes)),
        "summary": dict(summary),
        "strata": dict(strata),
        "lanes": dict(lanes),
        "fixtures": dict(fixtures),
        "fingerprint": scrub(fingerprint.as_dict()),
        "regressions": by_outcome[Outcome.REGRESSION],
        "known_failures": by_outcome[Outcome.KNOWN_FAILURE],
        "improvements": by_outcome[Outcome.IMPROVEMENT],
        "undelivered": by_outcome[Outcome.UNDELIVERED],
        "run": dict(run_info),
        "base": scrub(dict(base)) if base is not None else None,
        "cases": [case_entry(r) for r in results],
    }


def dump_report(report: Mapping[str, Any]) -> str:
    """report.json text: indented at the top, one case per line (fast to write, easy to diff)."""
    head = {k: v for k, v in report.items() if k != "cases"}
    text = json.dumps(head, indent=2, ensure_ascii=False, allow_nan=False)
    cases = ",\n    ".join(json.dumps(c, ensure_ascii=False, allow_nan=False) for c in report["cases"])
    return text[:-2] + ',\n  "cases": [\n    ' + cases + "\n  ]\n}\n" if cases else text[:-2] + ',\n  "cases": []\n}\n'

