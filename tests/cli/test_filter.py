"""``run --filter``: a partial run grades the selected cases, checks the fixtures in full, never passes, never writes pins."""
from __future__ import annotations

import pytest

from tests.support.fake_openai import Behaviour, FakeOpenAI
from tests.support.suites import (
    RIGHT_JSON,
    WRONG_JSON,
    answer_case,
    copy_example,
    make_suite,
    run_report,
    write_pins,
    write_replay,
)

pytestmark = pytest.mark.usefixtures("clean_env")


def tagged_suite(tmp_path):
    """Four right cases, two strata, tags; pinned by an adjudication run."""
    cases = [
        {**answer_case("refund-full", stratum="easy"), "tags": ["billing"]},
        {**answer_case("refund-partial", stratum="easy"), "tags": ["billing", "slow"]},
        {**answer_case("order-status", stratum="medium"), "tags": ["orders"]},
        answer_case("greeting", stratum="medium"),
    ]
    suite = make_suite(tmp_path, cases)
    assert write_pins(suite, tmp_path / "pins-out").code == 0
    return suite


def ids(report):
    return [row["id"] for row in report["cases"]]


@pytest.mark.parametrize(("filters", "expected"), [
    (["refund-*"], ["refund-full", "refund-partial"]),
    (["tag:billing"], ["refund-full", "refund-partial"]),
    (["tag:orders", "greeting"], ["order-status", "greeting"]),  # any filter selects
    (["stratum:medium"], ["order-status", "greeting"]),
    (["id:greeting", "tag:sl*"], ["refund-partial", "greeting"]),  # suite order, globs in tags too
])
def test_a_case_is_in_when_any_filter_matches(tmp_path, filters, expected):
    suite = tagged_suite(tmp_path)
    args = [a for f in filters for a in ("--filter", f)]
    result, report = run_report(suite, tmp_path / "out", *args)
    assert ids(report) == expected
    assert report["summary"]["total"] == len(expected)
    assert report["run"]["partial"] == {"filters": filters, "selected": len(expected), "total": 4}


def test_a_partial_run_that_found_nothing_wrong_is_inconclusive_never_a_pass(tmp_path):
    suite = tagged_suite(tmp_path)
    result, report = run_report(suite, tmp_path / "out", "--filter", "refund-*")
    assert result.code == 3, result.out
    assert report["verdict"] == "inconclusive" and report["alerts"] == []
    assert any(b.startswith("partial run: --filter selected 2 of 4") for b in report["blockers"])
    assert any(n.startswith("partial run: --filter refund-* selected 2 of 4") for n in report["notes"])
    (step,) = report["next_steps"]
    assert "grade all 4 cases" in step["why"] and "--filter" not in step["command"]


def test_a_full_run_has_no_partial_key(tmp_path):
    suite = tagged_suite(tmp_path)
    result, report = run_report(suite, tmp_path / "out")
    assert result.code == 0 and "partial" not in report["run"]


def test_a_regression_among_the_selected_cases_fails(tmp_path):
    suite = tagged_suite(tmp_path)
    replay = write_replay(tmp_path / "pr.jsonl", [("refund-full", answer_case("x", WRONG_JSON)["recorded"])])
    result, report = run_report(suite, tmp_path / "out", "--filter", "tag:billing", "--replay", replay)
    assert result.code == 1 and report["regressions"] == ["refund-full"]


def test_a_replay_may_hold_cases_the_filter_left_out(tmp_path):
    suite = tagged_suite(tmp_path)
    env = answer_case("x", RIGHT_JSON)["recorded"]
    replay = write_replay(tmp_path / "pr.jsonl", [("greeting", env), ("refund-full", env)])
    result, report = run_report(suite, tmp_path / "out", "--filter", "greeting", "--replay", replay)
    assert result.code == 3, result.err
    assert any("graded 1 case(s) from the recordings" in n for n in report["notes"])


def test_the_fixtures_are_checked_in_full(tmp_path):
    """A changed case the filter left out still fails the run; unselected cases are not 'removed'."""
    suite = tagged_suite(tmp_path)
    cases = (suite / "cases.yaml").read_text("utf-8")
    (suite / "cases.yaml").write_text(cases.replace("id: greeting", "id: greeting\n  description: edited"), "utf-8")
    result, report = run_report(suite, tmp_path / "out", "--filter", "refund-*")
    assert result.code == 1 and report["alerts"] == ["fixtures_changed"]
    assert report["fixtures"]["removed"] == [] and report["fixtures"]["files_changed"] == ["cases.yaml"]
    unchanged, report = run_report(tagged_suite(tmp_path / "again"), tmp_path / "out2", "--filter", "refund-*")
    assert report["fixtures"]["changed"] is False


def test_strata_are_not_judged_on_a_subset(tmp_path):
    """One easy case of support-bot alone would be a thin stratum, and a lone known failure a floor alert."""
    suite = copy_example(tmp_path, "support-bot")
    result, report = run_report(suite, tmp_path / "out", "--filter", "intent-refund", "--filter", "intent-mixed-complaint-refund")
    assert result.code == 3, result.out
    assert report["alerts"] == [] and report["known_failures"] == ["intent-mixed-complaint-refund"]
    assert report["strata"]["stretch"]["pass_rate"] == 0.0


@pytest.mark.parametrize(("filters", "message"), [
    (["nothing-*"], "--filter 'nothing-*' matches none of the 4 case(s) in the fixtures"),
    (["stratum:esay"], "no stratum is called 'esay' (did you mean 'easy'?)"),
    (["tag:"], "--filter 'tag:' is empty"),
])
def test_a_filter_that_selects_nothing_is_bad_input(tmp_path, filters, message):
    suite = tagged_suite(tmp_path)
    result, report = run_report(suite, tmp_path / "out", *[a for f in filters for a in ("--filter", f)])
    assert result.code == 2 and report is None
    assert message in result.err


def test_each_filter_must_select_something(tmp_path):
    suite = tagged_suite(tmp_path)
    result, _ = run_report(suite, tmp_path / "out", "--filter", "refund-*", "--filter", "tag:biling")
    assert result.code == 2 and result.err_lines == ["error: --filter 'tag:biling' matches none of the 4 case(s) in the fixtures"]


def test_a_partial_run_never_writes_pins(tmp_path):
    suite = tagged_suite(tmp_path)
    before = (suite / "envelope-pins.json").read_bytes()
    result = write_pins(suite, tmp_path / "out", "--filter", "refund-*")
    assert result.code == 2 and "--write-pins cannot be used with --filter" in result.err
    assert (suite / "envelope-pins.json").read_bytes() == before


def test_a_live_partial_run_calls_only_the_selected_cases(tmp_path):
    cases = [{"id": key, "prompt": f"[[{key}]]", "expect_fragment": "Hello", "stratum": "easy"} for key in ("a-1", "a-2", "b-1")]
    suite = make_suite(tmp_path, cases)
    with FakeOpenAI(Behaviour.ok("Hello there")) as srv:
        result, report = run_report(suite, tmp_path / "out", "--base-url", srv.url, "--model", "m", "--filter", "a-*")
        assert [srv.attempts(k) for k in ("a-1", "a-2", "b-1")] == [1, 1, 0]
    assert result.code == 3 and ids(report) == ["a-1", "a-2"]
    assert report["run"]["mode"] == "live"
