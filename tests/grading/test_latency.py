"""``latency``: the most milliseconds an answer may take, judged on the median of the case's delivered repeats on
the time channel (the label stays); offline, from the recording's ``elapsed_ms``."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.suites import case, chat_body, make_suite, recorded, run_report, write_pins, write_replay

BUDGET = {"type": "latency", "value": 1500}


def answer(elapsed_ms: float, content: str = "Refunds take 5 days.", status: int = 200) -> dict[str, Any]:
    return recorded(chat_body(content), status=status, elapsed_ms=elapsed_ms)


def run(tmp_path: Path, entries: list[dict[str, Any]], **fields: Any) -> tuple[int, Any, str]:
    suite = make_suite(tmp_path, [case("refund", **{"assert": entries}, **fields)])
    result, report = run_report(suite, tmp_path / "out")
    return result.code, report, result.err


def only(report: Any) -> dict[str, Any]:
    (row,) = report["cases"]
    return row


def test_a_median_over_budget_keeps_its_label_and_fails_on_the_time_channel(tmp_path: Path) -> None:
    code, report, err = run(tmp_path, [BUDGET], recorded=[answer(1840.0), answer(1900.0), answer(900.0)])
    row = only(report)
    assert (row["label"], row["channel"]) == ("right", "time"), err
    assert "latency: 1840.0 ms > 1500 ms" in row["reasons"]


def test_one_slow_repeat_does_not_fail_a_median_within_budget(tmp_path: Path) -> None:
    code, report, _ = run(tmp_path, [BUDGET], recorded=[answer(4000.0), answer(900.0), answer(1000.0)])
    row = only(report)
    assert (row["label"], row["channel"]) == ("right", "stable")
    assert not any(r.startswith("latency") for r in row["reasons"])


def test_an_answer_exactly_on_its_budget_is_within_it(tmp_path: Path) -> None:
    code, report, _ = run(tmp_path, [BUDGET], recorded=answer(1500.0))
    assert only(report)["channel"] == "stable"


def test_promptfoos_threshold_spelling_is_the_same_budget(tmp_path: Path) -> None:
    code, report, _ = run(tmp_path, [{"type": "latency", "threshold": 1500}], recorded=answer(1600.0))
    assert "latency: 1600.0 ms > 1500 ms" in only(report)["reasons"]


def test_a_wrong_answer_stays_wrong_and_says_it_was_slow_too(tmp_path: Path) -> None:
    entries = [BUDGET, {"type": "contains", "value": "30 days"}]
    code, report, _ = run(tmp_path, entries, recorded=answer(1600.0))
    row = only(report)
    assert (row["label"], row["channel"]) == ("wrong", "correctness")
    assert "latency: 1600.0 ms > 1500 ms" in row["reasons"]


def test_an_undelivered_answer_is_not_timed_against_the_budget(tmp_path: Path) -> None:
    code, report, _ = run(tmp_path, [BUDGET], recorded=answer(9000.0, status=503))
    row = only(report)
    assert code == 3
    assert (row["label"], row["channel"]) == ("drop", "transport")
    assert not any(r.startswith("latency") for r in row["reasons"])


def test_a_bare_completion_has_no_time_and_the_case_says_it_was_not_judged(tmp_path: Path) -> None:
    code, report, _ = run(tmp_path, [BUDGET], completion="Refunds take 5 days.")
    row = only(report)
    assert row["channel"] == "stable"
    assert "latency: not judged, the answer has no time (a bare completion records none)" in row["reasons"]


def test_the_tightest_of_two_budgets_applies(tmp_path: Path) -> None:
    code, report, _ = run(tmp_path, [BUDGET, {"type": "latency", "value": 1000}], recorded=answer(1200.0))
    assert "latency: 1200.0 ms > 1000 ms" in only(report)["reasons"]


@pytest.mark.parametrize(("entry", "words"), [
    ({"type": "latency", "value": 1500, "threshold": 1500}, "not both"),
    ({"type": "latency"}, "give the budget as value"),
    ({"type": "latency", "value": 0}, "less than or equal to the minimum"),
    ({"type": "latency", "value": -5}, "less than or equal to the minimum"),
    ({"type": "latency", "value": "fast"}, "is not of type 'number'"),
    ({"type": "not-latency", "value": 1500}, "is not one of"),
])
def test_a_bad_budget_is_bad_input_on_its_line(tmp_path: Path, entry: dict[str, Any], words: str) -> None:
    code, report, err = run(tmp_path, [entry], recorded=answer(100.0))
    assert code == 2 and report is None
    assert words in err and "cases.yaml:" in err, err


def test_a_pinned_case_slower_than_its_budget_is_a_time_regression_even_within_its_pins_slack(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, [case("refund", **{"assert": [BUDGET], "recorded": answer(1400.0)})])
    pinned = write_pins(suite, tmp_path / "pins")
    assert pinned.code == 0, pinned.err
    slower = write_replay(tmp_path / "slower.jsonl", [("refund", answer(1550.0))])  # the pin's slack allows 1610 ms
    result, report = run_report(suite, tmp_path / "out", "--replay", slower)
    row = only(report)
    assert result.code == 1, result.err
    assert (row["label"], row["channel"], row["outcome"]) == ("right", "time", "regression")
    assert [r for r in row["reasons"] if r.startswith(("latency", "time"))] == ["latency: 1550.0 ms > 1500 ms"]
