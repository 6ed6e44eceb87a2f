"""The command line: exit codes and the gate, bad input, lanes, recordings replay, help."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.suites import (
    EXAMPLES,
    MODEL,
    OTHER_MODEL,
    REPO_ROOT,
    RIGHT_JSON,
    WRONG_JSON,
    answer_case,
    answer_envelope,
    chat_body,
    make_suite,
    pinned_gate_suite,
    recorded,
    run_cli,
    run_console_script,
    run_module,
    run_report,
    transport_error,
    write_replay,
)

pytestmark = pytest.mark.usefixtures("clean_env")

BIG_JSON = '{"answer": 42, "note": "Douglas Adams, The Hitchhiker\'s Guide to the Galaxy (1979)"}'


@pytest.fixture
def gate(tmp_path) -> Path:
    return pinned_gate_suite(tmp_path)


def replay_run(gate: Path, tmp_path: Path, lines, *args):
    replay = write_replay(tmp_path / "replay.jsonl", lines)
    return run_report(gate, tmp_path / "out", "--replay", replay, *args)


def case_row(report, case_id):
    return next(c for c in report["cases"] if c["id"] == case_id)


# -- the gate --------------------------------------------------------------------------------

def test_pass_is_0_and_known_failures_are_not_regressions(gate, tmp_path):
    result, report = run_report(gate, tmp_path / "out")
    assert result.code == 0
    assert report["verdict"] == "pass" and report["alerts"] == [] and report["regressions"] == []
    assert report["known_failures"] == ["s-wrong-1", "s-wrong-2"]
    assert case_row(report, "s-wrong-1")["outcome"] == "known_failure"
    assert case_row(report, "s-right")["outcome"] == "unchanged"


@pytest.mark.parametrize(
    "envelope,label,channel",
    [
        (answer_envelope(WRONG_JSON), "wrong", "correctness"),
        (answer_envelope('{"answer": "42"}'), "schema", "schema"),
        (answer_envelope('```json\n{"answer": 42}\n```'), "schema", "schema"),
        (answer_envelope('{"answer": 4', finish_reason="length"), "truncated", "truncated"),
        (answer_envelope('{"answer": 42, "note": "Doug'), "truncated", "truncated"),
        (answer_envelope(BIG_JSON, tokens=12), "right", "size"),
        (answer_envelope(RIGHT_JSON, tokens=20), "right", "size"),
        (answer_envelope(RIGHT_JSON, elapsed_ms=500.0), "right", "time"),
    ],
    ids=["wrong", "schema", "fenced", "truncated-length", "truncated-mid-value", "size-chars", "size-tokens", "time"],
)
def test_regression_on_every_channel_fails_even_in_stretch(gate, tmp_path, envelope, label, channel):
    result, report = replay_run(gate, tmp_path, [("s-right", envelope)])
    assert result.code == 1, result.out
    assert report["verdict"] == "fail"
    assert report["alerts"] == []  # the stretch rate moved away from the watermark, not toward it
    assert report["regressions"] == ["s-right"]
    row = case_row(report, "s-right")
    assert (row["label"], row["channel"], row["outcome"], row["stratum"]) == (label, channel, "regression", "stretch")
    assert "regression" in result.out and "s-right" in result.out


def test_within_slack_is_stable(gate, tmp_path):
    result, report = replay_run(gate, tmp_path, [("s-right", answer_envelope(RIGHT_JSON, elapsed_ms=460.0, tokens=13))])
    assert result.code == 0, result.out
    assert case_row(report, "s-right")["channel"] == "stable"


def test_improvement_is_reported(gate, tmp_path):
    result, report = replay_run(gate, tmp_path, [("s-wrong-1", answer_envelope(RIGHT_JSON, elapsed_ms=300.0))])
    assert result.code == 0, result.out
    assert report["improvements"] == ["s-wrong-1"]
    assert report["lanes"]["grade_flips"] == 1 and report["lanes"]["flipped"] == ["s-wrong-1"]
    assert case_row(report, "s-wrong-1")["outcome"] == "improvement"


@pytest.mark.parametrize(
    "envelope",
    [transport_error(), recorded(chat_body(None), elapsed_ms=10.0), recorded("<html><body>Bad gateway</body></html>", status=200, elapsed_ms=5.0),
     recorded({"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}}, status=429)],
    ids=["refused", "content-null", "html", "429"],
)
def test_drops_and_empties_left_are_inconclusive(gate, tmp_path, envelope):
    result, report = replay_run(gate, tmp_path, [("s-right", envelope)])
    assert result.code == 3, result.out
    assert report["verdict"] == "inconclusive"
    assert report["regressions"] == [] and report["undelivered"] == ["s-right"]
    assert case_row(report, "s-right")["channel"] == "transport"


def test_drops_do_not_hide_a_failure(gate, tmp_path):
    result, report = replay_run(gate, tmp_path, [("s-right", answer_envelope(WRONG_JSON)), ("s-wrong-1", transport_error())])
    assert result.code == 1
    assert report["verdict"] == "fail" and report["undelivered"] == ["s-wrong-1"]


def test_min_delivered_share_from_config(tmp_path):
    cases = [answer_case(f"e{i}", stratum="easy") for i in range(3)] + [
        answer_case("e-drop", stratum="easy") | {"recorded": transport_error()}]
    suite = make_suite(tmp_path, cases)
    result, report = run_report(suite, tmp_path / "out")
    assert result.code == 3 and report["summary"]["counts"]["drop"] == 1
    assert report["strata"]["easy"]["pass_rate"] == 1.0 and report["alerts"] == []
    (suite / "envelope-ci.yaml").write_text("min_delivered_share: 0.75\n", "utf-8")
    result, report = run_report(suite, tmp_path / "out2")
    assert result.code == 0, result.out
    assert report["run"]["thresholds"]["min_delivered_share"] == 0.75
    (suite / "envelope-ci.yaml").write_text("min_delivered_share: 0.8\n", "utf-8")
    assert run_report(suite, tmp_path / "out3")[0].code == 3


def test_explicit_config_file(tmp_path):
    suite = make_suite(tmp_path, [answer_case("a", stratum="easy"), answer_case("b", WRONG_JSON, stratum="easy")])
    assert run_report(suite, tmp_path / "out")[0].code == 1
    cfg = tmp_path / "thresholds.yaml"
    cfg.write_text("easy_floor: 0.5\n", "utf-8")
    result, report = run_report(suite, tmp_path / "out2", "--config", cfg)
    assert result.code == 0, result.out
    assert report["run"]["config_file"] == cfg.as_posix()
    missing = run_cli(["run", suite, "--out", tmp_path / "o", "--config", tmp_path / "nope.yaml"])
    assert missing.code == 2 and "nope.yaml" in missing.err


def test_fixtures_changed_fails(gate, tmp_path):
    (gate / "extra.yaml").write_text(json.dumps([answer_case("s-new", WRONG_JSON)]), "utf-8")
    result, report = run_report(gate, tmp_path / "out")
    assert result.code == 1
    assert report["alerts"] == ["fixtures_changed"] and report["fixtures"]["added"] == ["s-new"]
    assert "ALERT fixtures_changed" in result.out


def test_unstratified_suite_is_held_to_the_easy_floor(tmp_path):
    suite = make_suite(tmp_path, [answer_case("u1", stratum=None), answer_case("u2", stratum=None)])
    result, report = run_report(suite, tmp_path / "out")
    assert result.code == 0 and report["strata"]["unstratified"]["pass_rate"] == 1.0
    suite = make_suite(tmp_path, [answer_case("u1", stratum=None), answer_case("u2", WRONG_JSON, stratum=None)], name="red")
    result, report = run_report(suite, tmp_path / "out2")
    assert result.code == 1 and report["alerts"] == ["easy_regression"]


def test_quiet_prints_only_the_verdict(gate, tmp_path):
    result = run_cli(["run", gate, "--out", tmp_path / "out", "--quiet"])
    assert (result.code, result.out) == (0, "envelope-ci: pass\n")


# -- lanes and fingerprints ------------------------------------------------------------------

def test_replay_of_another_model_counts_mismatches_and_says_why(gate, tmp_path):
    lines = [
        ("s-right", answer_envelope(BIG_JSON, elapsed_ms=5000.0, model=OTHER_MODEL, tokens=40)),
        ("s-wrong-1", answer_envelope(RIGHT_JSON, elapsed_ms=300.0)),
    ]
    result, report = replay_run(gate, tmp_path, lines)
    assert report["lanes"]["matched_fingerprints"] == 2
    assert report["lanes"]["fingerprint_mismatches"] == 1
    assert report["lanes"]["grade_flips"] == 1
    row = case_row(report, "s-right")
    assert row["comparable"] is False and row["model_id"] == OTHER_MODEL
    assert row["channel"] == "stable", "a mismatched case's size and time are not judged against its pin"
    assert any("size/time not compared with the pin" in r and OTHER_MODEL in r for r in row["reasons"])
    assert report["fingerprint"]["model_id"] == ",".join(sorted([MODEL, OTHER_MODEL]))
    # A fingerprint change is never a silent green: size and time went unjudged.
    assert result.code == 1 and report["alerts"] == ["fingerprint_changed"], result.out
    message = report["alert_details"][0]["message"]
    assert f"model id {MODEL} → {OTHER_MODEL}" in message and "s-right" in message
    md = (tmp_path / "out" / "report.md").read_text("utf-8")
    assert "fingerprint mismatches 1 (size and time not judged)" in md
    assert "mismatched=1" in result.out


def test_mismatched_case_still_fails_on_correctness_and_max_chars(gate, tmp_path):
    result, report = replay_run(gate, tmp_path, [("s-right", answer_envelope(WRONG_JSON, model=OTHER_MODEL))])
    assert result.code == 1 and report["regressions"] == ["s-right"]
    assert report["lanes"]["fingerprint_mismatches"] == 1


def test_lane_and_endpoint_class_are_in_the_fingerprint(gate, tmp_path):
    result, report = run_report(gate, tmp_path / "out", "--lane", "adjudication", "--endpoint-class", "vllm-a100")
    assert report["fingerprint"] == {"lane": "adjudication", "endpoint_class": "vllm-a100", "model_id": MODEL, "temperature": 0.0, "grader_version": "1"}
    assert report["lanes"]["fingerprint_mismatches"] == 3 and report["lanes"]["matched_fingerprints"] == 0
    assert result.code == 1 and "endpoint class unspecified → vllm-a100" in report["alert_details"][0]["message"]
    smoke, report = run_report(gate, tmp_path / "out2", "--lane", "smoke")
    assert report["lanes"]["matched_fingerprints"] == 3 and report["run"]["lane"] == "smoke"


# -- recordings replay -----------------------------------------------------------------------

def test_replay_overrides_embedded_envelopes(gate, tmp_path):
    result, report = replay_run(gate, tmp_path, [("s-wrong-2", answer_envelope(RIGHT_JSON, elapsed_ms=350.0))])
    assert case_row(report, "s-wrong-2")["label"] == "right"
    assert case_row(report, "s-wrong-1")["label"] == "wrong"  # not in the replay: the fixture's own envelope
    assert report["run"]["mode"] == "replay"


def test_repeats_give_median_p95_and_the_worst_label(gate, tmp_path):
    lines = [("s-wrong-1", answer_envelope(RIGHT_JSON, elapsed_ms=ms)) for ms in (300.0, 320.0, 340.0)]
    lines += [("s-wrong-1", answer_envelope(WRONG_JSON, elapsed_ms=360.0)), ("s-wrong-1", transport_error(elapsed_ms=30000.0))]
    lines += [("s-right", [answer_envelope(elapsed_ms=ms) for ms in (380.0, 400.0, 420.0, 390.0)])]
    result, report = replay_run(gate, tmp_path, lines)
    worst = case_row(report, "s-wrong-1")
    assert worst["label"] == "wrong" and worst["outcome"] == "known_failure"
    assert worst["ms"] == 330.0 and worst["ms_p95"] == 360.0  # the drop's 30 s is not a latency
    assert worst["repeats"] == 5 and worst["attempts"] == 5
    assert "repeats: right,right,right,wrong,drop" in worst["reasons"]
    assert worst["preview"] == WRONG_JSON
    steady = case_row(report, "s-right")
    assert (steady["ms"], steady["ms_p95"], steady["label"], steady["channel"]) == (395.0, 420.0, "right", "stable")
    # The dropped fifth repeat is lost evidence: inconclusive, and the reasons name the repeat.
    assert result.code == 3 and report["blockers"] == ["s-wrong-1: repeat 5 of 5 got no gradeable answer"]
    assert any(r.startswith("repeat 5 of 5 got no gradeable answer: no response") for r in worst["reasons"])


def test_replay_problems(gate, tmp_path):
    unknown = write_replay(tmp_path / "bad.jsonl", [("s-right", answer_envelope()), ("no-such-case", answer_envelope())])
    result = run_cli(["run", gate, "--out", tmp_path / "out", "--replay", unknown])
    assert result.code == 2
    assert result.err_lines == [f"error: {unknown.as_posix()}:2: id: 'no-such-case' matches no case in the fixtures"]
    result = run_cli(["run", gate, "--out", tmp_path / "out", "--replay", tmp_path / "missing.jsonl"])
    assert result.code == 2 and "recordings file not found" in result.err
    result = run_cli(["run", gate, "--out", tmp_path / "out", "--replay", unknown, "--base-url", "http://127.0.0.1:9/v1", "--model", "m"])
    assert result.code == 2 and "exclusive" in result.err


# -- bad input: exit 2, one clear line per problem -------------------------------------------

OK = "- id: ok\n  prompt: p\n  completion: fine\n"
BOMB = "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9) if prev else ', '.join(['lol'] * 9)}]\n"
    for prev, name in zip([None, "a", "b", "c", "d", "e", "f", "g", "h"], "abcdefghi", strict=False)
)

BAD_INPUTS = {
    "malformed-yaml": ({"c.yaml": OK + "- id: x\n  prompt: [unclosed\n"}, [["c.yaml:6:", "malformed YAML"]]),
    "malformed-json": ({"c.json": '[\n {"id": "x",\n  "prompt": }\n]'}, [["c.json:3:", "malformed JSON"]]),
    "malformed-jsonl": ({"c.jsonl": '{"id": "a", "prompt": "p", "completion": "x"}\n{"id": "b",\n'}, [["c.jsonl:2:", "malformed JSON"]]),
    "unknown-key": ({"c.yaml": OK + "  expect_fragmnt: fine\n"}, [["c.yaml:4:", "expect_fragmnt", "did you mean 'expect_fragment'?"]]),
    "wrong-type": ({"c.yaml": OK + "  max_chars: lots\n  must_not_include: sorry\n"},
                   [["c.yaml:4:", "max_chars:", "not of type 'integer'"], ["c.yaml:5:", "must_not_include:", "not of type 'array'"]]),
    "unknown-stratum": ({"c.yaml": OK + "  stratum: hard\n"}, [["c.yaml:4:", "stratum:", "'hard' is not one of"]]),
    "duplicate-ids": ({"a.yaml": OK, "sub/b.jsonl": '{"id": "ok", "prompt": "p", "completion": "x"}\n'},
                      [["sub/b.jsonl:1:", "id:", "duplicate id 'ok'", "a.yaml:1"]]),
    "no-prompt": ({"c.yaml": "- id: x\n  completion: y\n"}, [["c.yaml:1:", "needs a 'prompt' or 'messages'"]]),
    "invalid-schema": ({"c.yaml": OK + "  schema:\n    type: objekt\n"}, [["c.yaml:4:", "schema.type:", "invalid JSON Schema"]]),
    "non-utf8": ({"c.yaml": OK.encode() + b"  description: caf\xe9\n"}, [["c.yaml:4:", "not UTF-8"]]),
    "empty-dir": ({"README.md": "nothing"}, [["no cases found"]]),
    "alias-bomb": ({"c.yaml": BOMB}, [["c.yaml", "alias bomb"]]),
    "python-tag": ({"c.yaml": "- !!python/object/apply:os.system ['echo pwned']\n"}, [["c.yaml:1:", "malformed YAML", "python/object"]]),
    "completion-and-recorded": ({"c.yaml": OK + "  recorded: {http_status: 200, body: {}}\n"}, [["c.yaml:1:", "either 'completion' or 'recorded', not both"]]),
    "nothing-to-grade": ({"c.yaml": "- id: live\n  prompt: p\n  must_include: [x]\n"}, [["c.yaml:1:", "completion:", "no 'completion' or 'recorded'"]]),
    "surrogate": ({"c.jsonl": '{"id": "x", "prompt": "p", "completion": "\\udc00"}\n'}, [["c.jsonl:1:", "completion:", "surrogate"]]),
    "two-files-two-problems": ({"a.yaml": OK + "  stratum: hard\n", "b.json": "{"}, [["a.yaml:4:", "stratum"], ["b.json:1:", "malformed JSON"]]),
}


@pytest.mark.parametrize("name", list(BAD_INPUTS))
def test_bad_input_exits_2_with_one_line_per_problem(tmp_path, name):
    files, expected = BAD_INPUTS[name]
    suite = make_suite(tmp_path, files=files)
    start = time.perf_counter()
    result = run_cli(["run", suite, "--out", tmp_path / "out"])
    assert time.perf_counter() - start < 5.0
    assert result.code == 2, result.out + result.err
    assert "Traceback" not in result.err
    assert len(result.err_lines) == len(expected), result.err
    for line, needles in zip(result.err_lines, expected, strict=False):
        assert line.startswith("error: "), line
        for needle in needles:
            assert needle in line, (needle, line)
    assert not (tmp_path / "out").exists(), "no reports from bad input"


def test_missing_directory(tmp_path):
    for argv in (["run", tmp_path / "nope", "--out", tmp_path / "out"], ["hash", tmp_path / "nope"]):
        result = run_cli(argv)
        assert result.code == 2 and "Traceback" not in result.err
        assert result.err_lines == [f"error: {(tmp_path / 'nope').as_posix()}: not a directory of fixtures"]


def test_hash_of_a_broken_suite_is_bad_input(tmp_path):
    result = run_cli(["hash", make_suite(tmp_path, files={"c.yaml": OK + "  stratum: hard\n"})])
    assert result.code == 2 and result.out == "" and "stratum" in result.err


def test_bad_config_keys(tmp_path):
    suite = make_suite(tmp_path, files={"c.yaml": OK}, config="easy_flor: 0.9\nmedium_floor: high\nsize_slack: 0.5\n")
    result = run_cli(["run", suite, "--out", tmp_path / "out"])
    assert result.code == 2 and "Traceback" not in result.err
    assert len(result.err_lines) == 3
    assert all("envelope-ci.yaml" in line for line in result.err_lines)
    assert "easy_flor" in result.err and "medium_floor" in result.err and "size_slack" in result.err


def test_malformed_config_yaml(tmp_path):
    suite = make_suite(tmp_path, files={"c.yaml": OK}, config="easy_floor: [1\n")
    result = run_cli(["run", suite, "--out", tmp_path / "out"])
    assert result.code == 2 and "Traceback" not in result.err
    assert "envelope-ci.yaml" in result.err and "malformed YAML" in result.err


def test_config_problems_are_one_located_line_each(tmp_path):
    suite = make_suite(tmp_path, files={"c.yaml": OK}, config="size_slack: 1.1\neasy_flor: 0.9\n")
    result = run_cli(["run", suite, "--out", tmp_path / "out"])
    assert result.err_lines == [f"error: {(suite / 'envelope-ci.yaml').as_posix()}:2: easy_flor: unknown key (did you mean 'easy_floor'?)"]
    suite = make_suite(tmp_path, files={"c.yaml": OK}, config="easy_floor: [1\n", name="malformed")
    assert len(run_cli(["run", suite, "--out", tmp_path / "out"]).err_lines) == 1


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["--repeats", "0"], "--repeats"),
        (["--concurrency", "0"], "--concurrency"),
        (["--record", "rec.jsonl"], "--record needs a live run"),
        (["--base-url", "http://127.0.0.1:9/v1"], "needs --model"),
        (["--lane", "nightly"], "invalid choice"),
    ],
)
def test_usage_errors(tmp_path, argv, needle):
    suite = make_suite(tmp_path, files={"c.yaml": OK})
    result = run_cli(["run", suite, "--out", tmp_path / "out", *argv])
    assert result.code == 2 and needle in result.err and "Traceback" not in result.err


def test_eval_base_url_from_env_makes_a_live_run(tmp_path):
    suite = make_suite(tmp_path, files={"c.yaml": OK})
    result = run_cli(["run", suite, "--out", tmp_path / "out"], env={"EVAL_BASE_URL": "http://127.0.0.1:9/v1"})
    assert result.code == 2 and "needs --model" in result.err


def test_no_command_and_unknown_command():
    assert run_cli([]).code == 2
    assert run_cli(["frobnicate"]).code == 2


# -- help, version, schema, subprocesses -----------------------------------------------------

def test_help_in_process():
    result = run_cli(["--help"])
    assert result.code == 0 and "run" in result.out and "hash" in result.out
    result = run_cli(["run", "--help"])
    assert result.code == 0
    for flag in ("--pins", "--out", "--base-url", "--model", "--lane", "--endpoint-class", "--concurrency", "--repeats",
                 "--record", "--replay", "--write-pins", "--config"):
        assert flag in result.out, flag
    assert "exit codes" in result.out


def test_version_and_schema():
    from envelope_ci import __version__

    result = run_cli(["--version"])
    assert result.code == 0 and __version__ in result.out
    result = run_cli(["schema"])
    assert result.code == 0 and json.loads(result.out)["title"] == "envelope-ci fixture file"


def test_python_m_help_subprocess():
    result = run_module(["--help"])
    assert result.code == 0, result.err
    assert "usage: envelope-ci" in result.out and "run" in result.out


def test_console_script_run_help_subprocess():
    result = run_console_script(["run", "--help"])
    assert result.code == 0, result.err
    assert "--replay" in result.out and "--write-pins" in result.out


def test_subprocess_runs_are_hermetic_and_exit_with_the_verdict(tmp_path):
    ok = run_module(["run", EXAMPLES / "support-bot", "--out", tmp_path / "a"], env={"CI": "true"})
    assert ok.code == 0, ok.err
    assert "PASS" in ok.out
    bad = run_console_script(["run", make_suite(tmp_path, files={"c.yaml": OK + "  stratum: hard\n"}), "--out", tmp_path / "b"])
    assert bad.code == 2 and "Traceback" not in bad.err and "stratum" in bad.err
    refused = run_module(["run", make_suite(tmp_path, files={"c.yaml": OK}, name="s2"), "--out", tmp_path / "c",
                          "--lane", "adjudication", "--write-pins"], env={"GITHUB_ACTIONS": "true"})
    assert refused.code == 2 and "refusing to write pins in CI" in refused.err


def test_the_command_with_its_output_closed_still_exits_as_it_should(tmp_path):
    """``console`` flushes the streams before it leaves at once: one closed (``>&-``) is no error, and the exit code stands."""
    done = subprocess.run(["sh", "-c", f'"{sys.executable}" -m envelope_ci schema report >&-'], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=60, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT)})
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
