"""Reports: the report.json contract key by key, JUnit XML, Markdown (its escaping, and the comment's first screen as GitHub renders it), the console."""
from __future__ import annotations

import html
import json
import re
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from msgspec.structs import replace

from envelope_ci.findings import PinBrief
from envelope_ci.formats.console import render_console
from envelope_ci.formats.escape import inline
from envelope_ci.formats.junit import render_junit
from envelope_ci.formats.markdown import FIRST_SCREEN_ROWS, TIME_CHART_MAX, render_markdown
from envelope_ci.model import Channel, Detail, Gate, Label, Outcome, Verdict
from envelope_ci.report.build import scrub
from envelope_ci.report.model import REPORT_VERSION, BaseDiff, BaseDiffRow, ModelChange, NextStep, Report
from tests.support.markdown_checks import fences_are_ours, gfm
from tests.support.suites import (
    EXAMPLES,
    MODEL,
    RIGHT_JSON,
    WRONG_JSON,
    answer_envelope,
    chat_body,
    copy_example,
    make_suite,
    pinned_gate_suite,
    recorded,
    run_report,
    transport_error,
    write_replay,
)

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
    assert report["base"]["model_change"] is None  # the base branch's pins name the same model
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
    alert, ok, bad = root.iter("testcase")
    assert alert.get("name") == "easy_regression (easy)" and alert.find("failure").text == "easy below its floor"
    assert list(ok) == [] and ok.get("classname") == "envelope-ci.unstratified"
    assert bad.get("name") == "badid" and bad.get("file") == "a.yaml" and bad.get("line") == "3"
    assert "<b>&" in bad.find("failure").text and "]]><x/>" in bad.find("failure").text


# -- report.md -------------------------------------------------------------------------------

GRID_HEADER = re.compile(r"^\| stratum +\| stable +\| correctness +\| schema +\| size +\| time +\| truncated +\| undelivered +\| pass rate · bar +\|$", re.M)


def test_markdown_headline_and_tables(regression_run):
    _, report, out = regression_run
    md = (out / "report.md").read_text("utf-8")
    assert md == render_markdown(Report.from_json(report))
    assert md.splitlines()[0] == "## ❌ envelope-ci: fail"
    assert "**3 cases** · 0 stable · 1 regression · 0 alerts · yield 0.667 · accuracy on yield 0.000 · naive pass rate 0.000" in md
    headings = ("### Regressions (1)", "### Undelivered (1)", "### Channels by stratum", "### Known failures and tolerated misses (1)",
                "### Labels and yield", "### Lanes", "### Fixtures", "### Pins: base branch → this PR → this run", "### All cases (3)")
    assert [md.index(h) for h in headings] == sorted(md.index(h) for h in headings)
    assert "### Channels\n" not in md and "### Strata" not in md and "<details" not in md  # report.md is complete: nothing folded
    assert GRID_HEADER.search(md)
    assert re.search(r"^\| easy +\| 0 +\| 0 +\| 0 +\| 0 +\| 0 +\| 0 +\| 0 +\| n/a · floor 1\.00 +\|$", md, re.M)
    assert re.search(r"^\| stretch +\| 0 +\| \*\*2\*\* +\| 0 +\| 0 +\| 0 +\| 0 +\| \*\*1\*\* +\| 0\.000 · watermark < 0\.80 +\|$", md, re.M)
    for label in Label:
        assert re.search(rf"^\| {label.value} +\| \d+ +\|$", md, re.M), label
    regressions = md[md.index("### Regressions"):md.index("### Undelivered")]
    assert "s-right" in regressions and "s-wrong-1" not in regressions and "expected 42, got 7" in regressions


def test_markdown_pass_and_detail_modes(tmp_path):
    result, report = run_report(EXAMPLES / "support-bot", tmp_path / "out")
    md = render_markdown(Report.from_json(report))
    assert md.startswith("## ✅ envelope-ci: pass\n") and "matches the pins" in md
    collapsed = render_markdown(Report.from_json(report), "collapsed")
    # Known failures, labels, lanes, fixtures, all cases: each folded on its own line.
    assert collapsed.count("<details><summary>") == collapsed.count("</details>") == 5
    assert "<details><summary>All cases (12)</summary>" in collapsed
    failing = render_markdown(Report.from_json(report), "failing", title="support bot")
    assert "10 stable cases are left out" in failing and "All cases" not in failing
    assert "<details><summary>Cases not stable (2)</summary>" in failing
    assert failing.startswith("## ✅ envelope-ci: pass — support bot")
    assert render_markdown(Report.from_json(report)) == md
    with pytest.raises(ValueError):
        render_markdown(Report.from_json(report), "everything")


def test_markdown_fixtures_changed_lists_cases_and_the_fix(tmp_path):
    gate = pinned_gate_suite(tmp_path)
    (gate / "more.jsonl").write_text(json.dumps({"id": "s-added", "prompt": "p", "completion": "x", "stratum": "stretch"}) + "\n", "utf-8")
    _, report = run_report(gate, tmp_path / "out")
    md = render_markdown(Report.from_json(report))
    assert "- added: s-added" in md and "--lane adjudication --allow-unverified-recordings --write-pins" in md and "`fixtures_changed`" in md


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
        # Only our own <details>, one per folded section, each closed: none from the answer.
        assert md.count("</details>") == md.count("<details><summary>") == md.count("<details")
        assert (md.count("<details") == 0) is (detail == "full")
        fences_are_ours(md)
        rows = 0
        for line in md.splitlines():
            if line.startswith("|") and "x\\|" in line:
                rows += 1
                table = md[: md.index(line)].rsplit("\n\n", 1)[-1].splitlines()
                header_cells = len(re.findall(r"(?<!\\)\|", table[0]))
                assert len(re.findall(r"(?<!\\)\|", line)) == header_cells, line
        assert rows == 2, detail  # its failing-the-gate row, and its row among all (or the not-stable) cases
    assert "x\\|@\u200doctocat" in md


# -- the comment reads in ten seconds (rule 16), the next step (rule 15), a lowered baseline (rule 14)

@pytest.fixture(scope="module")
def example() -> Report:
    """The support-bot example's report (all pinned, two known failures in stretch)."""
    _, data = run_report(EXAMPLES / "support-bot", Path(tempfile.mkdtemp()) / "out")
    return Report.from_json(data)


def with_cases(report: Report, changes: dict[str, dict]) -> Report:
    """`report` with some case rows changed (the summary is left as it was: the renderers read the rows)."""
    cases = tuple(replace(c, **changes.get(c.id, {})) for c in report.cases)
    return replace(report, cases=cases)


def regressed(report: Report, **extra) -> Report:
    """The example with one easy case regressed on correctness, and `extra` report fields."""
    report = with_cases(report, {"no-invented-tracking": {
        "label": Label.WRONG, "channel": Channel.CORRECTNESS, "outcome": Outcome.REGRESSION, "gate": Gate.FAIL,
        "reasons": ("contains forbidden '1Z'",), "preview": "Your tracking number is 1Z999"}})
    return replace(report, verdict=Verdict.FAIL, regressions=("no-invented-tracking",), **extra)


STEPS = (
    NextStep("Fix the prompt so no-invented-tracking answers right again, or accept the new answers by re-pinning:",
             "envelope-ci run evals --pins evals/envelope-pins.json --lane adjudication --write-pins"),
    NextStep("Re-run: 1 case was not delivered.", None),
)


def first_screen(html_text: str) -> tuple[str, str]:
    """(everything before the first <details>, the rest)."""
    cut = html_text.index("<details>")
    return html_text[:cut], html_text[cut:]


def test_comment_reads_in_ten_seconds(example):
    report = regressed(example, next_steps=STEPS)
    for detail in (Detail.COLLAPSED, Detail.FAILING):
        top, rest = first_screen(gfm(render_markdown(report, detail)))
        # What broke, why, and what to do, in that order; then one channel x stratum table.
        order = ["<h2>", "<h3>Regressions (1)</h3>", "contains forbidden", "<h3>Next steps</h3>", 'lang="sh"',
                 "<h3>Channels by stratum</h3>"]
        assert [top.index(s) for s in order] == sorted(top.index(s) for s in order), detail
        grid = top[top.index("<h3>Channels by stratum</h3>"):]
        assert re.findall(r"<tr>\s*<td>(\w+)</td>", grid) == ["easy", "medium", "stretch"]
        assert [h for h in re.findall(r"<th>([^<]*)</th>", grid)] == [
            "stratum", "stable", "correctness", "schema", "size", "time", "truncated", "undelivered", "pass rate · bar"]
        assert "<td>0.750 · floor 1.00</td>" not in grid and "floor 1.00" in grid
        # Known failures sit apart, folded with the rest: nothing else has a heading of its own.
        assert "multi-order-reconciliation" not in top
        assert "<h3>" not in rest and "<h2>" not in rest
        summaries = re.findall(r"<summary>([^<:]*)", rest)
        assert summaries[:4] == ["Known failures and tolerated misses (2)", "Labels and yield", "Lanes", "Fixtures"]
        assert summaries[-1] == ("All cases (12)" if detail is Detail.COLLAPSED else "Cases not stable (3)")
    full = render_markdown(report)
    assert "<details" not in full and "### Known failures and tolerated misses (2)" in full and "### All cases (12)" in full


def test_first_screen_tables_are_cut_in_the_comment_only(example):
    ids = [c.id for c in example.cases]
    report = with_cases(example, {cid: {"outcome": Outcome.REGRESSION, "gate": Gate.FAIL, "channel": Channel.CORRECTNESS} for cid in ids})
    collapsed = render_markdown(report, Detail.COLLAPSED)
    regressions = collapsed[collapsed.index("### Regressions (12)"):collapsed.index("### Channels by stratum")]
    assert regressions.count("\n| ") == 1 + FIRST_SCREEN_ROWS and "… and 2 more" in regressions
    full = render_markdown(report)
    assert all(f"| {cid} " in full[:full.index("### Channels by stratum")] for cid in ids)


def test_measures_read_as_words_and_the_comment_shows_changed_pins_only(example):
    rows = (BaseDiffRow("a", PinBrief(70, 20, 412.4, "right"), PinBrief(79, 20, None, "right"), PinBrief(79, 21, 398.0, "right"), True, None),
            BaseDiffRow("b", PinBrief(61, None, 300.0, "right"), PinBrief(61, None, 300.0, "right"), None, False, None))
    report = replace(example, base=BaseDiff("git", None, True, rows, ()))
    full = render_markdown(report)
    assert re.search(r"^\| \*\*a\*\* +\| +\| right · 70 chars · 20 tok · 412 ms +\| right · 79 chars · 20 tok +\| right · 79 chars · 21 tok · 398 ms +\|$",
                     full, re.M)
    assert re.search(r"^\| b +\| +\| right · 61 chars · 300 ms +\| right · 61 chars · 300 ms +\| – +\|$", full, re.M)
    assert not re.search(r"\d+c \d+t|\d+ms\b", full)
    comment = render_markdown(report, Detail.COLLAPSED)
    assert "| **a** " in comment and "| b " not in comment and "1 of 2 case pins changed in this PR." in comment


def chart_of(markdown: str) -> str:
    """The body of the report's one mermaid block."""
    [chart] = re.findall(r"^(`{3,})mermaid\n(.*?)^\1$", markdown, re.M | re.S)
    return chart[1]


def test_time_chart_draws_the_judged_pin_against_this_run(example):
    # order-status-json slower (on the time channel), intent-refund faster beyond the slack, refund-window a little slower: inside.
    report = with_cases(example, {
        "order-status-json": {"ms": 980.0, "channel": Channel.TIME, "outcome": Outcome.REGRESSION, "gate": Gate.FAIL},
        "intent-refund": {"ms": 120.0},
        "refund-window-cites-policy": {"ms": 760.0},
    })
    md = render_markdown(report)
    assert "### Time moved (2)" in md
    assert md.index("### Channels by stratum") < md.index("### Time moved") < md.index("### Known failures")
    chart = chart_of(md)
    assert chart_statements(chart)[0] == "xychart-beta horizontal"
    assert '    title "Time per case (ms): pin (judged against) vs this run"' in chart.splitlines()
    assert '"order-status-json · pin", "order-status-json · this run", "intent-refund · pin", "intent-refund · this run"' in chart
    assert "bar [412, 0, 302, 0]" in chart and "bar [0, 980, 0, 120]" in chart
    assert f"each `pin` bar is the pin in {inline(example.run.pins)} that the gate judged the case against" in md
    # In a comment the chart is on the first screen, and GitHub's parser sees one mermaid code block.
    top, _ = first_screen(gfm(render_markdown(report, Detail.COLLAPSED)))
    assert top.count('lang="mermaid"') == 1
    # With base pins, the chart still draws the pin the gate judged against: the base branch's is not what failed.
    rows = tuple(BaseDiffRow(c.id, PinBrief(c.chars, c.tokens, 500.0 if c.id == "intent-refund" else c.ms, "right"), None, None, False, None)
                 for c in example.cases)
    based_md = render_markdown(replace(report, base=BaseDiff("git", None, True, rows, ())))
    based = chart_of(based_md)
    assert "intent-refund · pin" in based and "bar [412, 0, 302, 0]" in based and "500" not in based
    assert "that the gate judged" in based_md and "(this PR's, not the base branch's)" in based_md
    assert "### Time moved" not in render_markdown(example)


def chart_statements(chart: str) -> list[str]:
    """The chart's lines after its front matter (the config block between its two `---` lines)."""
    lines = chart.splitlines()
    assert lines[0] == "---"
    return lines[lines.index("---", 1) + 1:]


def chart_height(chart: str) -> int:
    """The height the chart's front matter asks Mermaid for."""
    [height] = re.findall(r"^    height: (\d+)$", chart, re.M)
    return int(height)


def test_time_chart_is_sized_to_its_cases(example):
    def chart_with(n: int) -> str:
        template = example.cases[1]  # order-status-json: pinned at 412 ms
        cases = tuple(replace(template, id=f"case-{i}", ms=900.0 + i, channel=Channel.TIME) for i in range(n))
        return chart_of(render_markdown(replace(example, cases=cases)))

    one, two, full = (chart_height(chart_with(n)) for n in (1, 2, TIME_CHART_MAX + 5))
    # One case is two bars: a short chart, not Mermaid's default 500 pixels (drawn some 600 tall on GitHub).
    assert one < 200 and two > one
    # Each case adds the same height, up to the 20 the chart draws.
    assert full == one + (TIME_CHART_MAX - 1) * (two - one)
    assert chart_with(1).splitlines()[:3] == ["---", "config:", "  xyChart:"]


HOSTILE_IDS = ['q"uote', "br[ack]et, comma", "new\nline", "%%{init: {'theme': 'dark'}}%%", "fence ```` x", "@octocat <!-- m -->",
               "#quot; entity;", "a" * 80]


def test_time_chart_escapes_ids_and_is_capped(example):
    template = example.cases[1]  # order-status-json: pinned at 412 ms
    cases = tuple(replace(template, id=HOSTILE_IDS[i] if i < len(HOSTILE_IDS) else f"case-{i}", ms=900.0 + i, channel=Channel.TIME)
                  for i in range(TIME_CHART_MAX + 5))
    md = render_markdown(replace(example, cases=cases), Detail.COLLAPSED)
    assert f"### Time moved ({TIME_CHART_MAX + 5})" in md and f"The {TIME_CHART_MAX} that moved most are drawn." in md
    fences_are_ours(md)
    chart = chart_of(md)
    axis = next(line for line in chart.splitlines() if line.strip().startswith("x-axis"))
    labels = re.findall(r'"([^"]*)"', axis)
    assert axis.strip() == "x-axis [" + ", ".join(f'"{label}"' for label in labels) + "]"  # nothing outside the strings
    assert len(labels) == 2 * TIME_CHART_MAX and len(set(labels)) == len(labels)
    for label in labels:
        assert re.fullmatch(r"[\w .:/+'·…-]+", label), label
        assert len(label.split(" · ")[0]) <= 28
    assert "%%" not in chart and "@" not in chart and "<" not in chart
    assert len(chart_statements(chart)) == 6  # a newline in an id cannot add a statement
    # Most moved first: case-24 is the slowest.
    assert labels[0] == "case-24 · pin"
    html_text = gfm(md)
    assert html_text.count('lang="mermaid"') == 1


def test_next_steps_last_in_the_console_and_after_what_broke(example):
    hostile = NextStep("Re-pin <img src=x> @octocat", "envelope-ci run 'ev```als' --pins '@team' --write-pins")
    report = regressed(example, next_steps=(*STEPS, hostile))
    lines = render_console(report, ["out/report.json"]).splitlines()
    assert lines[-5:] == [
        f"next: {STEPS[0].why}", f"    {STEPS[0].command}", f"next: {STEPS[1].why}",
        "next: Re-pin <img src=x> @octocat", "    envelope-ci run 'ev```als' --pins '@team' --write-pins",
    ]
    assert lines[-6] == "wrote: out/report.json"
    for detail in Detail:
        md = render_markdown(report, detail)
        assert md.index("### Regressions") < md.index("### Next steps") < md.index("### Channels by stratum")
        fences_are_ours(md)
        html_text = gfm(md)
        steps = html_text[html_text.index("<h3>Next steps</h3>"):html_text.index("<h3>Channels by stratum</h3>")]
        assert steps.count("<li>") == 3 and "<img" not in steps and "@octocat" not in steps
        commands = [html.unescape(c) for c in re.findall(r'<pre lang="sh"><code>(.*?)</code>', steps, re.S)]
        assert commands == [STEPS[0].command + "\n", "envelope-ci run 'ev```als' --pins '@\u200dteam' --write-pins\n"]


def test_known_failures_sit_apart_from_regressions(example):
    report = regressed(example)
    for detail in Detail:
        md = render_markdown(report, detail)
        regressions = md[md.index("### Regressions (1)"):md.index("### Channels by stratum")]
        assert "no-invented-tracking" in regressions and "multi-order-reconciliation" not in regressions
        known = md[md.index("Known failures and tolerated misses (2)"):]
        known = known[:known.index("Labels and yield")]
        assert "multi-order-reconciliation" in known and "intent-mixed-complaint-refund" in known and "no-invented-tracking" not in known


def test_baseline_lowered_at_the_top(example):
    rows = (BaseDiffRow("intent-refund", PinBrief(40, 14, 302.0, "right"), PinBrief(40, 14, 302.0, "wrong"), None, True, None),
            BaseDiffRow("gone-case", PinBrief(10, 3, 100.0, "right"), None, None, True, "removed"))
    report = replace(example, base=BaseDiff("git", None, True, rows, ("intent-refund", "gone-case")))
    for detail in Detail:
        lines = render_markdown(report, detail).splitlines()
        assert lines[2].startswith("> **⚠️ Baseline lowered. This PR downgrades 2 pins that the base branch had right and stable:** "
                                   "intent-refund (right → wrong), gone-case (pin removed). "), detail
        assert lines[2].endswith("after a code owner has reviewed " + inline(example.run.pins) + ".")
    console = render_console(report).splitlines()
    assert console[1].startswith("WARNING: this change downgrades 2 pin(s) the base branch had right and stable — baseline lowered: "
                                 "intent-refund, gone-case")
    assert "Baseline lowered" not in render_markdown(example) and "baseline lowered" not in render_console(example)


def test_each_note_and_blocker_is_a_paragraph_of_its_own(example):
    notes = ("offline: graded 12 cases from the fixtures' own recordings; no endpoint was called",
             "2 case(s) are graded on recordings that do not say what request they answered: a, b")
    report = replace(example, verdict=Verdict.INCONCLUSIVE, blockers=("a repeat of c was lost",), notes=notes)
    for detail in Detail:
        html_text = gfm(render_markdown(report, detail))
        [quote] = re.findall(r"<blockquote>\n(.*?)</blockquote>", html_text, re.S)
        # GitHub's parser: one paragraph each, never "…no endpoint was called 2 case(s) are graded…" run together.
        assert re.findall(r"<p>(.*?)</p>", quote, re.S) == [
            "<strong>inconclusive:</strong> a repeat of c was lost", html.escape(notes[0], quote=False), notes[1]], detail
    # One note is one paragraph, and no notes is no quote at all.
    assert "<blockquote>\n<p>only</p>\n</blockquote>" in gfm(render_markdown(replace(example, notes=("only",))))
    assert "<blockquote>" not in gfm(render_markdown(replace(example, notes=())))


def with_model_change(report: Report, before: str | None, after: str | None) -> Report:
    """`report` with base pins that name `before` where this PR's pins name `after`."""
    return replace(report, base=BaseDiff("git", None, True, (), (), ModelChange(before, after)))


def test_a_new_model_in_the_pins_heads_the_report_and_the_console(example):
    report = with_model_change(example, "ferrylm-1.0", "ferrylm-1.1")
    for detail in Detail:
        first = render_markdown(report, detail, title="evals").splitlines()[0]
        assert first == "## ✅ envelope-ci: pass — evals · model ferrylm-1.0 → ferrylm-1.1 in this PR's pins", detail
    assert render_markdown(report).splitlines()[0].endswith(" · model ferrylm-1.0 → ferrylm-1.1 in this PR's pins")
    assert render_console(report).splitlines()[1] == "model ferrylm-1.0 → ferrylm-1.1 in this PR's pins"
    # The same model, or no base pins, says nothing.
    for quiet in (example, replace(report, base=replace(report.base, model_change=None))):
        assert "in this PR's pins" not in render_markdown(quiet) and "in this PR's pins" not in render_console(quiet)
    # A model id is server text: escaped in the heading, which stays one heading; a missing one is said so.
    hostile = with_model_change(example, None, "@octocat <img src=x> # [x](y)\n## forged")
    heading = gfm(render_markdown(hostile)).split("\n")[0]
    assert heading.startswith("<h2>") and heading.endswith("</h2>") and "<img" not in heading and "@octocat" not in heading
    assert "model no model id → @\u200doctocat" in heading


def test_report_json_names_the_model_the_pins_moved_to(tmp_path):
    suite = copy_example(tmp_path, "support-bot")
    head = json.loads((suite / "envelope-pins.json").read_text("utf-8"))
    base = tmp_path / "base-pins.json"
    base.write_text(json.dumps({**head, "fingerprint": {**head["fingerprint"], "model_id": "ferrylm-1.0"}}), "utf-8")
    result, report = run_report(suite, tmp_path / "out", "--base-pins", base)
    assert report["base"]["model_change"] == {"base": "ferrylm-1.0", "head": head["fingerprint"]["model_id"]}
    md = (tmp_path / "out" / "report.md").read_text("utf-8")
    assert md.splitlines()[0].endswith(f" · model ferrylm-1.0 → {head['fingerprint']['model_id']} in this PR's pins")
    assert result.out.splitlines()[1] == f"model ferrylm-1.0 → {head['fingerprint']['model_id']} in this PR's pins"


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
    # The files written, then what to do last: each next step, its command indented under it.
    wrote = next(i for i, line in enumerate(lines) if line.startswith("wrote: "))
    assert "report.json" in lines[wrote] and "junit.xml" in lines[wrote]
    steps = lines[wrote + 1:]
    assert steps[0].startswith("next: ") and all(line.startswith(("next: ", "    envelope-ci ")) for line in steps)
    assert steps[-1].startswith("    envelope-ci run ") and steps[-1].endswith("--lane smoke")
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


def test_chart_labels_that_read_alike_get_a_prime_each_in_every_chart():
    from envelope_ci.formats.markdown import distinct_labels
    assert distinct_labels(["a", "a", "b", "a", "a'"]) == ["a", "a'", "b", "a''", "a'''"]
