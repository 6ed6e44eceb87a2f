"""``envelope-ci import``: recordings of a live run become sidecars the loader reads, so offline runs grade real answers."""
from __future__ import annotations

import json

import pytest

from tests.support.fake_openai import Behaviour, FakeOpenAI
from tests.support.suites import (
    chat_body,
    make_suite,
    recorded,
    run_cli,
    run_report,
    transport_error,
    write_pins,
    write_replay,
)

pytestmark = pytest.mark.usefixtures("clean_env")

SCHEMA = {"type": "object", "required": ["status"]}


def live_cases():
    """One case per planted behaviour, each with the assertion its answer meets or misses."""
    return [
        {"id": "greet", "stratum": "easy", "prompt": "[[greet]] say hello", "expect_fragment": "Hello"},
        {"id": "status-json", "stratum": "easy", "prompt": "[[status-json]] JSON please", "schema": SCHEMA, "expect_json": {"status": "shipped"}},
        {"id": "wrong-answer", "stratum": "medium", "prompt": "[[wrong-answer]] name the capital", "expect_fragment": "Paris"},
        {"id": "not-json", "stratum": "medium", "prompt": "[[not-json]] JSON please", "schema": SCHEMA},
        {"id": "cut-off", "stratum": "stretch", "prompt": "[[cut-off]] a long answer", "expect_fragment": "end"},
    ]


def plant(srv):
    srv.plant("greet", Behaviour.ok("Hello! How can I help?"))
    srv.plant("status-json", Behaviour.ok('{"status": "shipped"}'))
    srv.plant("wrong-answer", Behaviour.ok("Lyon"))
    srv.plant("not-json", Behaviour.ok("Sure! Here it is: status shipped"))
    srv.plant("cut-off", Behaviour.length("and then, and then"))


def labels(report):
    return {row["id"]: (row["label"], row["chars"], row["repeats"]) for row in report["cases"]}


def test_round_trip_live_record_import_offline_gives_the_same_labels(tmp_path):
    suite = make_suite(tmp_path, live_cases(), name="evals")
    cases_before = (suite / "cases.yaml").read_bytes()
    rec = tmp_path / "run.jsonl"
    with FakeOpenAI() as srv:
        plant(srv)
        live, live_report = run_report(suite, tmp_path / "live", "--base-url", srv.url, "--model", "m", "--repeats", "2", "--record", rec)
    assert live_report is not None, live.err
    assert {row["label"] for row in live_report["cases"]} == {"right", "wrong", "schema", "truncated"}

    result = run_cli(["import", rec, "--into", suite])
    assert result.code == 0, result.err
    assert "imported 10 envelope(s) for 5 case(s)" in result.out
    assert "envelope-ci run" in result.out and "--write-pins" in result.out

    offline, offline_report = run_report(suite, tmp_path / "offline")
    assert offline.code == live.code, offline.out
    assert labels(offline_report) == labels(live_report)
    assert offline_report["run"]["mode"] == "offline"
    assert (suite / "cases.yaml").read_bytes() == cases_before  # the user's file is never rewritten
    lines = [json.loads(line) for line in (suite / "cases.yaml.recorded.jsonl").read_text("utf-8").splitlines()]
    assert [line["id"] for line in lines] == [c["id"] for c in live_cases()]  # the fixture file's order
    assert all(set(line) == {"id", "recorded"} and len(line["recorded"]) == 2 for line in lines)  # repeats as a list, no attempt_log


def test_one_recording_per_case_is_one_envelope_and_pins_follow(tmp_path):
    suite = make_suite(tmp_path, [{"id": "a", "prompt": "p", "expect_fragment": "yes"}], name="evals")
    env = recorded(chat_body("yes indeed"))
    rec = write_replay(tmp_path / "run.jsonl", [("a", env)])
    assert run_cli(["import", rec, "--into", suite]).code == 0
    (line,) = (suite / "cases.yaml.recorded.jsonl").read_text("utf-8").splitlines()
    assert json.loads(line) == {"id": "a", "recorded": env}
    assert write_pins(suite, tmp_path / "pins").code == 0
    result, report = run_report(suite, tmp_path / "out")
    assert result.code == 0 and report["fixtures"]["changed"] is False


def test_recorded_envelopes_are_part_of_the_case_and_the_hash(tmp_path):
    suite = make_suite(tmp_path, [{"id": "a", "prompt": "p", "expect_fragment": "yes", "stratum": "easy"},
                                  {"id": "b", "prompt": "q", "expect_fragment": "no", "stratum": "easy"}], name="evals")
    rec = write_replay(tmp_path / "run.jsonl", [("a", recorded(chat_body("yes"))), ("b", recorded(chat_body("no")))])
    assert run_cli(["import", rec, "--into", suite]).code == 0
    assert write_pins(suite, tmp_path / "pins").code == 0
    hash_before = run_cli(["hash", suite]).out
    rerecorded = write_replay(tmp_path / "again.jsonl", [("a", recorded(chat_body("yes"), elapsed_ms=405.0))])
    assert run_cli(["import", rerecorded, "--into", suite]).code == 0
    assert run_cli(["hash", suite]).out != hash_before
    result, report = run_report(suite, tmp_path / "out")
    assert result.code == 1 and report["alerts"] == ["fixtures_changed"]
    # only a's time moved (b's line was kept as it was): retimed, not modified
    assert report["fixtures"]["modified"] == [] and report["fixtures"]["retimed"] == ["a"]
    assert report["fixtures"]["files_changed"] == ["cases.yaml.recorded.jsonl"]


def test_unknown_ids_and_bad_lines_are_errors_naming_the_line_and_nothing_is_written(tmp_path):
    suite = make_suite(tmp_path, [{"id": "a", "prompt": "p", "expect_fragment": "yes"}], name="evals")
    rec = tmp_path / "run.jsonl"
    rec.write_text(json.dumps({"id": "a", "recorded": recorded(chat_body("yes"))}) + "\n"
                   + json.dumps({"id": "ghost", "recorded": recorded(chat_body("boo"))}) + "\n"
                   + json.dumps({"id": "a", "recorded": {"http_status": 200, "bodyy": {}}}) + "\n"
                   + "[1, 2]\n", "utf-8")
    result = run_cli(["import", rec, "--into", suite])
    assert result.code == 2
    assert result.err_lines == [
        f"error: {rec.as_posix()}:2: id: 'ghost' matches no case in the fixtures",
        f"error: {rec.as_posix()}:3: recorded.bodyy: unknown key (did you mean 'body'?)",
        f"error: {rec.as_posix()}:4: expected {{\"id\": CASE_ID, \"recorded\": ENVELOPE}} (a line of run --record)",
    ]
    assert not (suite / "cases.yaml.recorded.jsonl").exists()


def test_a_case_that_records_its_own_answer_is_not_overwritten(tmp_path):
    suite = make_suite(tmp_path, [{"id": "a", "prompt": "p", "completion": "typed by hand"}, {"id": "b", "prompt": "q"}], name="evals")
    rec = write_replay(tmp_path / "run.jsonl", [("a", recorded(chat_body("x"))), ("b", recorded(chat_body("y")))])
    result = run_cli(["import", rec, "--into", suite])
    assert result.code == 2
    assert result.err_lines == [f"error: {(suite / 'cases.yaml').as_posix()}:1: completion: case 'a' records its own answer here: "
                                "delete its 'completion' to import a recorded one (it goes beside the file, in a sidecar)"]
    assert not (suite / "cases.yaml.recorded.jsonl").exists()


def test_undelivered_recordings_are_imported_with_a_warning(tmp_path):
    suite = make_suite(tmp_path, [{"id": "a", "prompt": "p"}], name="evals")
    rec = write_replay(tmp_path / "run.jsonl", [("a", transport_error())])
    result = run_cli(["import", rec, "--into", suite])
    assert result.code == 0 and "warning: 1 case(s) were recorded without a gradeable answer (drop or empty): a" in result.out
    assert run_report(suite, tmp_path / "out")[0].code == 3


def test_a_recordings_file_inside_the_fixtures_is_refused(tmp_path):
    suite = make_suite(tmp_path, [{"id": "a", "prompt": "p"}], name="evals")
    rec = write_replay(suite / "run.jsonl", [("a", recorded(chat_body("x")))])
    result = run_cli(["import", rec, "--into", suite])
    assert result.code == 2 and "is inside the fixtures directory" in result.err


def test_missing_or_empty_recordings(tmp_path):
    suite = make_suite(tmp_path, [{"id": "a", "prompt": "p"}], name="evals")
    assert "recordings file not found" in run_cli(["import", tmp_path / "nope.jsonl", "--into", suite]).err
    (tmp_path / "empty.jsonl").write_text("\n", "utf-8")
    assert "holds no recorded envelopes" in run_cli(["import", tmp_path / "empty.jsonl", "--into", suite]).err


# --------------------------------------------------------------------------- the loader's side

def sidecar_line(case_id, env=None):
    return json.dumps({"id": case_id, "recorded": env or recorded(chat_body("yes"))}) + "\n"


@pytest.mark.parametrize(("sidecar", "message"), [
    (sidecar_line("a") + sidecar_line("ghost"), "cases.yaml.recorded.jsonl:2: id: 'ghost' is not a case of {suite}/cases.yaml"),
    (sidecar_line("a") + sidecar_line("a"), "cases.yaml.recorded.jsonl:2: id: 'a' is already on line 1: one line per case, its repeats as a list"),
    ('{"id": "a"}\n', "cases.yaml.recorded.jsonl:1: expected {\"id\": CASE_ID, \"recorded\": ENVELOPE or [ENVELOPE, ...]}"),
    ('{"id": "a", "recorded": {"http_status": 999}}\n', "cases.yaml.recorded.jsonl:1: recorded.http_status: 999 is greater than the maximum of 599"),
    ("{not json\n", "cases.yaml.recorded.jsonl:1: malformed JSON"),
])
def test_sidecar_problems_name_the_sidecar_line(tmp_path, sidecar, message):
    suite = make_suite(tmp_path, [{"id": "a", "prompt": "p"}], files={"cases.yaml.recorded.jsonl": sidecar}, name="evals")
    result, _ = run_report(suite, tmp_path / "out")
    assert result.code == 2
    assert message.replace("{suite}", suite.as_posix()) in result.err


def test_a_case_with_its_own_answer_and_a_sidecar_line_is_an_error(tmp_path):
    suite = make_suite(tmp_path, [{"id": "a", "prompt": "p", "completion": "hi"}], files={"cases.yaml.recorded.jsonl": sidecar_line("a")}, name="evals")
    result, _ = run_report(suite, tmp_path / "out")
    assert result.code == 2
    assert f"cases.yaml.recorded.jsonl:1: id: case 'a' has its own 'completion' ({suite.as_posix()}/cases.yaml:3): keep one of the two" in result.err


def test_a_sidecar_without_its_fixture_file_is_an_error(tmp_path):
    suite = make_suite(tmp_path, [{"id": "a", "prompt": "p", "completion": "hi"}], files={"old.yaml.recorded.jsonl": sidecar_line("a")}, name="evals")
    result, _ = run_report(suite, tmp_path / "out")
    assert result.code == 2
    assert "old.yaml.recorded.jsonl: recorded envelopes of old.yaml, which holds no cases here" in result.err


def test_sidecars_work_beside_json_and_jsonl_fixtures_in_subfolders(tmp_path):
    files = {"billing/refunds.json": [{"id": "r", "prompt": "p", "expect_fragment": "yes"}],
             "billing/refunds.json.recorded.jsonl": sidecar_line("r"),
             "lines.jsonl": [{"id": "l", "prompt": "p", "expect_fragment": "yes"}],
             "lines.jsonl.recorded.jsonl": sidecar_line("l", [recorded(chat_body("yes")), recorded(chat_body("yes!"))])}
    suite = make_suite(tmp_path, files=files, name="evals")
    result, report = run_report(suite, tmp_path / "out")
    assert {row["id"]: (row["label"], row["repeats"]) for row in report["cases"]} == {"r": ("right", 1), "l": ("right", 2)}
