"""The shipped examples behave as documented: support-bot and booking-agent pass, planted plants 4 of
each label, and each alerts/* suite fails with exactly its alert."""
from __future__ import annotations

import json

import pytest

from envelope_ci.model import Label
from envelope_ci.sources.cases import load_cases
from tests.support.suites import EXAMPLES, chat_body, copy_example, recorded, run_cli, run_report, write_replay

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


BOOKING_CASES = ("availability-first", "availability-relative-date", "large-party-calls-the-restaurant", "check-then-book-in-one-turn",
                 "intent-cancellation", "open-on-sunday", "closed-on-monday", "booking-summary-json", "next-friday-json")


def test_booking_agent_passes(tmp_path):
    """The second product: prompt files with vars and defaults, tool calls, the new assertions, imported recordings."""
    suite = EXAMPLES / "booking-agent"
    result, report = run_report(suite, tmp_path / "out")
    assert result.code == 0, result.out
    assert report["verdict"] == "pass" and report["alerts"] == [] and report["regressions"] == []
    assert sorted(row["id"] for row in report["cases"]) == sorted(BOOKING_CASES)
    assert report["known_failures"] == ["check-then-book-in-one-turn"]
    assert report["lanes"]["matched_fingerprints"] == 9 and report["fixtures"]["changed"] is False
    assert {name: report["strata"][name]["n"] for name in ("easy", "medium", "stretch")} == {"easy": 3, "medium": 4, "stretch": 2}
    pinned = json.loads((suite / "envelope-pins.json").read_text("utf-8"))
    assert run_cli(["hash", suite]).out.strip() == pinned["fixtures_hash"] == report["fixtures"]["hash"]
    assert {"prompts/host.md", "prompts/booking-request.md", "graders/booking.py", "bookings.yaml.recorded.jsonl"} <= set(pinned["files"])


def test_booking_agent_uses_the_new_fixture_features():
    cases = {c.id: c for c in load_cases(EXAMPLES / "booking-agent", set())}
    assertions = {e.name for c in cases.values() for e in c.expectations}
    assert {"tool-call", "not-tool-call", "equals", "starts-with", "not-starts-with", "contains-all", "contains-any", "icontains",
            "not-icontains", "regex", "json-path", "python"} <= assertions
    assert all("prompts/host.md" in c.files for c in cases.values())  # every case sends the product's own prompt
    assert cases["availability-first"].messages[-1]["content"] == "Hi! Could we get a table for 4 on 2025-06-14 at 20:00?\n"
    assert [t["function"]["name"] for t in cases["availability-first"].request["tools"]] == ["check_availability", "book_table"]


def test_booking_agent_assertions_fail_a_wrong_answer(tmp_path):
    """Every case of the example can fail: a plain evasive answer is wrong (or not JSON) for all of them."""
    replay = write_replay(tmp_path / "evasive.jsonl", [(cid, recorded(chat_body("As an AI, I can't say."))) for cid in BOOKING_CASES])
    result, report = run_report(EXAMPLES / "booking-agent", tmp_path / "out", "--replay", replay)
    assert result.code == 1
    assert {row["label"] for row in report["cases"]} <= {"wrong", "schema"}


def test_booking_agent_prompt_edit_fails_naming_the_file(tmp_path):
    suite = copy_example(tmp_path, "booking-agent")
    host = suite / "prompts" / "host.md"
    host.write_text(host.read_text("utf-8") + "Always upsell the tasting menu.\n", "utf-8")
    result, report = run_report(suite, tmp_path / "out")
    # The recordings answered the old prompt: stale too, until re-recorded (issue 12).
    assert result.code == 1 and report["alerts"] == ["fixtures_changed", "stale_recording"]
    assert report["fixtures"]["files_changed"] == ["prompts/host.md"]
    assert sorted(report["fixtures"]["modified"]) == sorted(BOOKING_CASES)


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
