"""``cost``: dollars per call from the answer's usage and envelope-ci.yaml's prices, judged on the size channel
(the label stays), on the median of repeats; a model without a price is bad input."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from envelope_ci.grading.assertions.cost import price_of
from tests.support.suites import case, chat_body, make_suite, recorded, run_report, write_pins, write_replay

PRICES = {"gpt-4o-mini": {"input": 0.15, "output": 0.60}}
SNAPSHOT = "gpt-4o-mini-2024-07-18"


def answer(usage: tuple[int, int] | None = (1000, 500), *, model: str = SNAPSHOT, status: int = 200) -> dict[str, Any]:
    return recorded(chat_body("Refunds take 5 days.", model=model, usage=usage), status=status)


def run(tmp_path: Path, entry: dict[str, Any], recordings: Any, config: dict[str, Any] | None = None) -> tuple[int, Any, str]:
    suite = make_suite(tmp_path, [case("refund", **{"assert": [entry], "recorded": recordings})],
                       config={"prices": PRICES} if config is None else config)
    result, report = run_report(suite, tmp_path / "out")
    return result.code, report, result.err


def only(report: Any) -> dict[str, Any]:
    (row,) = report["cases"]
    return row


def test_a_call_within_its_budget_is_right_and_stable(tmp_path: Path) -> None:
    # 1000 in x $0.15/M + 500 out x $0.60/M = $0.00045
    code, report, err = run(tmp_path, {"type": "cost", "value": 0.0005}, answer())
    row = only(report)
    assert (row["label"], row["channel"]) == ("right", "stable"), err
    assert not any(r.startswith("cost:") for r in row["reasons"])


def test_a_dearer_call_keeps_its_label_and_fails_on_the_size_channel(tmp_path: Path) -> None:
    code, report, err = run(tmp_path, {"type": "cost", "value": 0.0004}, answer())
    row = only(report)
    assert (row["label"], row["channel"]) == ("right", "size"), err
    assert "cost: $0.00045 per call > $0.0004" in row["reasons"]


def test_promptfoos_threshold_spelling_is_the_same_budget(tmp_path: Path) -> None:
    code, report, _ = run(tmp_path, {"type": "cost", "threshold": 0.0004}, answer())
    assert "cost: $0.00045 per call > $0.0004" in only(report)["reasons"]


def test_usage_the_server_did_not_report_is_estimated_and_the_reason_says_so(tmp_path: Path) -> None:
    code, report, _ = run(tmp_path, {"type": "cost", "value": 1e-9}, answer(usage=None))
    row = only(report)
    assert row["channel"] == "size"
    assert any(r.startswith("cost: $") and r.endswith("(usage estimated from characters / 4)") for r in row["reasons"])


def test_the_median_of_the_repeats_is_judged(tmp_path: Path) -> None:
    # $0.00045, $0.00021 (1000 in, 100 out), $0.00069 (1000 in, 900 out): the median is $0.00045
    repeats = [answer(), answer(usage=(1000, 100)), answer(usage=(1000, 900))]
    code, report, _ = run(tmp_path, {"type": "cost", "value": 0.0005}, repeats)
    assert only(report)["channel"] == "stable"
    code, report, _ = run(tmp_path / "tighter", {"type": "cost", "value": 0.0004}, repeats)
    assert "cost: $0.00045 per call > $0.0004" in only(report)["reasons"]


def test_an_undelivered_call_is_not_priced(tmp_path: Path) -> None:
    code, report, _ = run(tmp_path, {"type": "cost", "value": 1e-9}, answer(status=503))
    row = only(report)
    assert code == 3
    assert (row["label"], row["channel"]) == ("drop", "transport")
    assert not any(r.startswith("cost") for r in row["reasons"])


def test_a_model_without_a_price_is_bad_input_naming_it(tmp_path: Path) -> None:
    code, report, err = run(tmp_path, {"type": "cost", "value": 0.001}, answer(model="gpt-4.1"))
    assert code == 2 and report is None
    assert "cost: no price for model 'gpt-4.1'" in err and "it prices gpt-4o-mini" in err
    assert "cases.yaml:" in err


def test_settings_without_prices_are_bad_input_before_any_grading(tmp_path: Path) -> None:
    code, report, err = run(tmp_path, {"type": "cost", "value": 0.001}, answer(), config={})
    assert code == 2 and report is None
    assert "cost needs prices" in err and "cases.yaml:" in err


def test_an_answer_naming_no_model_cannot_be_priced(tmp_path: Path) -> None:
    body = chat_body("Refunds take 5 days.", model=None)
    code, _, err = run(tmp_path, {"type": "cost", "value": 0.001}, recorded(body))
    assert code == 2 and "names no model id" in err


@pytest.mark.parametrize(("entry", "words"), [
    ({"type": "cost", "value": 0.001, "threshold": 0.001}, "not both"),
    ({"type": "cost"}, "give the budget as value"),
    ({"type": "cost", "value": 0}, "less than or equal to the minimum"),
    ({"type": "cost", "value": "cheap"}, "is not of type 'number'"),
    ({"type": "not-cost", "value": 0.001}, "is not one of"),
])
def test_a_bad_budget_is_bad_input_on_its_line(tmp_path: Path, entry: dict[str, Any], words: str) -> None:
    code, report, err = run(tmp_path, entry, answer())
    assert code == 2 and report is None
    assert words in err, err


@pytest.mark.parametrize("prices", [{"gpt-4o-mini": {"input": 0.15}}, {"gpt-4o-mini": {"input": -1, "output": 1}},
                                    {"gpt-4o-mini": 0.15}])
def test_a_malformed_price_is_bad_input(tmp_path: Path, prices: dict[str, Any]) -> None:
    code, report, err = run(tmp_path, {"type": "cost", "value": 0.001}, answer(), config={"prices": prices})
    assert code == 2 and report is None and "prices" in err


def test_a_snapshot_is_priced_as_its_model_and_never_by_a_prefix() -> None:
    prices = {"gpt-4o": {"input": 2.5, "output": 10.0}, "gpt-4o-mini": {"input": 0.15, "output": 0.6}}
    assert price_of(prices, "gpt-4o-mini-2024-07-18") == prices["gpt-4o-mini"]
    assert price_of(prices, "gpt-4o-2024-08-06") == prices["gpt-4o"]
    assert price_of({"gpt-4o": prices["gpt-4o"]}, "gpt-4o-mini") is None
    own = {**prices, "gpt-4o-2024-05-13": {"input": 5.0, "output": 15.0}}
    assert price_of(own, "gpt-4o-2024-05-13") == own["gpt-4o-2024-05-13"]
    claude = {"claude-sonnet-4": {"input": 3.0, "output": 15.0}}
    assert price_of(claude, "claude-sonnet-4-20250514") == claude["claude-sonnet-4"]  # Anthropic's snapshot suffix
    assert price_of(claude, "claude-sonnet-4-2025") is None


def test_a_negative_token_count_counts_nothing_and_anthropic_cached_input_is_input() -> None:
    from envelope_ci.providers.anthropic_messages import ANTHROPIC_MESSAGES
    from envelope_ci.providers.base import token_count

    assert token_count({"output_tokens": -3}, "output_tokens") is None
    assert token_count({"output_tokens": 0}, "output_tokens") == 0
    usage = {"input_tokens": 5, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 20, "output_tokens": 7}
    body = {"type": "message", "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "usage": usage}
    reply = ANTHROPIC_MESSAGES.read_reply(body)
    assert reply is not None and (reply.prompt_tokens, reply.completion_tokens) == (125, 7)


def test_a_pinned_case_that_grows_dearer_than_its_budget_is_a_size_regression(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, [case("refund", **{"assert": [{"type": "cost", "value": 0.0005}],
                                                   "recorded": answer()})], config={"prices": PRICES})
    pinned = write_pins(suite, tmp_path / "pins")
    assert pinned.code == 0, pinned.err
    dearer = write_replay(tmp_path / "dearer.jsonl", [("refund", answer(usage=(1000, 900)))])
    result, report = run_report(suite, tmp_path / "out", "--replay", dearer)
    row = only(report)
    assert result.code == 1, result.err
    assert (row["label"], row["channel"], row["outcome"]) == ("right", "size", "regression")
    assert "cost: $0.00069 per call > $0.0005" in row["reasons"]
