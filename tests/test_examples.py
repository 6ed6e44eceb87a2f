"""The shipped examples behave as documented: support-bot passes, planted plants 4 of each label,
and each alerts/* suite fails with exactly its alert."""
from __future__ import annotations

import json

import pytest
from conftest import EXAMPLES, run_cli, run_report

from envelope_ci.model import Label

pytestmark = pytest.mark.usefixtures("clean_env")

ALERT_SUITES = {
    "ceiling": ["stretch_too_easy", "ceiling"],
    "easy-regression": ["easy_regression"],
    "medium-regression": ["medium_regression"],
    "required-strata": ["thin_stratum"],
    "stretch-too-easy": ["stretch_too_easy"],
    "thin-stratum": ["thin_stratum"],
}


def test_every_alert_suite_is_listed():
    assert sorted(p.name for p in (EXAMPLES / "alerts").iterdir() if p.is_dir()) == sorted(ALERT_SUITES)


def test_support_bot_passes(tmp_path):
    result, report = run_report(EXAMPLES / "support-bot", tmp_path / "out")
    assert result.code == 0, result.out
    assert report["verdict"] == "pass" and report["alerts"] == [] and report["regressions"] == []
    assert report["summary"]["total"] == 12
    assert report["known_failures"] == ["multi-order-reconciliation", "intent-mixed-complaint-refund"]
    assert report["lanes"]["matched_fingerprints"] == 12 and report["lanes"]["fingerprint_mismatches"] == 0
    assert report["fixtures"]["changed"] is False
    assert {name: report["strata"][name]["n"] for name in ("easy", "medium", "stretch")} == {"easy": 4, "medium": 5, "stretch": 3}
    pinned = json.loads((EXAMPLES / "support-bot" / "envelope-pins.json").read_text("utf-8"))["fixtures_hash"]
    assert run_cli(["hash", EXAMPLES / "support-bot"]).out.strip() == pinned == report["fixtures"]["hash"]
    assert {p.name for p in (tmp_path / "out").iterdir()} == {"report.json", "report.md", "junit.xml"}


def test_planted_gives_four_of_each_label(tmp_path):
    result, report = run_report(EXAMPLES / "planted", tmp_path / "out")
    s = report["summary"]
    assert s["counts"] == {label.value: 4 for label in Label}
    assert round(s["naive_pass_rate"], 3) == 0.167
    assert round(s["yield"], 3) == 0.333
    assert s["accuracy_on_yield"] == 0.5
    for row in report["cases"]:
        assert row["label"] == row["id"].split("-")[1], row["id"]  # planted-<label>-<n>
    assert result.code == 1  # unstratified cases are held to the easy floor
    assert report["alerts"] == ["easy_regression"]
    assert report["strata"]["unstratified"] == {"n": 16, "passed": 4, "pass_rate": 0.25, "cases": 24, "undelivered": 8}


@pytest.mark.parametrize("name", sorted(ALERT_SUITES))
def test_alert_suite_exits_1_with_its_alert(tmp_path, name):
    result, report = run_report(EXAMPLES / "alerts" / name, tmp_path / "out")
    assert result.code == 1, result.out
    assert report["verdict"] == "fail"
    assert report["alerts"] == ALERT_SUITES[name]
    assert report["regressions"] == []  # no pins: strata alone fail these runs
    for code in ALERT_SUITES[name]:
        assert f"ALERT {code}:" in result.out


def test_required_strata_alert_names_the_missing_stratum(tmp_path):
    _, report = run_report(EXAMPLES / "alerts" / "required-strata", tmp_path / "out")
    (detail,) = report["alert_details"]
    assert detail["stratum"] == "stretch" and "0 case(s)" in detail["message"]
    assert report["run"]["thresholds"]["require_strata"] is True
