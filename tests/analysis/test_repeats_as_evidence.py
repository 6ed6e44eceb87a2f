"""Repeats as evidence (docs/gate.md, "Repeats as evidence"): Fisher's exact test for flaky pins, strict for stable
ones, and strata that count right answers by their share of repeats."""
from __future__ import annotations

from pathlib import Path

import pytest
import scipy.stats
from hypothesis import given
from hypothesis import strategies as st
from msgspec.structs import replace

from envelope_ci.analysis.cases import judge_case
from envelope_ci.analysis.evidence import detectable, drop_p_value, flaky_judgement, repeats_to_repin, repeats_to_tell
from envelope_ci.analysis.gate import case_gate
from envelope_ci.analysis.strata import strata_report
from envelope_ci.model import Fingerprint, Gate, Label, Outcome, Pin, Thresholds
from tests.support.suites import grade, make_case

T = Thresholds()
RUN_FP = Fingerprint("smoke", "unspecified", None, 0.0, "1")


@st.composite
def two_samples(draw):
    pinned_n, now_n = draw(st.integers(1, 30)), draw(st.integers(1, 30))
    return (draw(st.integers(0, pinned_n)), pinned_n), (draw(st.integers(0, now_n)), now_n)


@given(two_samples())
def test_the_drop_p_value_is_scipys_one_sided_fisher_exact_test(samples):
    (pr, pn), (nr, nn) = samples
    expected = scipy.stats.fisher_exact([[pr, pn - pr], [nr, nn - nr]], alternative="greater").pvalue
    assert drop_p_value((pr, pn), (nr, nn)) == pytest.approx(expected, rel=1e-9, abs=1e-12)


def test_the_issues_figures():
    assert drop_p_value((2, 3), (0, 3)) == pytest.approx(0.2)
    assert drop_p_value((9, 10), (0, 10)) < 0.001


def test_a_flaky_case_one_of_three_against_two_of_three_is_within_noise():
    dropped, why = flaky_judgement((2, 3), (1, 3), 0.05)
    assert not dropped
    assert why.startswith("flaky: 1/3 vs pinned 2/3, within noise")
    assert "cannot tell at 3 repeats; use --repeats" in why


def test_a_flaky_case_none_of_ten_against_nine_of_ten_regresses():
    dropped, why = flaky_judgement((9, 10), (0, 10), 0.05)
    assert dropped and "dropped" in why


@pytest.mark.parametrize("pinned", [(2, 3), (3, 5), (4, 5), (8, 10)])
def test_the_repeats_suggested_are_the_fewest_that_can_tell_against_the_pin(pinned):
    needed = repeats_to_tell(pinned, 0.05)
    assert needed is not None
    assert detectable(pinned, needed, 0.05) and not detectable(pinned, needed - 1, 0.05)
    _, why = flaky_judgement(pinned, (1, 3), 0.05)
    assert why.endswith(f"use --repeats {needed} or more") or "cannot tell" not in why


def test_a_pin_no_run_can_tell_against_says_to_re_pin_with_more_repeats():
    assert repeats_to_tell((1, 3), 0.05) is None  # a 1/3 pin: even 50 wrong repeats are p = 0.057
    _, why = flaky_judgement((1, 3), (0, 3), 0.05)
    both = repeats_to_repin(1 / 3, 0.05)
    assert f"re-pin with --repeats {both}" in why


def _pin(label: str, passes: tuple[int, int] | None, channel: str = "correctness") -> Pin:
    return Pin("sha256:x", label, channel, 2, 1, False, 100.0, 100.0, RUN_FP, passes=passes)


def _judged(labels, pin):
    kase = make_case(id="c1", must_include=["ok"], stratum="easy")
    grades = [grade("ok" if label is Label.RIGHT else "no", kase) for label in labels]
    return judge_case(kase, grades, RUN_FP, pin, T)


def test_a_case_right_in_every_pinned_repeat_fails_on_one_wrong_repeat_of_three():
    result = _judged([Label.RIGHT, Label.WRONG, Label.RIGHT], _pin("right", (3, 3), "stable"))
    assert result.outcome is Outcome.REGRESSION


def test_a_case_right_every_time_whose_pin_broke_a_budget_still_regresses_on_a_wrong_repeat():
    over_budget = _pin("right", (3, 3), "time")  # right every time, pinned over its own latency budget
    assert _judged([Label.RIGHT, Label.WRONG, Label.RIGHT], over_budget).outcome is Outcome.REGRESSION
    assert _judged([Label.RIGHT] * 3, replace(over_budget, channel="size")).outcome is Outcome.IMPROVEMENT


def test_a_single_sample_pin_is_strict_against_a_run_of_three():
    result = _judged([Label.RIGHT, Label.RIGHT, Label.WRONG], _pin("right", None, "stable"))
    assert result.outcome is Outcome.REGRESSION


def test_a_flaky_pin_regresses_only_on_a_drop_the_test_can_show():
    flaky = _pin("wrong", (9, 10))
    noise = _judged([Label.RIGHT] * 8 + [Label.WRONG] * 2, flaky)
    assert noise.outcome is Outcome.KNOWN_FAILURE and any("within noise" in r for r in noise.reasons)
    dropped = _judged([Label.WRONG] * 10, flaky)
    assert dropped.outcome is Outcome.REGRESSION and any("dropped" in r for r in dropped.reasons)


def test_a_pin_that_was_always_wrong_stays_a_known_failure():
    assert _judged([Label.WRONG] * 3, _pin("wrong", (0, 3))).outcome is Outcome.KNOWN_FAILURE


def test_a_stratum_counts_a_flaky_case_by_its_share_of_right_repeats():
    results = [_judged([Label.RIGHT] * 3, None), _judged([Label.RIGHT, Label.RIGHT, Label.WRONG], None)]
    rows, alerts, _ = strata_report(results, T)
    assert rows["easy"].passed == pytest.approx(1 + 2 / 3, abs=1e-6)
    assert [a.code for a in alerts] == ["easy_regression"]  # an easy case must be right every time


def test_a_time_miss_fails_its_channel_and_never_also_the_floor():
    kase = make_case(id="slow", must_include=["ok"], stratum="easy")
    pin = replace(_pin("right", (1, 1), "stable"), ms=100.0)
    slow = judge_case(kase, [replace(grade("ok", kase), elapsed_ms=400.0)], RUN_FP, pin, T)
    assert slow.outcome is Outcome.REGRESSION and slow.channel.value == "time"
    rows, alerts, _ = strata_report([slow, _judged([Label.RIGHT], None)], T)
    assert alerts == [] and rows["easy"].pass_rate == 1.0
    assert case_gate(slow, alerts) is Gate.FAIL  # failed by its own regression, once


def _most_right_showing_a_drop(pinned: int, repeats: int) -> int | None:
    return max((r for r in range(pinned) if drop_p_value((pinned, repeats), (r, repeats)) <= 0.05), default=None)


def test_the_table_of_detectable_drops_in_the_docs_is_what_the_test_computes():
    table = (Path(__file__).parents[2] / "docs" / "gate.md").read_text("utf-8")
    for repeats in (10, 20):
        row = next(line for line in table.splitlines() if line.startswith(f"| {repeats} |"))
        for pinned in range(repeats - 1, repeats - 5, -1):
            assert f"{pinned}/{repeats} → {_most_right_showing_a_drop(pinned, repeats)}/{repeats}" in row
    assert _most_right_showing_a_drop(4, 5) == 0 and _most_right_showing_a_drop(3, 5) is None
    assert all(_most_right_showing_a_drop(k, n) is None for n in (2, 3) for k in range(1, n))


def _timed(kase, times):
    return [replace(grade("ok", kase), elapsed_ms=ms) for ms in times]


def test_p95_is_judged_only_when_the_pin_and_the_run_both_have_five_repeats():
    kase = make_case(id="tail", must_include=["ok"], stratum="easy")
    steady_tail = [100.0, 100.0, 100.0, 100.0, 400.0]  # the median holds, the tail is four times the pin's
    five = replace(_pin("right", (5, 5), "stable"), ms=100.0, ms_p95=100.0)
    judged = judge_case(kase, _timed(kase, steady_tail), RUN_FP, five, T)
    assert judged.channel.value == "time" and any(r.startswith("time p95: 400.0 ms") for r in judged.reasons)
    three = replace(five, passes=(3, 3))
    assert judge_case(kase, _timed(kase, steady_tail), RUN_FP, three, T).channel.value == "stable"
    assert judge_case(kase, _timed(kase, steady_tail[1:]), RUN_FP, five, T).channel.value == "stable"
