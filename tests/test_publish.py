"""The action's publishing helpers over plain report data."""
from __future__ import annotations

from pathlib import Path

from envelope_ci.publish import MAX_ANNOTATIONS, case_annotations, report_outputs


def _case(cid: str, outcome: str, channel: str, stratum: str | None = "easy", line: int = 3) -> dict:
    return {"id": cid, "outcome": outcome, "channel": channel, "stratum": stratum, "label": "wrong" if channel != "transport" else "drop",
            "file": "evals/cases.yaml", "line": line, "reasons": ["why"]}


def test_regressions_are_errors_and_undelivered_cases_warnings(tmp_path: Path):
    report = {"alerts": [], "cases": [_case("r", "regression", "correctness"), _case("d", "undelivered", "transport", line=9),
                                      _case("s", "known_failure", "correctness", stratum="stretch")]}
    lines = case_annotations(report, tmp_path, tmp_path)
    assert lines[0].startswith("::error file=evals/cases.yaml,line=3,")
    assert lines[1].startswith("::warning file=evals/cases.yaml,line=9,")
    assert len(lines) == 2  # a stretch known failure is what stretch is for: no annotation


def test_annotations_are_capped_with_a_count(tmp_path: Path):
    report = {"alerts": [], "cases": [_case(f"r{i}", "regression", "correctness") for i in range(MAX_ANNOTATIONS + 4)]}
    lines = case_annotations(report, tmp_path, tmp_path)
    assert len(lines) == MAX_ANNOTATIONS + 1 and lines[-1].startswith("envelope-ci: 4 more case(s) not annotated")


def test_outputs_from_the_report():
    report = {"verdict": "fail", "summary": {"stable": 3, "yield": 0.75, "accuracy_on_yield": None}, "regressions": ["a"],
              "alerts": ["easy_regression", "thin_stratum"]}
    assert report_outputs(report) == {"verdict": "fail", "stable": "3", "regressions": "1", "yield": "0.75",
                                      "accuracy-on-yield": "", "alerts": "easy_regression,thin_stratum"}
