"""Trust at the edges of the gate: no silent green, no false red, pins that move only when
something moved, and a next step for every red or inconclusive run."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from envelope_ci.analysis.cases import judge_case, measure_of
from envelope_ci.analysis.strata import strata_report
from envelope_ci.model import Fingerprint, Thresholds
from envelope_ci.sources.pins import parse_pins
from tests.support.suites import (
    MODEL,
    OTHER_MODEL,
    REPO_ROOT,
    RIGHT_JSON,
    answer_case,
    answer_envelope,
    case,
    chat_body,
    grade,
    make_case,
    make_suite,
    pinned_gate_suite,
    recorded,
    run_cli,
    run_report,
    transport_error,
    write_pins,
    write_replay,
)

pytestmark = pytest.mark.usefixtures("clean_env")


def row(report, case_id):
    return next(c for c in report["cases"] if c["id"] == case_id)


# -- never a silent green ---------------------------------------------------------------------

def test_a_fingerprint_change_fails_the_gate_and_says_what_differs(tmp_path):
    gate = pinned_gate_suite(tmp_path)
    replay = write_replay(tmp_path / "r.jsonl", [("s-right", answer_envelope(model=OTHER_MODEL))])
    result, report = run_report(gate, tmp_path / "out", "--replay", replay)
    assert result.code == 1 and report["alerts"] == ["fingerprint_changed"]
    message = report["alert_details"][0]["message"]
    assert f"model id {MODEL} → {OTHER_MODEL}" in message and "(1 case(s): s-right)" in message
    assert row(report, "s-right")["label"] == "right"  # correctness is still graded
    step = report["next_steps"][0]
    assert "--move-baseline" in step["command"] and "--replay" in step["command"] and step["command"].endswith("--write-pins")
    # endpoint class forgotten in CI
    result, report = run_report(gate, tmp_path / "out2", "--endpoint-class", "openai")
    assert result.code == 1 and "endpoint class unspecified → openai" in report["alert_details"][0]["message"]


def test_fingerprint_change_warn_keeps_the_old_behaviour(tmp_path):
    gate = pinned_gate_suite(tmp_path)
    (gate / "envelope-ci.yaml").write_text("fingerprint_change: warn\n", "utf-8")
    write_pins(gate, tmp_path / "repin")  # the config file is a fixtures file: re-pin it
    replay = write_replay(tmp_path / "r.jsonl", [("s-right", answer_envelope(model=OTHER_MODEL))])
    result, report = run_report(gate, tmp_path / "out", "--replay", replay)
    assert result.code == 0 and report["alerts"] == [] and report["lanes"]["fingerprint_mismatches"] == 1
    # not a failure, but never silent: the notes (so report.md, the comment and the console) say what differs
    (note,) = [n for n in report["notes"] if "another fingerprint" in n]
    assert f"model id {MODEL} → {OTHER_MODEL}" in note and "(1 case(s): s-right)" in note and "fingerprint_change: warn" in note
    assert r"fingerprint\_change: warn keeps this from failing the run" in (tmp_path / "out" / "report.md").read_text("utf-8")


def test_every_digest_is_checked_not_only_the_top_hash(tmp_path):
    gate = pinned_gate_suite(tmp_path)
    cases_file = gate / "cases.yaml"
    cases_file.write_text(cases_file.read_text("utf-8").replace("Prompt for s-right.", "A new prompt for s-right."), "utf-8")
    new_hash = run_cli(["hash", gate]).out.strip()
    pins_file = gate / "envelope-pins.json"
    pins = json.loads(pins_file.read_text("utf-8"))
    pins_file.write_text(pins_file.read_text("utf-8").replace(pins["fixtures_hash"], new_hash), "utf-8")  # the top hash pasted
    result, report = run_report(gate, tmp_path / "out")
    assert result.code == 1 and "fixtures_changed" in report["alerts"]
    assert report["fixtures"]["modified"] == ["s-right"] and report["fixtures"]["files_changed"] == ["cases.yaml"]


def _pins_without(gate, case_id):
    text = (gate / "envelope-pins.json").read_text("utf-8")
    kept = [line for line in text.splitlines() if not line.startswith(json.dumps(case_id))]
    return "\n".join(kept).replace(",\n}}", "\n}}") + "\n"


def test_a_baseline_that_disappears_is_a_lowered_baseline(tmp_path):
    gate = pinned_gate_suite(tmp_path)
    base = tmp_path / "base-pins.json"
    base.write_text((gate / "envelope-pins.json").read_text("utf-8"), "utf-8")
    head = _pins_without(gate, "s-right")
    parse_pins(head, "head")  # still a valid pins file
    (gate / "envelope-pins.json").write_text(head, "utf-8")
    _, report = run_report(gate, tmp_path / "out", "--base-pins", base)
    assert report["base"]["downgraded"] == ["s-right"]
    (gate / "envelope-pins.json").unlink()  # the whole pins file deleted while base pins exist
    _, report = run_report(gate, tmp_path / "out2", "--base-pins", base)
    assert report["base"]["downgraded"] == ["s-right"]


def test_a_lost_repeat_makes_the_run_inconclusive(tmp_path):
    gate = pinned_gate_suite(tmp_path)
    replay = write_replay(tmp_path / "r.jsonl", [("s-right", answer_envelope()), ("s-right", transport_error()), ("s-right", answer_envelope())])
    result, report = run_report(gate, tmp_path / "out", "--replay", replay)
    assert result.code == 3 and report["verdict"] == "inconclusive"
    assert report["blockers"] == ["s-right: repeat 2 of 3 got no gradeable answer"]
    assert any(r.startswith("repeat 2 of 3 got no gradeable answer: no response: ConnectionRefusedError") for r in row(report, "s-right")["reasons"])


def test_tokens_use_what_usage_said():
    with_usage = grade(recorded(chat_body("four words here now", usage=(10, 40))))
    without = grade(recorded(chat_body("four words here now", usage=None)))
    assert not with_usage.tokens_estimated and without.tokens_estimated
    measure = measure_of([without, with_usage, without])
    assert (measure.tokens, measure.tokens_estimated) == (40, False)
    only_estimates = measure_of([without, without])
    assert only_estimates.tokens_estimated and only_estimates.tokens == without.tokens


def test_a_case_with_no_expectation_says_so(tmp_path):
    suite = make_suite(tmp_path, [case("bare", completion="anything"), case("checked", completion="yes", must_include=["yes"]),
                                  case("sized", completion="short", max_chars=10)])
    _, report = run_report(suite, tmp_path / "out")
    note = "no expectation: this case can only fail on envelope channels (transport, truncation, size, time)"
    assert note in row(report, "bare")["reasons"] and note in row(report, "sized")["reasons"]
    assert note not in row(report, "checked")["reasons"]


# -- never a false red -------------------------------------------------------------------------

def _results(planted_labels):
    """Case results from (stratum, label) pairs, through the real grader and analysis."""
    bodies = {"right": recorded(chat_body("ok")), "wrong": recorded(chat_body("nope")), "drop": transport_error()}
    out = []
    for i, (stratum, label) in enumerate(planted_labels):
        kase = make_case(id=f"c{i}", stratum=stratum, must_include=["ok"])
        out.append(judge_case(kase, [grade(bodies[label], kase)], Fingerprint("smoke", "x", None, 0.0, "1"), None, Thresholds()))
    return out


def test_stretch_too_easy_waits_for_delivery():
    # 4 of 4 delivered stretch cases pass (1.0 >= 0.80), but 2 undelivered could make it 4/6 = 0.667.
    _, alerts, held = strata_report(_results([("stretch", "right")] * 4 + [("stretch", "drop")] * 2), Thresholds())
    assert "stretch_too_easy" not in [a.code for a in alerts]
    assert held and held[0].startswith("stretch_too_easy held")
    # With one undelivered it would be 4/5 = 0.8: at the watermark either way, so it fires.
    _, alerts, held = strata_report(_results([("stretch", "right")] * 4 + [("stretch", "drop")]), Thresholds())
    assert "stretch_too_easy" in [a.code for a in alerts] and not held


def test_a_medium_floor_waits_for_delivery():
    # medium 4/5 = 0.8 < 0.85 over delivered, but 5 undelivered could lift it to 9/10.
    planted = [("medium", "right")] * 4 + [("medium", "wrong")] + [("medium", "drop")] * 5
    _, alerts, held = strata_report(_results(planted), Thresholds())
    assert "medium_regression" not in [a.code for a in alerts] and held[0].startswith("medium_regression held")
    # easy's floor is 1.0: a delivered failure breaks it whatever the undelivered do.
    _, alerts, _ = strata_report(_results([("easy", "right"), ("easy", "wrong"), ("easy", "drop")]), Thresholds())
    assert "easy_regression" in [a.code for a in alerts]


def test_the_ceiling_waits_for_delivery():
    saturated = [(s, "right") for s in ("easy", "medium", "stretch") for _ in range(3)]
    _, alerts, _ = strata_report(_results(saturated), Thresholds())
    assert "ceiling" in [a.code for a in alerts]
    _, alerts, held = strata_report(_results(saturated + [("stretch", "drop")] * 3), Thresholds())
    assert "ceiling" not in [a.code for a in alerts] and any(h.startswith("ceiling held") for h in held)


def test_a_held_alarm_is_inconclusive_not_red(tmp_path):
    cases = [case(f"s{i}", stratum="stretch", must_include=["ok"], completion="ok") for i in range(4)]
    cases += [case(f"d{i}", stratum="stretch", must_include=["ok"], recorded=transport_error()) for i in range(2)]
    cases += [case(f"e{i}", stratum="easy", completion="ok", must_include=["ok"]) for i in range(2)]
    cases += [case(f"m{i}", stratum="medium", completion="ok", must_include=["ok"]) for i in range(2)]
    suite = make_suite(tmp_path, cases)
    result, report = run_report(suite, tmp_path / "out")
    assert result.code == 3 and "stretch_too_easy" not in report["alerts"]
    assert any(b.startswith("stretch_too_easy held") for b in report["blockers"])


# -- pins that move only when something moved --------------------------------------------------

def test_a_re_pin_within_the_noise_band_keeps_pins_byte_for_byte(tmp_path):
    suite = make_suite(tmp_path, [answer_case("a", stratum="easy", elapsed_ms=400.4), answer_case("b", stratum="easy", elapsed_ms=300.0)])
    assert write_pins(suite, tmp_path / "o1").code == 0
    before = (suite / "envelope-pins.json").read_text("utf-8")
    assert '"ms":400.0' in before and '"ms":400.4' not in before  # timings rounded to the millisecond
    cases_text = (suite / "cases.yaml").read_text("utf-8")
    replay = write_replay(tmp_path / "r.jsonl", [("a", answer_envelope(elapsed_ms=410.0)), ("b", answer_envelope(elapsed_ms=900.0))])
    result = write_pins(suite, tmp_path / "o2", "--replay", str(replay))
    assert result.code == 0, result.err
    after = (suite / "envelope-pins.json").read_text("utf-8")
    assert (suite / "cases.yaml").read_text("utf-8") == cases_text
    changed = [(x, y) for x, y in zip(before.splitlines(), after.splitlines(), strict=True) if x != y]
    assert len(changed) == 1 and changed[0][1].startswith('"b":')  # only the pin that moved
    report = json.loads((tmp_path / "o2" / "report.json").read_text("utf-8"))
    assert [m["id"] for m in report["pins_update"]["moved"]] == ["b"]


def test_write_pins_is_refused_before_any_request(tmp_path):
    gate = pinned_gate_suite(tmp_path)
    # A closed port: a request would be a drop; the refusal must come first, with exit 2.
    live = ["--base-url", "http://127.0.0.1:9/v1", "--model", "m"]
    for extra, words in ((["--endpoint-class", "vllm"], "endpoint class unspecified → vllm"), (["--temperature", "0.7"], "temperature 0.0 → 0.7"),
                         (["--provider", "anthropic-messages"], "provider openai-chat → anthropic-messages")):
        result = write_pins(gate, tmp_path / "out", *live, *extra)
        assert result.code == 2 and words in result.err and "--move-baseline" in result.err
        assert not (tmp_path / "out" / "report.json").exists()
    result = run_cli(["run", gate, "--out", tmp_path / "out", "--write-pins", *live])
    assert result.code == 2 and "only --lane adjudication may move the baseline" in result.err


def test_baseline_lowered_can_be_made_to_fail(tmp_path):
    gate = pinned_gate_suite(tmp_path)
    base = tmp_path / "base-pins.json"
    base.write_text((gate / "envelope-pins.json").read_text("utf-8"), "utf-8")
    (gate / "envelope-pins.json").write_text(_pins_without(gate, "s-right"), "utf-8")
    result, report = run_report(gate, tmp_path / "out", "--base-pins", base)
    assert "baseline_lowered" not in report["alerts"] and report["base"]["downgraded"] == ["s-right"]  # a warning by default
    (gate / "envelope-ci.yaml").write_text("baseline_lowered: fail\n", "utf-8")
    _, report = run_report(gate, tmp_path / "out2", "--base-pins", base)
    assert "baseline_lowered" in report["alerts"] and report["verdict"] == "fail"


# -- say what to do ----------------------------------------------------------------------------

def test_red_and_inconclusive_runs_name_the_next_step(tmp_path):
    gate = pinned_gate_suite(tmp_path)
    with (gate / "cases.yaml").open("a", encoding="utf-8") as fh:
        fh.write("# edited\n")
    result, report = run_report(gate, tmp_path / "out")
    assert result.code == 1
    assert report["next_steps"][0]["command"] == f"envelope-ci run {gate.as_posix()} --pins {(gate / 'envelope-pins.json').as_posix()} --lane adjudication --allow-unverified-recordings --write-pins"
    suite = make_suite(tmp_path, [case("a", must_include=["x"], recorded=transport_error())], name="dropped")
    result, report = run_report(suite, tmp_path / "out2")
    assert result.code == 3
    assert "re-record them on a live run" in report["next_steps"][0]["why"] and report["next_steps"][-1]["command"].endswith("--lane smoke")
    _, passing = run_report(make_suite(tmp_path, [case("ok", completion="y", must_include=["y"])], name="fine"), tmp_path / "out4")
    assert passing["next_steps"] == []


# -- small things --------------------------------------------------------------------------------

def test_schema_into_a_closed_pipe_is_quiet():
    proc = subprocess.Popen([sys.executable, "-c", "from envelope_ci.cli import main; raise SystemExit(main(['schema']))"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO_ROOT)
    assert proc.stdout is not None
    proc.stdout.read(10)
    proc.stdout.close()  # what `| head -c 10` does
    err = proc.stderr.read().decode() if proc.stderr else ""
    assert proc.wait(timeout=30) == 0 and "Broken pipe" not in err and err == ""


def test_a_misspelled_recorded_key_gets_a_did_you_mean(tmp_path):
    suite = make_suite(tmp_path, files={"c.yaml": "- id: a\n  prompt: p\n  recorded:\n    status: 200\n    body: {}\n"})
    result = run_cli(["run", suite, "--out", tmp_path / "out"])
    assert result.code == 2
    assert result.err_lines == [f"error: {(suite / 'c.yaml').as_posix()}:3: recorded.status: unknown key (did you mean 'http_status'?)"]


def test_a_recordings_file_in_the_fixtures_is_one_message(tmp_path):
    lines = [{"id": f"c{i}", "recorded": answer_envelope(RIGHT_JSON), "attempt_log": []} for i in range(5)]
    suite = make_suite(tmp_path, [case("a", completion="x")], files={"run.jsonl": "\n".join(json.dumps(x) for x in lines) + "\n"})
    result = run_cli(["run", suite, "--out", tmp_path / "out"])
    assert result.code == 2 and len(result.err_lines) == 1
    assert "run.jsonl: this is a recordings file (--record output, 5 line(s)), not fixtures" in result.err
