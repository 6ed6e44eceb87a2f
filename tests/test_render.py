"""Reports: the report.json contract key by key, JUnit XML, Markdown (and its escaping), the console."""
from __future__ import annotations

import json
import re
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import (
    EXAMPLES,
    MODEL,
    RIGHT_JSON,
    WRONG_JSON,
    answer_envelope,
    chat_body,
    make_suite,
    pinned_gate_suite,
    recorded,
    run_report,
    transport_error,
    write_replay,
)

from envelope_ci.formats.console import render_console
from envelope_ci.formats.junit import render_junit
from envelope_ci.formats.markdown import render_markdown
from envelope_ci.model import Channel, Label
from envelope_ci.report.build import scrub
from envelope_ci.report.model import REPORT_VERSION, Report

pytestmark = pytest.mark.usefixtures("clean_env")

CASE_KEYS = ("id", "stratum", "label", "channel", "chars", "tokens", "ms", "ms_p95", "http_status", "finish_reason", "model_id", "attempts")


def strict_json(text: str):
    def no_constants(name):
        raise AssertionError(f"{name} in report.json")
    return json.loads(text, parse_constant=no_constants)


@pytest.fixture
def regression_run(tmp_path):
    """A pinned suite replayed with a regression, a drop and base pins: every section is non-empty."""
    gate = pinned_gate_suite(tmp_path)
    base = tmp_path / "base-pins.json"
    base.write_text((gate / "envelope-pins.json").read_text("utf-8"), "utf-8")
    replay = write_replay(tmp_path / "replay.jsonl", [("s-right", answer_envelope(WRONG_JSON, elapsed_ms=410.0)), ("s-wrong-2", transport_error())])
    out = tmp_path / "out"
    result, report = run_report(gate, out, "--replay", replay, "--base-pins", base)
    assert result.code == 1
    return result, report, out


# -- report.json -----------------------------------------------------------------------------

def test_report_json_contract_every_key(regression_run):
    _, report, out = regression_run
    raw = strict_json((out / "report.json").read_text("utf-8"))
    assert raw == report
    assert report["report_version"] == REPORT_VERSION
    assert report["verdict"] in ("pass", "fail", "inconclusive") and report["verdict"] == "fail"
    assert isinstance(report["alerts"], list) and all(isinstance(a, str) for a in report["alerts"])
    summary = report["summary"]
    assert set(summary["counts"]) == {label.value for label in Label}
    assert summary["counts"] == {"drop": 1, "empty": 0, "truncated": 0, "schema": 0, "wrong": 2, "right": 0}
    assert summary["naive_pass_rate"] == 0.0
    assert summary["yield"] == 0.666667
    assert summary["accuracy_on_yield"] == 0.0
    for name in ("easy", "medium", "stretch"):
        stratum = report["strata"][name]
        for key in ("n", "passed", "pass_rate"):
            assert key in stratum, (name, key)
    assert report["strata"]["stretch"] == {"n": 2, "passed": 0, "pass_rate": 0.0, "cases": 3, "undelivered": 1}
    assert report["strata"]["easy"]["pass_rate"] is None
    lanes = report["lanes"]
    assert (lanes["matched_fingerprints"], lanes["fingerprint_mismatches"], lanes["grade_flips"]) == (2, 0, 1)
    fixtures = report["fixtures"]
    for key in ("hash", "pinned_hash", "changed", "added", "removed", "modified"):
        assert key in fixtures, key
    assert fixtures["hash"] == fixtures["pinned_hash"] and fixtures["changed"] is False
    assert report["regressions"] == ["s-right"] and report["undelivered"] == ["s-wrong-2"]
    assert len(report["cases"]) == 3
    for row in report["cases"]:
        for key in CASE_KEYS:
            assert key in row, (row["id"], key)
    right = next(c for c in report["cases"] if c["id"] == "s-right")
    assert {k: right[k] for k in CASE_KEYS} == {
        "id": "s-right", "stratum": "stretch", "label": "wrong", "channel": "correctness", "chars": len(WRONG_JSON), "tokens": 12,
        "ms": 410.0, "ms_p95": 410.0, "http_status": 200, "finish_reason": "stop", "model_id": MODEL, "attempts": 1}
    dropped = next(c for c in report["cases"] if c["id"] == "s-wrong-2")
    assert (dropped["label"], dropped["channel"], dropped["chars"], dropped["tokens"], dropped["ms"], dropped["http_status"], dropped["model_id"]) == (
        "drop", "transport", None, None, None, None, None)
    assert report["base"]["present"] is True and len(report["base"]["diff"]) == 3
    assert report["fingerprint"]["lane"] == "smoke"


def test_report_json_rates_are_null_not_nan(tmp_path):
    suite = make_suite(tmp_path, [{"id": "a", "prompt": "p", "recorded": transport_error()}, {"id": "b", "prompt": "p", "recorded": transport_error()}])
    result, report = run_report(suite, tmp_path / "out")
    assert result.code == 3
    text = (tmp_path / "out" / "report.json").read_text("utf-8")
    strict_json(text)
    assert report["summary"]["accuracy_on_yield"] is None and report["strata"]["unstratified"]["pass_rate"] is None
    assert "n/a" in result.out and "n/a" in (tmp_path / "out" / "report.md").read_text("utf-8")


def test_scrub_replaces_lone_surrogates():
    assert scrub(["x\udfffy", "a\ud800"]) == ("x\ufffdy", "a\ufffd")
    assert scrub("\udfff") == "\ufffd" and scrub(None) is None


def test_replayed_surrogates_do_not_break_the_reports(tmp_path):
    suite = make_suite(tmp_path, [{"id": "a", "prompt": "p", "must_include": ["zzz"], "completion": "x"}, {"id": "b", "prompt": "p", "completion": "x"}])
    replay = tmp_path / "r.jsonl"
    replay.write_text(json.dumps({"id": "a", "recorded": recorded(chat_body("half \ud800 a pair", model="m\udc00"))}) + "\n", "utf-8")
    result, report = run_report(suite, tmp_path / "out", "--replay", replay)
    assert result.code == 1 and "Traceback" not in result.err
    row = report["cases"][0]
    assert row["preview"] == "half \ufffd a pair" and row["model_id"] == "m\ufffd"


# -- junit.xml -------------------------------------------------------------------------------

def test_junit_one_testcase_per_case_failure_and_error(regression_run):
    _, report, out = regression_run
    root = ET.parse(out / "junit.xml").getroot()
    assert root.tag == "testsuites"
    suite = root.find("testsuite")
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["s-right", "s-wrong-1", "s-wrong-2"]
    # s-wrong-1 is a known failure in stretch: not stable, but not failing the gate -> skipped.
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == ("3", "1", "1", "1")
    by_name = {c.get("name"): c for c in cases}
    failure = by_name["s-right"].find("failure")
    assert failure is not None and failure.get("type") == "correctness"
    assert "regression" in failure.get("message") and "expected 42, got 7" in failure.text
    assert by_name["s-right"].get("classname") == "envelope-ci.stretch"
    assert by_name["s-right"].get("time") == "0.410"
    error = by_name["s-wrong-2"].find("error")
    assert error is not None and error.get("type") == "drop" and by_name["s-wrong-2"].find("failure") is None
    skipped = by_name["s-wrong-1"].find("skipped")
    assert skipped is not None and "known_failure" in skipped.get("message") and by_name["s-wrong-1"].find("failure") is None


def typed(partial: dict) -> Report:
    """A whole typed report: a real run's report.json with the given keys (and case keys) laid over it."""
    result, base = run_report(EXAMPLES / "support-bot", Path(tempfile.mkdtemp()) / "out")
    template = base["cases"][0]
    cases = [{**template, **row} for row in partial.get("cases", base["cases"])]
    return Report.from_json({**base, **partial, "cases": cases})


def test_junit_stable_case_has_no_children_and_hostile_text_stays_xml():
    report = {"cases": [
        {"id": "ok", "stratum": None, "label": "right", "channel": "stable", "outcome": "unchanged", "ms": None, "reasons": [], "preview": "fine", "gate": "pass"},
        {"id": "bad\x01id", "stratum": "easy", "label": "wrong", "channel": "correctness", "outcome": "new", "ms": 12.0,
         "reasons": ["contains forbidden '<b>&\x00'"], "preview": "]]><x/>\x1b[31m", "file": "a\x02.yaml", "line": 3, "gate": "fail"},
    ], "alert_details": [{"code": "easy_regression", "stratum": "easy", "message": "easy below its floor"}]}
    root = ET.fromstring(render_junit(typed(report)).encode("utf-8"))
    cases = root.iter("testcase")
    ok, bad = list(cases)
    assert list(ok) == [] and ok.get("classname") == "envelope-ci.unstratified"
    assert bad.get("name") == "badid" and bad.get("file") == "a.yaml" and bad.get("line") == "3"
    assert "<b>&" in bad.find("failure").text and "]]><x/>" in bad.find("failure").text


# -- report.md -------------------------------------------------------------------------------

def test_markdown_headline_and_tables(regression_run):
    _, report, out = regression_run
    md = (out / "report.md").read_text("utf-8")
    assert md == render_markdown(Report.from_json(report))
    assert md.splitlines()[0] == "## ❌ envelope-ci: fail"
    assert "**3 cases** · 0 stable · 1 regression · 0 alerts · yield 0.667 · accuracy on yield 0.000 · naive pass rate 0.000" in md
    for heading in ("### Not stable (3)", "### Channels", "### Strata", "### Labels", "### Lanes", "### Fixtures",
                    "### Pins: base branch → this PR → this run", "### All cases (3)"):
        assert heading in md, heading
    assert re.search(r"^\| channel +\| cases +\|$", md, re.M)
    assert re.search(r"^\| stratum +\| cases +\| delivered +\| stable +\| pass rate +\| bar +\| undelivered +\|$", md, re.M)
    assert re.search(r"^\| stretch +\| 3 +\| 2 +\| 0 +\| 0\.000 +\| watermark < 0\.80 +\| 1 +\|$", md, re.M)
    for label in Label:
        assert re.search(rf"^\| {label.value} +\| \d+ +\|$", md, re.M), label
    for channel in Channel:
        assert re.search(rf"^\| {channel.value} +\| \d+ +\|$", md, re.M), channel
    not_stable = md[md.index("### Not stable"):md.index("### Channels")]
    assert not_stable.index("s-right") < not_stable.index("s-wrong-2")  # regressions first


def test_markdown_pass_and_detail_modes(tmp_path):
    result, report = run_report(EXAMPLES / "support-bot", tmp_path / "out")
    md = render_markdown(Report.from_json(report))
    assert md.startswith("## ✅ envelope-ci: pass\n") and "matches the pins" in md
    collapsed = render_markdown(Report.from_json(report), "collapsed")
    assert collapsed.count("<details>") == 1 and collapsed.count("</details>") == 1
    failing = render_markdown(Report.from_json(report), "failing", title="support bot")
    assert "10 stable cases are left out" in failing and "### All cases" not in failing
    assert failing.startswith("## ✅ envelope-ci: pass — support bot")
    assert render_markdown(Report.from_json(report)) == md
    with pytest.raises(ValueError):
        render_markdown(Report.from_json(report), "everything")


def test_markdown_fixtures_changed_lists_cases_and_the_fix(tmp_path):
    gate = pinned_gate_suite(tmp_path)
    (gate / "more.jsonl").write_text(json.dumps({"id": "s-added", "prompt": "p", "completion": "x", "stratum": "stretch"}) + "\n", "utf-8")
    _, report = run_report(gate, tmp_path / "out")
    md = render_markdown(Report.from_json(report))
    assert "- added: s-added" in md and "--lane adjudication --write-pins" in md and "`fixtures_changed`" in md


HOSTILE = "@octocat | pipe ``` fence\n```\n<!-- envelope-ci:x --> </details> <img src=x> [link](http://evil.example)"


def test_hostile_completion_renders_harmlessly(tmp_path):
    suite = make_suite(tmp_path, [
        {"id": "x|@octocat", "stratum": "easy", "prompt": "p", "completion": HOSTILE, "must_include": ["never"], "must_not_include": ["@octocat"]},
        {"id": "plain", "stratum": "easy", "prompt": "p", "recorded": recorded(chat_body(None, refusal="<!-- envelope-ci:y --> @octocat"))},
    ])
    result, report = run_report(suite, tmp_path / "out")
    assert result.code == 1
    assert report["cases"][0]["preview"] == HOSTILE  # report.json keeps the raw text
    for detail in ("full", "collapsed", "failing"):
        md = render_markdown(Report.from_json(report), detail) if detail != "full" else (tmp_path / "out" / "report.md").read_text("utf-8")
        assert "@octocat" not in md
        assert "@\u200doctocat" in md
        assert "<!--" not in md
        assert "<img" not in md and "](http" not in md
        assert md.count("</details>") == (1 if detail == "collapsed" else 0)
        assert md.count("<details>") == (1 if detail == "collapsed" else 0)
        rows = 0
        for line in md.splitlines():
            if line.startswith("```"):
                raise AssertionError(f"a fence escaped into the comment: {line!r}")
            if line.startswith("|") and "x\\|" in line:
                rows += 1
                table = md[: md.index(line)].rsplit("\n\n", 1)[-1].splitlines()
                header_cells = len(re.findall(r"(?<!\\)\|", table[0]))
                assert len(re.findall(r"(?<!\\)\|", line)) == header_cells, line
        assert rows == (1 if detail == "failing" else 2), detail  # the not-stable row, and the all-cases row
    assert "x\\|@\u200doctocat" in md


# -- console ---------------------------------------------------------------------------------

def test_console_is_one_screen(tmp_path):
    result, report = run_report(EXAMPLES / "planted", tmp_path / "out")
    lines = result.out.splitlines()
    assert len(lines) <= 30
    assert lines[0] == "envelope-ci: FAIL  (24 cases, 4 stable, 0 regressions, 1 alert)"
    assert lines[1] == "labels: drop=4 empty=4 truncated=4 schema=4 wrong=4 right=4"
    assert lines[2] == "naive_pass_rate=0.167 yield=0.333 accuracy_on_yield=0.500"
    assert lines[3].startswith("strata: easy 0/0 (n/a)")
    assert lines[4].startswith("lanes: matched=0 mismatched=0 flips=0 unpinned=24")
    assert any(line.startswith("ALERT easy_regression:") for line in lines)
    assert "… and 10 more not-stable cases (see report.md)" in result.out
    assert lines[-1].startswith("wrote: ") and "report.json" in lines[-1] and "junit.xml" in lines[-1]
    assert render_console(Report.from_json(report)).splitlines()[0] == lines[0]


def test_console_strips_terminal_escapes():
    report = {
        "verdict": "fail", "summary": {"total": 1, "stable": 0, "counts": {"wrong": 1}, "naive_pass_rate": None, "yield": None, "accuracy_on_yield": None},
        "regressions": [], "alerts": [], "strata": {}, "lanes": {"matched_fingerprints": 0, "fingerprint_mismatches": 0, "grade_flips": 0, "unpinned": 1},
        "cases": [{"id": "a\x1b]0;pwned\x07", "label": "wrong", "channel": "correctness", "outcome": "new", "file": "c.yaml", "line": 2,
                   "reasons": ["missing '\x1b[2Jx'\nline2"], "gate": "tolerated"}],
    }
    base = typed({})
    report["summary"] = {**base.to_json()["summary"], **report["summary"]}
    report["lanes"] = {**base.to_json()["lanes"], **report["lanes"]}
    report["notes"] = []
    text = render_console(typed(report))
    assert "\x1b" not in text and "\x07" not in text and "c.yaml:2" in text and "rates" not in text
    assert "a]0;pwned" in text
    assert "naive_pass_rate=n/a" in text
    assert RIGHT_JSON not in text
