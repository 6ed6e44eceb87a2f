"""The action's publishing helpers over the typed report."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from msgspec.structs import replace

from envelope_ci.action.publish import (
    MAX_ANNOTATIONS,
    case_annotations,
    file_outputs,
    report_markdown,
    report_outputs,
    report_warnings,
)
from envelope_ci.findings import FixtureChanges, LaneStats, Summary
from envelope_ci.model import Channel, Fingerprint, Gate, Label, Outcome, Thresholds, Verdict
from envelope_ci.report.model import REPORT_VERSION, BaseDiff, CaseRow, ModelChange, Report, RunInfo


def _case(cid: str, outcome: Outcome, channel: Channel, gate: Gate, stratum: str | None = "easy", line: int = 3) -> CaseRow:
    return CaseRow(
        id=cid, stratum=stratum, label=Label.DROP if channel is Channel.TRANSPORT else Label.WRONG, channel=channel,
        chars=None, tokens=None, tokens_estimated=False, ms=None, ms_p95=None, ttft_ms=None, http_status=None,
        finish_reason=None, model_id=None, attempts=1, repeats=1, passes=(0, 1), outcome=outcome, comparable=None, reasons=("why",),
        preview=None, file="evals/cases.yaml", line=line, pin=None, gate=gate,
    )


def _report(cases: tuple[CaseRow, ...] = (), **fields: Any) -> Report:
    summary = Summary(total=len(cases), counts={}, channels={}, naive_pass_rate=None, yield_=None, accuracy_on_yield=None,
                      delivered=0, stable=0)
    report = Report(
        report_version=REPORT_VERSION, verdict=Verdict.PASS, alerts=(), alert_details=(), blockers=(), notes=(), summary=summary,
        strata={}, lanes=LaneStats(0, 0, 0, (), 0, 0), fixtures=FixtureChanges("h", None, False, (), (), (), ()),
        fingerprint=Fingerprint("smoke", "unspecified", None, 0.0, "1"), regressions=(), known_failures=(), improvements=(),
        undelivered=(), run=RunInfo("offline", "smoke", "evals", "evals/envelope-pins.json", 1, None, None, "unspecified", 0.0,
                                    Thresholds(), None),
        base=None, next_steps=(), cases=cases,
    )
    return replace(report, **fields)


REGRESSION = (Outcome.REGRESSION, Channel.CORRECTNESS, Gate.FAIL)


def test_failing_cases_are_errors_and_undelivered_cases_warnings(tmp_path: Path):
    report = _report((
        _case("d", Outcome.UNDELIVERED, Channel.TRANSPORT, Gate.UNDELIVERED, line=9),
        _case("s", Outcome.KNOWN_FAILURE, Channel.CORRECTNESS, Gate.TOLERATED, stratum="stretch"),
        _case("f", Outcome.KNOWN_FAILURE, Channel.CORRECTNESS, Gate.FAIL, line=5),
        _case("r", *REGRESSION),
        _case("ok", Outcome.UNCHANGED, Channel.STABLE, Gate.PASS),
    ))
    lines = case_annotations(report, tmp_path, tmp_path)
    # The gate decides, in order: regressions, other failures, then undelivered (a warning: the endpoint, not the fixture).
    assert lines[0].startswith("::error file=evals/cases.yaml,line=3,title=envelope-ci%3A r — regression (correctness)::wrong on the")
    assert lines[1].startswith("::error file=evals/cases.yaml,line=5,title=envelope-ci%3A f — known failure (correctness)")
    assert lines[2].startswith("::warning file=evals/cases.yaml,line=9,title=envelope-ci%3A d — undelivered (transport)::drop on the")
    assert len(lines) == 3  # a tolerated stretch miss is what stretch is for; a stable case is fine: no annotation


def test_annotations_are_capped_with_a_count(tmp_path: Path):
    report = _report(tuple(_case(f"r{i}", *REGRESSION) for i in range(MAX_ANNOTATIONS + 4)))
    lines = case_annotations(report, tmp_path, tmp_path)
    assert len(lines) == MAX_ANNOTATIONS + 1 and lines[-1].startswith("envelope-ci: 4 more case(s) not annotated")


def test_outputs_from_the_report():
    report = _report(verdict=Verdict.FAIL, regressions=("a",), alerts=("easy_regression", "thin_stratum"))
    report = replace(report, summary=replace(report.summary, stable=3, yield_=0.75, accuracy_on_yield=None))
    assert report_outputs(report) == {"verdict": "fail", "stable": "3", "regressions": "1", "yield": "0.75",
                                      "accuracy-on-yield": "", "alerts": "easy_regression,thin_stratum", "baseline-lowered": "false"}


def test_baseline_lowered_output():
    with_base = _report(base=BaseDiff("git", None, True, (), ()))
    assert report_outputs(with_base)["baseline-lowered"] == "false"
    lowered = _report(base=BaseDiff("git", None, True, (), ("a",)))
    assert report_outputs(lowered)["baseline-lowered"] == "true"
    [line] = report_warnings(lowered)
    assert line.startswith("::warning title=envelope-ci%3A baseline lowered::envelope-ci: baseline lowered — this PR downgrades 1 pin(s)")
    assert "code owner's review of evals/envelope-pins.json" in line


def test_comment_and_job_summary_headlines_name_the_new_model():
    report = _report(base=BaseDiff("git", None, True, (), (), ModelChange("ferrylm-1.0", "ferrylm-1.1")))
    comment, summary = report_markdown(report, "evals", "\n---\n", lambda text: text)
    for body in (comment, summary):
        assert body.splitlines()[0] == "## ✅ envelope-ci: pass — evals · model ferrylm-1.0 → ferrylm-1.1 in this PR's pins"


def test_file_outputs_are_relative_to_the_workspace(tmp_path: Path):
    out = tmp_path / ".envelope-ci" / "evals"
    written = (out / "report.json", out / "report.md", out / "junit.xml")
    assert file_outputs(written, tmp_path) == {"report-json": ".envelope-ci/evals/report.json", "report-markdown": ".envelope-ci/evals/report.md"}
