"""Pins: the file format, the fixture hash and its change detection, and who may write pins."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from envelope_ci.analysis.promotion import write_refusal
from envelope_ci.errors import UsageError
from envelope_ci.model import Fingerprint, Lane, Pin, Pins
from envelope_ci.sources.pins import PINS_FORMAT, PINS_VERSION, parse_pins, read_pins, render_pins
from tests.support.suites import (
    EXAMPLES,
    MODEL,
    OTHER_MODEL,
    WRONG_JSON,
    answer_envelope,
    copy_example,
    make_suite,
    pinned_gate_suite,
    run_cli,
    run_report,
    to_json,
    transport_error,
    write_pins,
    write_replay,
)

pytestmark = pytest.mark.usefixtures("clean_env")

FP = Fingerprint("adjudication", "unspecified", MODEL, 0.0, "1")
PIN = Pin("sha256:abc", "right", "stable", 38, 12, False, 400.0, 410.5, FP)


def sample_pins() -> Pins:
    return Pins("sha256:fixtures", FP, {"zeta": PIN, "alpha": Pin("sha256:def", "wrong", "correctness", 13, 4, True, None, None, None)})


# -- the file --------------------------------------------------------------------------------

def test_render_is_versioned_canonical_one_case_per_line():
    text = render_pins(sample_pins())
    assert text == render_pins(sample_pins())
    assert text.endswith("\n")
    lines = text.splitlines()
    assert len(lines) == 1 + 1 + 2 + 1  # head (files follow, none here), cases opener, one line per case, closing
    head = json.loads(lines[0][: -len(',"files":{')] + "}")
    assert head == {"format": PINS_FORMAT, "version": PINS_VERSION, "fixtures_hash": "sha256:fixtures",
                    "fingerprint": to_json(FP)}
    assert lines[1] == '},"cases":{'
    lines = lines[1:]
    assert lines[1].startswith('"alpha":') and lines[2].startswith('"zeta":')  # sorted ids
    assert lines[-1] == "}}"
    assert json.loads(lines[2].split(":", 1)[1]) == {
        "hash": "sha256:abc", "label": "right", "channel": "stable", "chars": 38, "tokens": 12, "tokens_estimated": False,
        "ms": 400.0, "ms_p95": 410.5, "fingerprint": to_json(FP)}
    data = json.loads(text)
    assert data["version"] == 1 and data["format"] == "envelope-ci/pins" and set(data["cases"]) == {"alpha", "zeta"}


def test_roundtrip():
    assert parse_pins(render_pins(sample_pins()), "p.json") == sample_pins()
    empty = Pins("sha256:x", None, {})
    assert parse_pins(render_pins(empty), "p.json") == empty


def test_the_keys_added_since_round_trip_and_a_level_under_a_millisecond_reads_back():
    from msgspec.structs import replace

    pins = Pins("sha256:x", FP, {"a": replace(PIN, level_ms=0.0, passes=(2, 3), answer="sha256:untimed"),
                                 "b": replace(PIN, level_ms=412.0)})
    assert parse_pins(render_pins(pins), "p.json") == pins


def test_more_right_repeats_than_repeats_is_bad_input_on_the_pins_line():
    text = render_pins(Pins("sha256:x", FP, {"a": PIN})).replace('"label":"right"', '"label":"right","passes":[4,3]')
    with pytest.raises(UsageError) as caught:
        parse_pins(text, "p.json")
    assert "p.json:3: cases.a.passes: 4 right out of 3 repeats" in str(caught.value)


def test_parse_problems():
    with pytest.raises(UsageError) as info:
        parse_pins('{"format": "envelope-ci/pins",\n "version": 1,\n "cases": {,}}', "pins.json")
    (p,) = info.value.problems
    assert (p.file, p.line) == ("pins.json", 3) and "malformed JSON" in p.message
    with pytest.raises(UsageError) as info:
        parse_pins('{"cases": {}}', "pins.json")
    assert info.value.problems[0].field == "format"
    with pytest.raises(UsageError) as info:
        parse_pins(json.dumps({"format": PINS_FORMAT, "version": 99, "cases": {}}), "pins.json")
    assert info.value.problems[0].field == "version" and "99" in info.value.problems[0].message


def test_read_pins_missing_is_none(tmp_path):
    assert read_pins(tmp_path / "nope.json") is None


def test_example_pins_parse():
    pins = read_pins(EXAMPLES / "support-bot" / "envelope-pins.json")
    assert pins is not None and len(pins.cases) == 12 and pins.fingerprint.lane == "adjudication"


# -- who may write ---------------------------------------------------------------------------

RUN_FP = Fingerprint("adjudication", "unspecified", MODEL, 0.0, "1")


def test_write_refusal_rules():
    stored = Pins("h", FP, {})
    assert write_refusal(Lane.ADJUDICATION, False, RUN_FP, stored, False, []) is None
    assert write_refusal(Lane.ADJUDICATION, False, RUN_FP, None, False, []) is None
    assert write_refusal(Lane.ADJUDICATION, False, RUN_FP, Pins("h", None, {}), False, []) is None
    assert "CI" in write_refusal(Lane.ADJUDICATION, True, RUN_FP, stored, False, [])
    assert "smoke" in write_refusal(Lane.SMOKE, False, RUN_FP, stored, False, [])
    assert "2 case(s) got no gradeable envelope (a, b)" in write_refusal(Lane.ADJUDICATION, False, RUN_FP, stored, False, ["a", "b"])
    other = Fingerprint("adjudication", "unspecified", OTHER_MODEL, 0.0, "1")
    why = write_refusal(Lane.ADJUDICATION, False, other, stored, False, [])
    assert "--move-baseline" in why and OTHER_MODEL in why
    assert write_refusal(Lane.ADJUDICATION, False, other, stored, True, []) is None
    # the lane is not part of the comparison: a smoke-written stored fingerprint still matches
    assert write_refusal(Lane.ADJUDICATION, False, RUN_FP, Pins("h", Fingerprint("smoke", "unspecified", MODEL, 0.0, "1"), {}), False, []) is None
    # CI wins even with --move-baseline
    assert "CI" in write_refusal(Lane.ADJUDICATION, True, other, stored, True, [])


@pytest.mark.parametrize(
    "env",
    [{"CI": "true"}, {"GITHUB_ACTIONS": "true"}, {"CI": "TRUE"}, {"CI": "true", "GITHUB_ACTIONS": "false"}],
)
def test_write_pins_refused_in_ci(tmp_path, env):
    suite = make_suite(tmp_path, [{"id": "x", "prompt": "p", "completion": "ok"}])
    result = write_pins(suite, tmp_path / "out", env=env)
    assert result.code == 2
    assert "refusing to write pins in CI" in result.err
    assert "Traceback" not in result.err
    assert not (suite / "envelope-pins.json").exists()


def test_write_pins_allowed_when_ci_is_not_true(tmp_path):
    suite = make_suite(tmp_path, [{"id": "x", "prompt": "p", "completion": "ok"}, {"id": "y", "prompt": "p", "completion": "ok"}])
    result = write_pins(suite, tmp_path / "out", env={"CI": "false", "GITHUB_ACTIONS": ""})
    assert result.code == 0, result.err
    assert (suite / "envelope-pins.json").is_file()


def test_write_pins_refused_on_smoke(tmp_path):
    suite = make_suite(tmp_path, [{"id": "x", "prompt": "p", "completion": "ok"}])
    result = run_cli(["run", suite, "--out", tmp_path / "out", "--write-pins"])
    assert result.code == 2
    assert "only --lane adjudication may move the baseline" in result.err
    assert not (suite / "envelope-pins.json").exists()


def test_move_baseline_needs_write_pins(tmp_path):
    suite = make_suite(tmp_path, [{"id": "x", "prompt": "p", "completion": "ok"}])
    result = run_cli(["run", suite, "--out", tmp_path / "out", "--move-baseline"])
    assert result.code == 2 and "--move-baseline only makes sense with --write-pins" in result.err


def test_adjudication_writes_pins_and_a_rerun_passes(tmp_path):
    suite = pinned_gate_suite(tmp_path)
    pins_path = suite / "envelope-pins.json"
    text = pins_path.read_text("utf-8")
    files = read_pins(pins_path).files
    assert len(files) == 1  # the suite's one case file, by path and digest
    assert text.count("\n") == 1 + len(files) + 1 + 3 + 1  # head, one line per file, cases opener, one line per case, closing
    pins = read_pins(pins_path)
    assert pins.fingerprint == Fingerprint("adjudication", "unspecified", MODEL, 0.0, "1")
    assert {cid: (p.label, p.channel) for cid, p in pins.cases.items()} == {
        "s-right": ("right", "stable"), "s-wrong-1": ("wrong", "correctness"), "s-wrong-2": ("wrong", "correctness")}
    assert pins.cases["s-right"].ms == 400.0 and pins.cases["s-right"].tokens == 12 and not pins.cases["s-right"].tokens_estimated
    hashed = run_cli(["hash", suite])
    assert hashed.out.strip() == pins.fixtures_hash
    # a smoke re-run (the default lane) is judged against the adjudication pins
    result, report = run_report(suite, tmp_path / "rerun")
    assert result.code == 0, result.out
    assert report["verdict"] == "pass" and report["fixtures"]["changed"] is False
    assert report["lanes"]["matched_fingerprints"] == 3 and report["lanes"]["fingerprint_mismatches"] == 0
    assert report["known_failures"] == ["s-wrong-1", "s-wrong-2"]
    # writing again with a matching fingerprint is allowed and byte-identical
    again = write_pins(suite, tmp_path / "again")
    assert again.code == 0 and "wrote pins" in again.out
    assert pins_path.read_text("utf-8") == text


def test_smoke_run_catches_a_regression_against_adjudication_pins(tmp_path):
    suite = pinned_gate_suite(tmp_path)
    replay = write_replay(tmp_path / "slow.jsonl", [("s-right", answer_envelope(elapsed_ms=900.0))])
    result, report = run_report(suite, tmp_path / "out", "--replay", replay, "--lane", "smoke")
    assert result.code == 1
    assert report["regressions"] == ["s-right"]
    assert report["fingerprint"]["lane"] == "smoke"


def test_fingerprint_mismatch_refuses_unless_move_baseline(tmp_path):
    suite = pinned_gate_suite(tmp_path)
    before = (suite / "envelope-pins.json").read_text("utf-8")
    replay = write_replay(tmp_path / "other.jsonl", [
        ("s-right", answer_envelope(model=OTHER_MODEL)),
        ("s-wrong-1", answer_envelope(WRONG_JSON, model=OTHER_MODEL)),
        ("s-wrong-2", answer_envelope(WRONG_JSON, model=OTHER_MODEL)),
    ])
    refused = write_pins(suite, tmp_path / "out", "--replay", str(replay))
    assert refused.code == 2
    assert "fingerprint" in refused.err and "--move-baseline" in refused.err and OTHER_MODEL in refused.err
    assert (suite / "envelope-pins.json").read_text("utf-8") == before
    moved = write_pins(suite, tmp_path / "out2", "--replay", str(replay), "--move-baseline")
    assert moved.code == 0, moved.err + moved.out
    pins = read_pins(suite / "envelope-pins.json")
    assert pins.fingerprint.model_id == OTHER_MODEL
    assert {cid: p.label for cid, p in pins.cases.items()} == {"s-right": "right", "s-wrong-1": "wrong", "s-wrong-2": "wrong"}
    assert {p.fingerprint.model_id for p in pins.cases.values()} == {OTHER_MODEL}


def test_endpoint_class_and_temperature_are_part_of_the_fingerprint(tmp_path):
    suite = pinned_gate_suite(tmp_path)
    for extra in (["--endpoint-class", "vllm-a100"], ["--temperature", "0.7"]):
        result = write_pins(suite, tmp_path / "out", *extra)
        assert result.code == 2 and "fingerprint" in result.err, extra


def test_run_with_drops_refuses_to_write_pins(tmp_path):
    suite = pinned_gate_suite(tmp_path)
    replay = write_replay(tmp_path / "drop.jsonl", [("s-wrong-2", transport_error("ConnectionResetError: [Errno 104] Connection reset by peer"))])
    result = write_pins(suite, tmp_path / "out", "--replay", str(replay))
    assert result.code == 2
    assert "1 case(s) got no gradeable envelope (s-wrong-2)" in result.err


def test_first_pins_need_no_stored_fingerprint(tmp_path):
    suite = make_suite(tmp_path, [{"id": "a", "prompt": "p", "completion": "ok"}, {"id": "b", "prompt": "p", "completion": "ok"}])
    result = write_pins(suite, tmp_path / "out")
    assert result.code == 0
    pins = read_pins(suite / "envelope-pins.json")
    assert pins.fingerprint.model_id is None  # offline completions name no model
    assert {p.tokens_estimated for p in pins.cases.values()} == {True}


def test_custom_pins_path(tmp_path):
    suite = make_suite(tmp_path, [{"id": "a", "prompt": "p", "completion": "ok"}, {"id": "b", "prompt": "p", "completion": "ok"}])
    pins_path = tmp_path / "elsewhere" / "pins.json"
    assert write_pins(suite, tmp_path / "out", "--pins", str(pins_path)).code == 0
    assert pins_path.is_file() and not (suite / "envelope-pins.json").exists()
    result, report = run_report(suite, tmp_path / "out2", "--pins", pins_path)
    assert result.code == 0 and report["fixtures"]["pinned_hash"] == report["fixtures"]["hash"]


# -- the fixture hash and fixtures_changed ---------------------------------------------------

SB = "support-bot"
SB_PINNED_HASH = json.loads((EXAMPLES / SB / "envelope-pins.json").read_text("utf-8"))["fixtures_hash"]


def test_hash_command_prints_the_pinned_hash(tmp_path):
    result = run_cli(["hash", EXAMPLES / SB])
    assert result.code == 0 and result.out == SB_PINNED_HASH + "\n"
    copy = copy_example(tmp_path, SB)
    assert run_cli(["hash", copy]).out.strip() == SB_PINNED_HASH  # the path does not enter the hash


def test_unchanged_copy_is_not_changed(tmp_path):
    result, report = run_report(copy_example(tmp_path, SB), tmp_path / "out")
    assert result.code == 0
    assert report["fixtures"] == {"hash": SB_PINNED_HASH, "pinned_hash": SB_PINNED_HASH, "changed": False, "added": [], "removed": [], "modified": [], "files_changed": []}


def test_editing_a_case_is_modified(tmp_path):
    suite = copy_example(tmp_path, SB)
    path = suite / "easy.yaml"
    text = path.read_text("utf-8")
    assert text.count("max_chars: 160") == 1
    path.write_text(text.replace("max_chars: 160", "max_chars: 170"), "utf-8")
    result, report = run_report(suite, tmp_path / "out")
    assert result.code == 1
    assert report["verdict"] == "fail" and "fixtures_changed" in report["alerts"]
    f = report["fixtures"]
    assert (f["changed"], f["added"], f["removed"], f["modified"]) == (True, [], [], ["greeting-no-apology-loop"])
    assert f["hash"] != SB_PINNED_HASH and f["pinned_hash"] == SB_PINNED_HASH
    assert run_cli(["hash", suite]).out.strip() == f["hash"]


def test_reformatting_a_file_changes_the_hash_but_lists_no_case(tmp_path):
    suite = copy_example(tmp_path, SB)
    path = suite / "easy.yaml"
    path.write_text("# a comment\n" + path.read_text("utf-8"), "utf-8")
    _, report = run_report(suite, tmp_path / "out")
    f = report["fixtures"]
    assert f["changed"] is True and (f["added"], f["removed"], f["modified"]) == ([], [], [])


def test_adding_a_case_is_added(tmp_path):
    suite = copy_example(tmp_path, SB)
    make_suite(tmp_path, files={"more/new.jsonl": '{"id": "brand-new", "stratum": "easy", "prompt": "hi", "completion": "Northwind"}\n'}, name=SB)
    result, report = run_report(suite, tmp_path / "out")
    assert result.code == 1
    assert report["fixtures"]["added"] == ["brand-new"]
    assert (report["fixtures"]["removed"], report["fixtures"]["modified"]) == ([], [])
    assert [a for a in report["alert_details"] if a["code"] == "fixtures_changed"][0]["message"].count("brand-new") == 1


def test_deleting_a_case_is_removed(tmp_path):
    suite = copy_example(tmp_path, SB)
    path = suite / "stretch.yaml"
    text = path.read_text("utf-8")
    start = text.index("- id: policy-edge-final-sale")
    end = text.index("- id: intent-mixed-complaint-refund")
    path.write_text(text[:start] + text[end:], "utf-8")
    result, report = run_report(suite, tmp_path / "out")
    assert result.code == 1
    assert report["fixtures"]["removed"] == ["policy-edge-final-sale"]
    assert (report["fixtures"]["added"], report["fixtures"]["modified"]) == ([], [])


def test_config_change_changes_the_hash_with_no_case_listed(tmp_path):
    suite = copy_example(tmp_path, SB)
    (suite / "envelope-ci.yaml").write_text("size_slack: 1.1\n", "utf-8")
    result, report = run_report(suite, tmp_path / "out")
    assert result.code == 1
    f = report["fixtures"]
    assert f["changed"] is True and (f["added"], f["removed"], f["modified"]) == ([], [], [])
    assert report["alerts"] == ["fixtures_changed"]
    assert "non-case file" in report["alert_details"][0]["message"]


def test_pins_file_does_not_enter_the_hash(tmp_path):
    suite = copy_example(tmp_path, SB)
    pins_path = suite / "envelope-pins.json"
    data = json.loads(pins_path.read_text("utf-8"))
    data["cases"]["intent-refund"]["ms"] = 1.0
    pins_path.write_text(json.dumps(data, indent=4), "utf-8")
    assert run_cli(["hash", suite]).out.strip() == SB_PINNED_HASH
    _, report = run_report(suite, tmp_path / "out")
    assert report["fixtures"]["changed"] is False


REFUND = '{"intent": "refund", "confidence": 0.97}'


def test_replay_file_does_not_enter_the_hash(tmp_path):
    suite = copy_example(tmp_path, SB)
    outside = write_replay(tmp_path / "rec.jsonl", [("intent-refund", answer_envelope(REFUND, elapsed_ms=301.5, tokens=14))])
    result, report = run_report(suite, tmp_path / "out", "--replay", outside)
    assert result.code == 0, result.out
    assert report["fixtures"]["hash"] == SB_PINNED_HASH and report["fixtures"]["changed"] is False
    inside = write_replay(suite / "rec.jsonl", [("intent-refund", answer_envelope(REFUND, elapsed_ms=301.5, tokens=14))])
    result, report = run_report(suite, tmp_path / "out2", "--replay", inside)
    assert result.code == 0, result.out + result.err
    assert report["fixtures"]["hash"] == SB_PINNED_HASH and report["fixtures"]["changed"] is False


def test_rewriting_pins_clears_fixtures_changed(tmp_path):
    suite = copy_example(tmp_path, SB)
    path = suite / "easy.yaml"
    path.write_text(path.read_text("utf-8").replace("max_chars: 160", "max_chars: 170"), "utf-8")
    assert run_report(suite, tmp_path / "out")[0].code == 1
    assert write_pins(suite, tmp_path / "pins-out").code == 0
    result, report = run_report(suite, tmp_path / "out2")
    assert result.code == 0 and report["fixtures"]["changed"] is False


def test_no_pins_means_size_and_time_not_judged_and_the_report_says_so(tmp_path):
    suite = make_suite(tmp_path, [
        {"id": "a", "prompt": "p", "completion": "ok", "stratum": "easy"},
        {"id": "b", "prompt": "p", "completion": "ok", "stratum": "easy"},
    ])
    result, report = run_report(suite, tmp_path / "out")
    assert result.code == 0
    assert any("no pins at" in n and "size and time are not judged" in n for n in report["notes"])
    assert report["fixtures"]["pinned_hash"] is None and report["lanes"]["unpinned"] == 2
    assert {c["outcome"] for c in report["cases"]} == {"new"}
    assert "no pins at" in result.out
    md = (tmp_path / "out" / "report.md").read_text("utf-8")
    assert "size and time are not judged" in md and "no pins yet" in md


def test_broken_pins_file_is_bad_input(tmp_path):
    suite = make_suite(tmp_path, [{"id": "a", "prompt": "p", "completion": "ok"}], files={"envelope-pins.json": "{not json"})
    result = run_cli(["run", suite, "--out", tmp_path / "out"])
    assert result.code == 2 and "envelope-pins.json:1" in result.err and "Traceback" not in result.err
    assert isinstance(suite, Path)


def test_pins_elsewhere_with_a_pins_file_left_in_the_fixtures(tmp_path):
    suite = copy_example(tmp_path, SB)
    elsewhere = tmp_path / "pins.json"
    elsewhere.write_text((suite / "envelope-pins.json").read_text("utf-8"), "utf-8")
    result, report = run_report(suite, tmp_path / "out", "--pins", elsewhere)
    assert result.code != 2, result.err  # the left-over file is not read as cases
    assert report["lanes"]["matched_fingerprints"] == 12
    (suite / "envelope-pins.json").unlink()
    result, report = run_report(suite, tmp_path / "out2", "--pins", elsewhere)
    assert result.code == 0 and report["fixtures"]["changed"] is False


@pytest.mark.parametrize(
    "old,new,field",
    [
        ('"ms":302.0', '"ms":"302.0"', "cases.intent-refund.ms"),
        ('"chars":40,', '"chars":-1,', "cases.intent-refund.chars"),
        ('"label":"right","ms":302.0', '"label":"correct","ms":302.0', "cases.intent-refund.label"),
    ],
)
def test_hand_edited_pins_with_bad_types_are_bad_input(tmp_path, old, new, field):
    suite = copy_example(tmp_path, SB)
    path = suite / "envelope-pins.json"
    text = path.read_text("utf-8")
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new), "utf-8")
    line = next(i for i, row in enumerate(path.read_text("utf-8").splitlines(), 1) if row.startswith('"intent-refund":'))
    result = run_cli(["run", suite, "--out", tmp_path / "out"])
    assert result.code == 2 and "Traceback" not in result.err
    assert result.err_lines == [result.err_lines[0]] and result.err_lines[0].startswith(f"error: {path.as_posix()}:{line}: {field}: ")


def test_bad_fingerprint_in_pins_is_bad_input(tmp_path):
    with pytest.raises(UsageError) as info:
        parse_pins(json.dumps({"format": PINS_FORMAT, "version": 1, "fingerprint": {"temperature": "hot"}, "cases": {}}), "p.json")
    (p,) = info.value.problems
    assert (p.field, p.line) == ("fingerprint.temperature", None) and "'hot' is not of type 'number'" in p.message


def test_ci_set_with_monkeypatch_reaches_the_cli(tmp_path, clean_env, capsys):
    """The CLI reads CI itself (not only through run_cli): set it the way a CI runner does."""
    from envelope_ci.cli import main

    suite = make_suite(tmp_path, [{"id": "x", "prompt": "p", "completion": "ok"}])
    clean_env.setenv("GITHUB_ACTIONS", "true")
    code = main(["run", str(suite), "--out", str(tmp_path / "out"), "--lane", "adjudication", "--write-pins"])
    assert code == 2 and "refusing to write pins in CI" in capsys.readouterr().err
    clean_env.delenv("GITHUB_ACTIONS")
    code = main(["run", str(suite), "--out", str(tmp_path / "out"), "--lane", "adjudication", "--write-pins"])
    assert code == 0 and (suite / "envelope-pins.json").is_file()


def test_non_utf8_pins_file_is_bad_input(tmp_path):
    suite = make_suite(tmp_path, [{"id": "x", "prompt": "p", "completion": "ok"}], files={"envelope-pins.json": b"\xff\xfe{}"})
    result = run_cli(["run", suite, "--out", tmp_path / "out"])
    assert result.code == 2 and "Traceback" not in result.err
    assert result.err_lines == [f"error: {(suite / 'envelope-pins.json').as_posix()}:1: not UTF-8 text (byte 0xff at offset 0)"]
