"""Edges an independent review found: each once a traceback, a wrong exit code, or a report that hid something."""
from __future__ import annotations

import json

import pytest
from msgspec.structs import replace

from envelope_ci.analysis.cases import judge_case
from envelope_ci.analysis.promotion import write_refusal
from envelope_ci.model import Fingerprint, Label, Lane, Thresholds
from envelope_ci.report.model import RunInfo
from envelope_ci.report.next_steps import pin_command, rerun_command
from tests.support.suites import (
    RIGHT_JSON,
    WRONG_JSON,
    answer_envelope,
    case,
    grade,
    make_suite,
    pinned_gate_suite,
    run_cli,
    run_report,
    transport_error,
    write_pins,
    write_replay,
)


@pytest.fixture(autouse=True)
def _hermetic(clean_env):
    return clean_env


def test_an_unquoted_yaml_date_is_text_not_a_crash(tmp_path):
    suite = make_suite(tmp_path, files={"c.yaml": "- id: d\n  prompt: p\n  completion: '{\"eta\": \"2024-09-26\"}'\n  expect_json: {eta: 2024-09-26}\n"})
    result, report = run_report(suite, tmp_path / "out")
    assert result.code == 0, result.err
    assert report["cases"][0]["label"] == "right"


@pytest.mark.parametrize("name,text", [
    ("c.yaml", "- id: n\n  prompt: p\n  completion: x\n  timeout_s: .nan\n"),
    ("c.jsonl", '{"id": "n", "prompt": "p", "completion": "x", "timeout_s": NaN}\n'),
    ("c.json", '[{"id": "n", "prompt": "p", "completion": "x", "expect_json": Infinity}]\n'),
])
def test_nan_and_infinity_are_bad_input_with_a_location(tmp_path, name, text):
    suite = make_suite(tmp_path, files={name: text})
    result = run_cli(["run", suite, "--out", tmp_path / "out"])
    assert result.code == 2 and "Traceback" not in result.err
    assert len(result.err_lines) == 1 and name in result.err_lines[0]
    assert "not" in result.err_lines[0] and ("JSON" in result.err_lines[0])


def test_nan_in_a_replay_line_is_bad_input(tmp_path):
    suite = make_suite(tmp_path, [case("a", completion="x")])
    replay = tmp_path / "r.jsonl"
    replay.write_text('{"id": "a", "recorded": {"http_status": 200, "elapsed_ms": NaN, "body": {}}}\n', "utf-8")
    result = run_cli(["run", suite, "--out", tmp_path / "out", "--replay", replay])
    assert result.code == 2 and f"{replay.as_posix()}:1" in result.err


def test_an_internal_error_is_not_exit_1(tmp_path, monkeypatch):
    suite = make_suite(tmp_path, [case("a", completion="x")])
    import envelope_ci.api as api

    def boom(*_a, **_k):
        raise RuntimeError("planted bug")

    monkeypatch.setattr(api, "grade_all", boom)
    result = run_cli(["run", suite, "--out", tmp_path / "out"])
    assert result.code == 2 and "internal error" in result.err and "planted bug" in result.err


def test_write_pins_refuses_a_run_that_failed_closed():
    fp = Fingerprint("adjudication", "unspecified", None, 0.0, "1")
    why = write_refusal(Lane.ADJUDICATION, False, fp, None, False, [], ["the response named no model for: a"])
    assert why is not None and "failed closed" in why and "named no model" in why


def test_write_pins_reports_the_regressions_it_accepts(tmp_path):
    suite = pinned_gate_suite(tmp_path)
    replay = write_replay(tmp_path / "r.jsonl", [("s-right", answer_envelope(WRONG_JSON))])
    result, report = run_report(suite, tmp_path / "out", "--replay", replay, "--lane", "adjudication", "--write-pins",
                                "--allow-unverified-recordings")
    assert result.code == 0, result.out + result.err  # the new baseline itself is healthy (stretch 0/3)
    update = report["pins_update"]
    assert update["accepted_regressions"] == ["s-right"]
    assert [m["id"] for m in update["moved"]] == ["s-right"]
    assert update["moved"][0]["from"]["label"] == "right" and update["moved"][0]["to"]["label"] == "wrong"
    assert "ACCEPTED into the baseline" in result.out and "s-right" in result.out
    assert "Accepted into the baseline" in (tmp_path / "out" / "report.md").read_text("utf-8")


def test_nothing_delivered_is_never_a_pass(tmp_path):
    suite = make_suite(tmp_path, [case("a", recorded=transport_error()), case("b", recorded=transport_error())], config={"min_delivered_share": 0})
    result, report = run_report(suite, tmp_path / "out")
    assert result.code == 3 and report["verdict"] == "inconclusive"


def test_a_case_temperature_is_in_its_fingerprint():
    from tests.support.suites import make_case

    kase = make_case(id="t", temperature=1.2, completion="x")
    g = grade("x", kase)
    result = judge_case(kase, [g], Fingerprint("smoke", "unspecified", None, 0.0, "1"), None, Thresholds())
    assert result.fingerprint.temperature == 1.2


@pytest.mark.parametrize("flag", ["--out", "--record"])
def test_outputs_inside_the_fixtures_are_refused(tmp_path, flag):
    suite = make_suite(tmp_path, [case("a", completion="x")])
    argv = ["run", suite, "--out", suite / "out"] if flag == "--out" else \
        ["run", suite, "--out", tmp_path / "out", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--record", suite / "rec.jsonl"]
    result = run_cli(argv)
    assert result.code == 2 and "inside the fixtures directory" in result.err
    assert not (suite / "out").exists() and not (suite / "rec.jsonl").exists()


def test_a_comment_only_edit_names_the_file(tmp_path):
    suite = pinned_gate_suite(tmp_path)
    with (suite / "cases.yaml").open("a", encoding="utf-8") as fh:
        fh.write("# a reviewer's note\n")
    result, report = run_report(suite, tmp_path / "out")
    assert result.code == 1 and "fixtures_changed" in report["alerts"]
    assert report["fixtures"]["files_changed"] == ["cases.yaml"] and report["fixtures"]["modified"] == []
    message = next(a["message"] for a in report["alert_details"] if a["code"] == "fixtures_changed")
    assert "files: cases.yaml" in message and "no case changed" in message


def test_the_pin_command_reproduces_the_run():
    base = RunInfo(mode="offline", lane="smoke", fixtures_dir="evals", pins="evals/envelope-pins.json", repeats=1, replay=None,
                   model_requested=None, endpoint_class="unspecified", temperature=0.0, thresholds=Thresholds(), config_file=None)
    assert pin_command(base) == "envelope-ci run evals --pins evals/envelope-pins.json --lane adjudication --write-pins"
    assert "--replay 'new model.jsonl'" in pin_command(replace(base, mode="replay", replay="new model.jsonl"))
    live = pin_command(replace(base, mode="live", model_requested="gpt-x", endpoint_class="azure"))
    assert '--endpoint-class azure' in live and '--base-url "$EVAL_BASE_URL" --model gpt-x' in live


@pytest.mark.parametrize("config_file, named", [
    (None, None),
    ("evals/envelope-ci.yaml", None),  # the run finds it by itself
    ("./evals/envelope-ci.yaml", None),
    ("evals/envelope-ci.yml", "evals/envelope-ci.yml"),  # found only when no .yaml is beside it: named
    ("ci/strict thresholds.yaml", "'ci/strict thresholds.yaml'"),
])
def test_the_commands_name_a_thresholds_file_the_run_would_not_find(config_file, named):
    run = RunInfo(mode="offline", lane="smoke", fixtures_dir="evals", pins="evals/envelope-pins.json", repeats=1, replay=None,
                  model_requested=None, endpoint_class="unspecified", temperature=0.0, thresholds=Thresholds(), config_file=config_file)
    for command in (pin_command(run), rerun_command(run)):
        assert ("--config" in command) == (named is not None), command
        if named:
            assert f"--pins evals/envelope-pins.json --config {named} " in command


def test_whitespace_only_content_is_empty():
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "  \n\t"}, "finish_reason": "stop"}], "model": "m"}
    assert grade({"http_status": 200, "elapsed_ms": 5.0, "body": body}).label is Label.EMPTY


def test_right_answers_still_right_after_the_fixes(tmp_path):
    # A guard that the stricter loaders left ordinary input alone.
    suite = make_suite(tmp_path, [case("a", completion=RIGHT_JSON, expect_json={"answer": 42})])
    result, report = run_report(suite, tmp_path / "out")
    assert result.code == 0 and json.loads(report["cases"][0]["preview"])["answer"] == 42
    assert write_pins(suite, tmp_path / "p").code == 0


def test_the_base_diff_names_fixture_cases_the_pr_changed(tmp_path):
    from tests.support.suites import copy_example

    suite = copy_example(tmp_path, "support-bot")
    base_pins = tmp_path / "base-pins.json"
    base_pins.write_text((suite / "envelope-pins.json").read_text("utf-8"), "utf-8")
    easy = suite / "easy.yaml"
    easy.write_text(easy.read_text("utf-8").replace("prompt: hi", "prompt: hello there"), "utf-8")
    assert write_pins(suite, tmp_path / "p").code == 0  # the PR re-pins, so only the diff can tell
    result, report = run_report(suite, tmp_path / "out", "--base-pins", base_pins)
    assert result.code == 0, result.out
    rows = {d["id"]: d for d in report["base"]["diff"]}
    assert rows["greeting-no-apology-loop"]["fixture"] == "modified"
    assert [d["id"] for d in rows.values() if d["fixture"]] == ["greeting-no-apology-loop"]
    md = (tmp_path / "out" / "report.md").read_text("utf-8")
    assert "fixture cases modified by this PR: greeting-no-apology-loop" in md


# -- from a new user's trial ------------------------------------------------------------------

def test_a_pr_that_repins_a_regression_is_loud(tmp_path):
    suite = pinned_gate_suite(tmp_path)
    base_pins = tmp_path / "base-pins.json"
    base_pins.write_text((suite / "envelope-pins.json").read_text("utf-8"), "utf-8")
    replay = write_replay(tmp_path / "r.jsonl", [("s-right", answer_envelope(WRONG_JSON))])
    assert run_cli(["run", suite, "--out", tmp_path / "p", "--replay", replay, "--lane", "adjudication", "--write-pins",
                    "--allow-unverified-recordings"]).code == 0
    result, report = run_report(suite, tmp_path / "out", "--replay", replay, "--base-pins", base_pins)
    assert report["base"]["downgraded"] == ["s-right"]
    assert "WARNING: this change downgrades 1 pin(s)" in result.out and "s-right" in result.out
    md = (tmp_path / "out" / "report.md").read_text("utf-8")
    assert "This PR downgrades 1 pin that the base branch had right and stable:** s-right" in md


def test_header_variables_are_resolved_only_for_live_runs(tmp_path):
    suite = make_suite(tmp_path, [case("a", completion="x")], config="headers:\n  api-key: ${ENVELOPE_TEST_UNSET_KEY}\n")
    offline = run_cli(["run", suite, "--out", tmp_path / "out"], env={"ENVELOPE_TEST_UNSET_KEY": None})
    assert offline.code == 0, offline.err
    live = run_cli(["run", suite, "--out", tmp_path / "out2", "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                    "--allow-key-env", "ENVELOPE_TEST_UNSET_KEY"], env={"ENVELOPE_TEST_UNSET_KEY": None})
    assert live.code == 2
    assert live.err_lines == [f"error: {(suite / 'envelope-ci.yaml').as_posix()}:1: headers: ${{ENVELOPE_TEST_UNSET_KEY}} is not set "
                              "in the environment (export it, or remove the header)"]


def test_a_partial_replay_says_where_each_answer_came_from(tmp_path):
    suite = make_suite(tmp_path, [case("a", completion="x"), case("b", completion="y")])
    replay = write_replay(tmp_path / "r.jsonl", [("a", answer_envelope(RIGHT_JSON))])
    _, report = run_report(suite, tmp_path / "out", "--replay", replay)
    assert any("graded 1 case(s) from the recordings in" in n and "1 from the fixtures' own recordings" in n for n in report["notes"])


@pytest.mark.parametrize("name,text,needle", [
    ("a.json", '[{"id": "a", "prompt": "p", "completion": "x"},]\n', "a trailing comma?"),
    ("a.yaml", "- id: a\n\tprompt: p\n", "spaces, not tabs"),
    ("a.yaml", "case:\n  - id: a\n    prompt: p\n", "did you mean 'cases'?"),
    ("a.yaml", "- id: one two\n  prompt: p\n  completion: x\n", "ids are single words"),
    ("a.jsonl", '{"id": "a", "recorded": {"http_status": 200, "body": {}}, "attempt_log": []}\n', "grade them with --replay"),
])
def test_common_mistakes_get_a_hint(tmp_path, name, text, needle):
    suite = make_suite(tmp_path, files={name: text})
    result = run_cli(["run", suite, "--out", tmp_path / "out"])
    assert result.code == 2 and len(result.err_lines) == 1 and needle in result.err_lines[0], result.err


def test_each_bad_number_is_named(tmp_path):
    suite = make_suite(tmp_path, [case("a", completion="x")])
    result = run_cli(["run", suite, "--out", tmp_path / "out", "--repeats", "0", "--concurrency", "-1"])
    assert result.code == 2
    assert result.err_lines == ["error: --concurrency must be a finite number of at least 1, got -1", "error: --repeats must be a finite number of at least 1, got 0"]


def test_an_unreachable_endpoint_is_said_once_and_plainly(tmp_path):
    from tests.support.fake_openai import refused_url

    suite = make_suite(tmp_path, [case("a"), case("b")])
    result = run_cli(["run", suite, "--out", tmp_path / "out", "--base-url", refused_url(), "--model", "m", "--max-attempts", "1"])
    assert result.code == 3
    nothing = [line for line in result.out.splitlines() if line.startswith("NOTHING DELIVERED")]
    assert len(nothing) == 1 and "[Errno 111] Connection refused (127.0.0.1:" in nothing[0]
    assert "Max retries exceeded" not in result.out
