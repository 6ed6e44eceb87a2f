"""Analysis: repeats, summary rates, strata and the ceiling detector, lanes, fixture changes, the gate."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec.structs import astuple, replace

from envelope_ci.analysis.cases import _SEVERITY, CaseResult, case_label, judge_case, measure_of, outcome_of, percentile
from envelope_ci.analysis.fixtures import fixture_changes, fixtures_alert
from envelope_ci.analysis.gate import decide
from envelope_ci.analysis.lanes import lanes_report
from envelope_ci.analysis.strata import strata_report
from envelope_ci.analysis.summary import rate, summarize
from envelope_ci.findings import FixtureChanges
from envelope_ci.grading.grade import grade_all
from envelope_ci.model import (
    VERDICT_EXIT,
    Channel,
    ExitCode,
    Fingerprint,
    Grade,
    Label,
    Lane,
    Outcome,
    Pin,
    Pins,
    Thresholds,
    Verdict,
)
from envelope_ci.sources.cases import load_cases
from envelope_ci.sources.recordings import offline_envelopes
from tests.support.suites import (
    EXAMPLES,
    MODEL,
    OTHER_MODEL,
    chat_body,
    from_json,
    grade,
    make_case,
    recorded,
    to_json,
    transport_error,
)

pytestmark = pytest.mark.usefixtures("clean_env")

T = Thresholds()


def report_strata(results, thresholds):
    """strata_report with its rows as report.json has them."""
    rows, alerts, _ = strata_report(results, thresholds)
    return {name: to_json(row) for name, row in rows.items()}, alerts


def changes_of(*args):
    """fixture_changes as report.json has it."""
    return to_json(fixture_changes(*args))


def alert_of(changes):
    """fixtures_alert of changes given as report.json has them."""
    return fixtures_alert(from_json(FixtureChanges, changes))
RUN_FP = Fingerprint("smoke", "unspecified", None, 0.0, "1")
PIN_FP = Fingerprint("adjudication", "unspecified", MODEL, 0.0, "1")


@pytest.fixture(scope="module")
def planted():
    """The planted example graded: {label: [(case, grades), ...]} with 4 of each label."""
    cases = load_cases(EXAMPLES / "planted", set())
    grades = grade_all(cases, offline_envelopes(cases, None))
    by_label: dict[Label, list] = {}
    for c in cases:
        by_label.setdefault(grades[c.id][0].label, []).append((c, grades[c.id]))
    return cases, grades, by_label


def result_from(planted, label: Label, stratum: str | None, index: int, pin: Pin | None = None, t: Thresholds = T) -> CaseResult:
    """A planted case of ``label`` moved into ``stratum`` under a fresh id."""
    case, grades = planted[2][label][index % 4]
    moved = replace(case, id=f"{stratum}-{label.value}-{index}", stratum=stratum)
    return judge_case(moved, grades, RUN_FP, pin, t)


def make_results(planted, spec: dict[str | None, list[Label]], t: Thresholds = T) -> list[CaseResult]:
    out = []
    for stratum, labels in spec.items():
        out += [result_from(planted, label, stratum, i, t=t) for i, label in enumerate(labels)]
    return out


def codes(alerts) -> list[str]:
    return [a.code for a in alerts]


R, W, D, E, S, X = Label.RIGHT, Label.WRONG, Label.DROP, Label.EMPTY, Label.SCHEMA, Label.TRUNCATED


# -- enums -----------------------------------------------------------------------------------

def test_outcome_verdict_exitcode_lane_enums():
    assert [o.value for o in Outcome] == ["regression", "known_failure", "improvement", "unchanged", "new", "undelivered"]
    assert [v.value for v in Verdict] == ["pass", "fail", "inconclusive"]
    assert [(e.name, int(e)) for e in ExitCode] == [("PASS", 0), ("FAIL", 1), ("USAGE", 2), ("INCONCLUSIVE", 3), ("SOFTWARE", 70), ("INTERRUPTED", 130)]
    assert VERDICT_EXIT == {Verdict.PASS: ExitCode.PASS, Verdict.FAIL: ExitCode.FAIL, Verdict.INCONCLUSIVE: ExitCode.INCONCLUSIVE}
    assert [lane.value for lane in Lane] == ["smoke", "adjudication"]
    for enum in (Outcome, Verdict, Lane):
        for member in enum:
            assert enum(member.value) is member


# -- repeats ---------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "values,q,expected",
    [([], 0.95, None), ([10.0], 0.95, 10.0), ([100.0, 300.0, 200.0], 0.95, 300.0), (list(map(float, range(1, 21))), 0.95, 19.0),
     (list(map(float, range(1, 101))), 0.95, 95.0), ([1.0, 2.0, 3.0, 4.0], 0.5, 2.0)],
)
def test_percentile_is_nearest_rank(values, q, expected):
    assert percentile(values, q) == expected


def _g(label_body, ms):
    return grade(recorded(label_body, elapsed_ms=ms), must_include=["ready"])


def test_measure_is_median_and_p95_over_delivered_repeats():
    grades = [_g(chat_body("ready", usage=(5, 1)), ms) for ms in (100.0, 400.0, 200.0, 300.0)]
    grades.append(grade(transport_error(elapsed_ms=30000.0), must_include=["ready"]))
    m = measure_of(grades)
    assert m.ms == 250.0
    assert m.ms_p95 == 400.0
    assert (m.chars, m.tokens, m.tokens_estimated) == (5, 1, False)


def test_measure_of_nothing_delivered_is_all_none():
    m = measure_of([grade(transport_error(), must_include=["x"])])
    assert (m.chars, m.tokens, m.ms, m.ms_p95) == (None, None, None, None)


def test_case_label_is_the_worst_delivered_repeat():
    right = _g(chat_body("ready"), 10.0)
    wrong = _g(chat_body("not yet"), 10.0)
    trunc = _g(chat_body("rea", finish_reason="length"), 10.0)
    drop = grade(transport_error(), must_include=["ready"])
    empty = _g(chat_body(""), 10.0)
    assert case_label([right, wrong, drop]) is Label.WRONG
    assert case_label([right, drop]) is Label.RIGHT
    assert case_label([wrong, trunc, right]) is Label.TRUNCATED
    assert case_label([drop, empty]) is Label.EMPTY
    assert case_label([empty, drop]) is Label.DROP


def test_judge_case_reports_repeats_and_shows_the_worst():
    kase = make_case(id="r1", must_include=["ready"])
    grades = [_g(chat_body("ready"), 10.0), _g(chat_body("not yet"), 20.0), grade(transport_error(), kase)]
    r = judge_case(kase, grades, RUN_FP, None, T)
    assert r.label is Label.WRONG and r.channel is Channel.CORRECTNESS and r.outcome is Outcome.NEW
    assert r.shown.text == "not yet"
    assert "repeats: right,wrong,drop" in r.reasons
    assert r.fingerprint.model_id == MODEL


# -- outcomes --------------------------------------------------------------------------------

def _pin(label="right", channel="stable", fp=PIN_FP, chars=5, ms=100.0) -> Pin:
    return Pin("sha256:x", label, channel, chars, 1, False, ms, ms, fp)


@pytest.mark.parametrize(
    "label,channel,pin,outcome",
    [
        (Label.WRONG, Channel.CORRECTNESS, _pin(), Outcome.REGRESSION),
        (Label.SCHEMA, Channel.SCHEMA, _pin(), Outcome.REGRESSION),
        (Label.TRUNCATED, Channel.TRUNCATED, _pin(), Outcome.REGRESSION),
        (Label.RIGHT, Channel.SIZE, _pin(), Outcome.REGRESSION),
        (Label.RIGHT, Channel.TIME, _pin(), Outcome.REGRESSION),
        (Label.WRONG, Channel.CORRECTNESS, _pin("wrong", "correctness"), Outcome.KNOWN_FAILURE),
        (Label.RIGHT, Channel.SIZE, _pin("right", "size"), Outcome.KNOWN_FAILURE),
        (Label.RIGHT, Channel.STABLE, _pin("wrong", "correctness"), Outcome.IMPROVEMENT),
        (Label.RIGHT, Channel.STABLE, _pin(), Outcome.UNCHANGED),
        (Label.RIGHT, Channel.STABLE, None, Outcome.NEW),
        (Label.WRONG, Channel.CORRECTNESS, None, Outcome.NEW),
        (Label.DROP, Channel.TRANSPORT, _pin(), Outcome.UNDELIVERED),
        (Label.EMPTY, Channel.TRANSPORT, None, Outcome.UNDELIVERED),
    ],
)
def test_outcome_of(label, channel, pin, outcome):
    assert outcome_of(label, channel, pin)[0] is outcome


def test_judge_case_against_a_pin_matched_and_mismatched():
    kase = make_case(id="j1", must_include=["ready"])
    slow = [_g(chat_body("ready", usage=(5, 1)), 500.0)]
    matched = judge_case(kase, slow, RUN_FP, _pin(ms=400.0), T)
    assert matched.comparable is True
    assert (matched.channel, matched.outcome) == (Channel.TIME, Outcome.REGRESSION)
    other = Fingerprint("adjudication", "unspecified", OTHER_MODEL, 0.0, "1")
    mismatched = judge_case(kase, slow, RUN_FP, _pin(ms=400.0, fp=other), T)
    assert mismatched.comparable is False
    assert (mismatched.channel, mismatched.outcome) == (Channel.STABLE, Outcome.UNCHANGED)
    assert any("size/time not compared with the pin" in r for r in mismatched.reasons)
    assert any(OTHER_MODEL in r and MODEL in r for r in mismatched.reasons)
    unpinned = judge_case(kase, slow, RUN_FP, None, T)
    assert unpinned.comparable is None


def test_comparability_ignores_the_lane():
    kase = make_case(id="j2", must_include=["ready"])
    r = judge_case(kase, [_g(chat_body("ready"), 10.0)], Fingerprint("smoke", "unspecified", None, 0.0, "1"), _pin(), T)
    assert r.comparable is True
    for other in (Fingerprint("adjudication", "vllm-a100", MODEL, 0.0, "1"), Fingerprint("adjudication", "unspecified", MODEL, 0.7, "1"),
                  Fingerprint("adjudication", "unspecified", MODEL, 0.0, grader_version="0")):
        assert judge_case(kase, [_g(chat_body("ready"), 10.0)], RUN_FP, _pin(fp=other), T).comparable is False


# -- summary ---------------------------------------------------------------------------------

def test_rate_never_nan():
    assert rate(0, 0) is None
    assert rate(1, 3) == 0.333333
    assert rate(0, 5) == 0.0


def test_summary_of_planted(planted):
    cases, grades, by_label = planted
    assert {label: len(v) for label, v in by_label.items()} == {label: 4 for label in Label}
    results = [judge_case(c, grades[c.id], RUN_FP, None, T) for c in cases]
    s = to_json(summarize(results))
    assert s["counts"] == {"drop": 4, "empty": 4, "truncated": 4, "schema": 4, "wrong": 4, "right": 4}
    assert list(s["counts"]) == [label.value for label in Label]
    assert s["total"] == 24 and s["delivered"] == 16 and s["stable"] == 4
    assert round(s["naive_pass_rate"], 3) == 0.167
    assert round(s["yield"], 3) == 0.333
    assert s["accuracy_on_yield"] == 0.5
    assert s["channels"] == {"transport": 8, "truncated": 4, "schema": 4, "correctness": 4, "size": 0, "time": 0, "stable": 4}
    # the headline is never the product of the other two
    assert s["naive_pass_rate"] == pytest.approx(s["yield"] * s["accuracy_on_yield"], abs=1e-3)


def test_summary_with_zero_denominators(planted):
    empty = to_json(summarize([]))
    assert empty["counts"] == {label.value: 0 for label in Label}
    assert (empty["naive_pass_rate"], empty["yield"], empty["accuracy_on_yield"]) == (None, None, None)
    only_drops = to_json(summarize([result_from(planted, D, "easy", i) for i in range(3)]))
    assert only_drops["counts"] == {"drop": 3, "empty": 0, "truncated": 0, "schema": 0, "wrong": 0, "right": 0}
    assert only_drops["naive_pass_rate"] == 0.0 and only_drops["yield"] == 0.0
    assert only_drops["accuracy_on_yield"] is None
    for s in (empty, only_drops):
        text = json.dumps(s, allow_nan=False)
        assert "NaN" not in text
        assert not any(isinstance(v, float) and math.isnan(v) for v in s.values())


# -- strata and the ceiling detector ---------------------------------------------------------

HEALTHY = {"easy": [R, R, R], "medium": [R, R, R, R, R, R, W], "stretch": [R, W, W]}


def test_healthy_strata_have_no_alerts(planted):
    strata, alerts = report_strata(make_results(planted, HEALTHY), T)
    assert alerts == []
    assert strata["easy"] == {"n": 3, "passed": 3, "pass_rate": 1.0, "cases": 3, "undelivered": 0}
    assert strata["medium"]["pass_rate"] == 0.857143  # 6/7, just over the 0.85 floor
    assert strata["stretch"]["pass_rate"] == 0.333333
    assert "unstratified" not in strata


@pytest.mark.parametrize(
    "spec,code,stratum",
    [
        ({**HEALTHY, "easy": [R]}, "thin_stratum", "easy"),
        ({**HEALTHY, "stretch": [W]}, "thin_stratum", "stretch"),
        ({**HEALTHY, "easy": [R, R, W]}, "easy_regression", "easy"),
        ({**HEALTHY, "easy": [R, R, S]}, "easy_regression", "easy"),
        ({**HEALTHY, "medium": [R, R, W, W]}, "medium_regression", "medium"),
        ({**HEALTHY, "medium": [R, R, R, R, R, X]}, "medium_regression", "medium"),
        ({**HEALTHY, "stretch": [R, R, R, R, W]}, "stretch_too_easy", "stretch"),
    ],
)
def test_each_strata_alert(planted, spec, code, stratum):
    _, alerts = report_strata(make_results(planted, spec), T)
    assert codes(alerts) == [code]
    assert alerts[0].stratum == stratum
    assert alerts[0].message


def test_ceiling(planted):
    _, alerts = report_strata(make_results(planted, {"easy": [R, R], "medium": [R, R], "stretch": [R, R]}), T)
    assert codes(alerts) == ["stretch_too_easy", "ceiling"]
    assert alerts[1].stratum is None and "ceiling" in alerts[1].message


def test_regression_message_names_failing_cases(planted):
    _, alerts = report_strata(make_results(planted, {"easy": [R, W, S]}), T)
    assert codes(alerts) == ["easy_regression"]
    assert "easy-wrong-1" in alerts[0].message and "easy-schema-2" in alerts[0].message
    assert "0.333" in alerts[0].message


def test_empty_stratum_is_not_an_alert_unless_required(planted):
    spec = {"easy": [R, R], "medium": [R, R]}
    strata, alerts = report_strata(make_results(planted, spec), T)
    assert alerts == []
    assert strata["stretch"] == {"n": 0, "passed": 0, "pass_rate": None, "cases": 0, "undelivered": 0}
    _, alerts = report_strata(make_results(planted, spec), Thresholds(require_strata=True))
    assert codes(alerts) == ["thin_stratum"] and alerts[0].stratum == "stretch"


def test_unstratified_cases_are_held_to_the_easy_floor(planted):
    strata, alerts = report_strata(make_results(planted, {None: [R, R, R]}), T)
    assert alerts == [] and strata["unstratified"]["pass_rate"] == 1.0
    strata, alerts = report_strata(make_results(planted, {None: [R, R, W]}), T)
    assert codes(alerts) == ["easy_regression"] and alerts[0].stratum == "unstratified"
    # a size or time break fails its own channel, never also the floor: the stratum counts answers
    strata, alerts = report_strata(make_results(planted, {None: [R, R]}) + [
        judge_case(make_case(id="big", max_chars=3), [grade("ready", must_include=["ready"])], RUN_FP, None, T)], T)
    assert alerts == [] and strata["unstratified"]["pass_rate"] == 1.0


def test_strata_rates_count_delivered_cases_only(planted):
    strata, alerts = report_strata(make_results(planted, {"easy": [R, R, D, E], "medium": [R, R]}), T)
    assert alerts == []
    assert strata["easy"] == {"n": 2, "passed": 2, "pass_rate": 1.0, "cases": 4, "undelivered": 2}
    all_dropped, alerts = report_strata(make_results(planted, {"easy": [D, D], "medium": [R, R]}), T)
    assert all_dropped["easy"]["pass_rate"] is None and alerts == []


def test_thresholds_from_config_move_the_bars(planted):
    spec = {"easy": [R, R, R, W], "medium": [R, W], "stretch": [R, R, W]}
    _, alerts = report_strata(make_results(planted, spec), T)
    assert set(codes(alerts)) == {"easy_regression", "medium_regression"}
    relaxed = Thresholds(easy_floor=0.75, medium_floor=0.5, stretch_high=0.9)
    assert strata_report(make_results(planted, spec), relaxed)[1] == []
    _, alerts = report_strata(make_results(planted, {"easy": [R, R]}), Thresholds(thin_below=3))
    assert codes(alerts) == ["thin_stratum"]


# -- lanes -----------------------------------------------------------------------------------

def test_lanes_report_counts(planted):
    kase = make_case(id="l1", must_include=["ready"])
    right = [_g(chat_body("ready"), 10.0)]
    wrong = [_g(chat_body("nope"), 10.0)]
    other = Fingerprint("adjudication", "unspecified", OTHER_MODEL, 0.0, "1")
    results = [
        judge_case(replace(kase, id="same"), right, RUN_FP, _pin(), T),
        judge_case(replace(kase, id="flip"), wrong, RUN_FP, _pin(), T),
        judge_case(replace(kase, id="flip-up"), right, RUN_FP, _pin("wrong", "correctness"), T),
        judge_case(replace(kase, id="other"), wrong, RUN_FP, _pin(fp=other), T),
        judge_case(replace(kase, id="unpinned"), right, RUN_FP, None, T),
        judge_case(replace(kase, id="dropped"), [grade(transport_error(), kase)], RUN_FP, _pin(), T),
    ]
    lanes = to_json(lanes_report(results))
    # a drop has no response, hence no fingerprint: it is neither a match nor a mismatch
    assert lanes == {"matched_fingerprints": 3, "fingerprint_mismatches": 1, "grade_flips": 2, "flipped": ["flip", "flip-up"], "unpinned": 1, "undelivered": 1}


# -- fixture changes -------------------------------------------------------------------------

def test_fixture_changes():
    a, b, c = (make_case(id=i, must_include=[i]) for i in ("a", "b", "c"))
    pins = Pins("sha256:old", PIN_FP, {"a": _pin(), "b": replace(_pin(), hash="sha256:stale"), "gone": _pin()})
    pins = Pins(pins.fixtures_hash, pins.fingerprint, {**pins.cases, "a": replace(_pin(), hash=a.digest)})
    changes = changes_of([a, b, c], pins, "sha256:new")
    assert changes == {"hash": "sha256:new", "pinned_hash": "sha256:old", "changed": True, "added": ["c"], "removed": ["gone"], "modified": ["b"],
                       "files_changed": []}
    alert = alert_of(changes)
    assert alert.code == "fixtures_changed"
    assert "added: c" in alert.message and "removed: gone" in alert.message and "modified: b" in alert.message
    same = changes_of([a], Pins("sha256:h", PIN_FP, {"a": replace(_pin(), hash=a.digest)}), "sha256:h")
    assert same["changed"] is False and alert_of(same) is None
    config_only = changes_of([a], Pins("sha256:h", PIN_FP, {"a": replace(_pin(), hash=a.digest)}), "sha256:h2")
    assert (config_only["changed"], config_only["added"], config_only["removed"], config_only["modified"]) == (True, [], [], [])
    assert "non-case file" in alert_of(config_only).message
    # With per-file digests in the pins, the changed file is named even when no case changed.
    with_files = Pins("sha256:h", PIN_FP, {"a": replace(_pin(), hash=a.digest)}, {"cases.yaml": "sha256:1", "envelope-ci.yaml": "sha256:2"})
    named = changes_of([a], with_files, "sha256:h2", {"cases.yaml": "sha256:1", "envelope-ci.yaml": "sha256:3", "new.txt": "sha256:4"})
    assert named["files_changed"] == ["envelope-ci.yaml", "new.txt"]
    assert "files: envelope-ci.yaml, new.txt" in alert_of(named).message
    none = changes_of([a], None, "sha256:h")
    assert none == {"hash": "sha256:h", "pinned_hash": None, "changed": False, "added": [], "removed": [], "modified": [], "files_changed": []}


# -- the gate --------------------------------------------------------------------------------

def test_decide(planted):
    good = make_results(planted, {"easy": [R, R]})
    with_drop = make_results(planted, {"easy": [R, R, D]})
    assert decide([], good, T) is Verdict.PASS
    assert decide(strata_report(make_results(planted, {"easy": [R]}), T)[1], good, T) is Verdict.FAIL
    assert decide([], with_drop, T) is Verdict.INCONCLUSIVE
    assert decide([], with_drop, Thresholds(min_delivered_share=0.6)) is Verdict.PASS
    assert decide([], with_drop, Thresholds(min_delivered_share=0.7)) is Verdict.INCONCLUSIVE
    assert decide([], make_results(planted, {"easy": [D, E]}), Thresholds(min_delivered_share=0.5)) is Verdict.INCONCLUSIVE
    assert decide([], good, T, blockers=["no model id"]) is Verdict.INCONCLUSIVE
    regression = judge_case(make_case(id="reg", must_include=["ready"]), [_g(chat_body("nope"), 1.0)], RUN_FP, _pin(), T)
    assert regression.outcome is Outcome.REGRESSION
    assert decide([], with_drop + [regression], T) is Verdict.FAIL  # failed already: not inconclusive
    known = judge_case(make_case(id="kf", must_include=["ready"]), [_g(chat_body("nope"), 1.0)], RUN_FP, _pin("wrong", "correctness"), T)
    assert decide([], good + [known], T) is Verdict.PASS


def test_planted_cases_exist():
    assert (EXAMPLES / "planted" / "planted.jsonl").is_file()
    assert isinstance(EXAMPLES, Path)


def test_size_and_time_are_judged_against_a_last_good_pin_only():
    kase = make_case(id="lg", must_include=["ready"])
    long_slow = [_g(chat_body("ready " * 20, usage=(5, 40)), 900.0)]
    fixed = judge_case(kase, long_slow, RUN_FP, _pin("wrong", "correctness", chars=5, ms=100.0), T)
    assert (fixed.channel, fixed.outcome) == (Channel.STABLE, Outcome.IMPROVEMENT)
    regressed = judge_case(kase, long_slow, RUN_FP, _pin(chars=5, ms=100.0), T)
    assert (regressed.channel, regressed.outcome) == (Channel.SIZE, Outcome.REGRESSION)
    assert [r.split(":")[0] for r in regressed.reasons] == ["size", "size", "time"]


# -- one repeat and three alike -------------------------------------------------------------------

MILLISECONDS = st.none() | st.integers(0, 10**6) | st.floats(0, 1e6, allow_nan=False)


@settings(max_examples=400)
@given(label=st.sampled_from(list(Label)), chars=st.none() | st.integers(0, 10**6),
       tokens=st.none() | st.integers(0, 10**5), estimated=st.booleans(), ms=MILLISECONDS)
def test_the_measure_of_one_repeat_is_that_of_three_alike(label, chars, tokens, estimated, ms):
    """One repeat's figures are taken as they are; three alike take the general path (medians and p95 of three)."""
    one = Grade(label, (), None, None, None, 200, chars, tokens, estimated, ms, None, 1)
    fast, general = measure_of([one]), measure_of([one] * 3)
    assert fast == general
    assert [type(v) for v in astuple(fast)] == [type(v) for v in astuple(general)]  # 400 stays 400, not 400.0


@given(labels=st.lists(st.sampled_from(Label), min_size=1, max_size=4))
def test_a_case_label_is_the_worst_delivered_repeat_one_repeat_or_many(labels):
    grades = [Grade(label, (), None, None, None, 200, None, None, False, None, None, 1) for label in labels]
    delivered = [label for label in labels if not label.is_transport]
    assert case_label(grades) is (min(delivered, key=_SEVERITY.index) if delivered else labels[-1])


def test_an_old_recording_and_a_new_one_of_the_same_answer_digest_alike() -> None:
    """A recording from before envelopes named their provider reads as openai-chat's: retimed, not modified."""
    from envelope_ci.sources.untimed import answer_digest

    old = {"http_status": 200, "body": {"choices": [{"message": {"content": "ready"}}]}, "elapsed_ms": 5.0}
    new = {**old, "provider": "openai-chat", "elapsed_ms": 9.0}
    case = {"id": "a", "prompt": "p"}
    assert answer_digest({**case, "recorded": old}, {}) == answer_digest({**case, "recorded": new}, {})
    other = {**old, "provider": "anthropic-messages"}
    assert answer_digest({**case, "recorded": old}, {}) != answer_digest({**case, "recorded": other}, {})
