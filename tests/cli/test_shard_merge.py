"""``run --shard I/N`` and ``envelope-ci merge``: the merged reports are the unsharded run's, byte for byte; the partition is
stable and balanced; every reason two reports are not shards of one run is refused."""
from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from envelope_ci import __version__
from envelope_ci.report.model import Report, report_schema
from envelope_ci.shard import parse_shard, shard_numbers
from tests.support.fake_openai import Behaviour, FakeOpenAI
from tests.support.suites import (
    REPO_ROOT,
    RIGHT_JSON,
    WRONG_JSON,
    answer_case,
    answer_envelope,
    make_suite,
    run_cli,
    run_report,
    transport_error,
    write_pins,
    write_replay,
)

pytestmark = pytest.mark.usefixtures("clean_env")

REPORT_FILES = ("report.json", "report.md", "junit.xml")


def base_cases() -> list[dict]:
    """Every stratum, unstratified cases too: a suite that passes when nothing changes (stretch 1/3 is under its watermark)."""
    return [
        *(answer_case(f"e-{i}", stratum="easy") for i in range(1, 6)),
        *(answer_case(f"m-{i}", stratum="medium") for i in range(1, 6)),
        answer_case("s-1", stratum="stretch"),
        answer_case("s-2", WRONG_JSON, stratum="stretch"),
        answer_case("s-3", WRONG_JSON, stratum="stretch"),
        answer_case("u-1", stratum=None),
        answer_case("u-2", stratum=None),
    ]


def pinned_suite(tmp_path: Path) -> Path:
    suite = make_suite(tmp_path, base_cases())
    assert write_pins(suite, tmp_path / "pins-out").code == 0
    return suite


def busy_pr(tmp_path: Path) -> tuple[Path, list[str]]:
    """A PR that does everything at once, and the run arguments that grade it.

    The base branch pinned the suite all right; the PR's own pins took m-3 as wrong (a lowered
    baseline); then it edited e-5 (now sent at temperature 0.5), dropped u-2, added n-1, and its
    replay brings all six labels: a regression that breaks the easy floor, a schema miss, a cut
    answer, a drop, an empty, a lost repeat, a slow case, another model's answer.
    """
    suite = pinned_suite(tmp_path)
    base = tmp_path / "base-pins.json"
    shutil.copy(suite / "envelope-pins.json", base)
    cases = base_cases()
    cases[7] = answer_case("m-3", WRONG_JSON, stratum="medium")
    make_suite(tmp_path, cases)
    assert write_pins(suite, tmp_path / "pins-out").code == 1  # m-3 breaks the medium floor; the pins are written all the same
    cases[4] = {**answer_case("e-5", stratum="easy"), "prompt": "Edited prompt.", "temperature": 0.5}
    cases = [c for c in cases if c["id"] != "u-2"] + [answer_case("n-1", stratum="medium")]
    make_suite(tmp_path, cases)
    replay = write_replay(tmp_path / "pr.jsonl", [
        ("e-1", answer_envelope(WRONG_JSON)),
        ("e-2", answer_envelope('{"answer": "forty-two"}')),
        ("e-3", answer_envelope(elapsed_ms=900.0)),
        ("m-1", answer_envelope('{"answer": 4', finish_reason="length")),
        ("m-2", transport_error()),
        ("m-4", answer_envelope()),
        ("m-4", transport_error()),
        ("s-1", answer_envelope("")),
        ("s-3", answer_envelope(RIGHT_JSON, model="another-model-2025")),
    ])
    return suite, ["--replay", str(replay), "--base-pins", str(base)]


def run_whole_and_shards(tmp_path: Path, suite: Path, count: int, *args: str) -> tuple[int, list[Path], list[int]]:
    """The unsharded run's exit code, and each shard's report.json and exit code."""
    whole, _ = run_report(suite, tmp_path / "whole", *args)
    reports, codes = [], []
    for i in range(1, count + 1):
        result, _ = run_report(suite, tmp_path / f"shard-{i}", "--shard", f"{i}/{count}", *args)
        assert result.code in (1, 3), result.err
        reports.append(tmp_path / f"shard-{i}" / "report.json")
        codes.append(result.code)
    return whole.code, reports, codes


def merge(tmp_path: Path, reports: list[Path], out: str = "merged"):
    return run_cli(["merge", *reports, "--out", tmp_path / out])


@pytest.mark.parametrize("count", [2, 3, 5])
def test_merged_shards_are_the_unsharded_run_byte_for_byte(tmp_path, count):
    suite, args = busy_pr(tmp_path)
    whole_code, reports, _ = run_whole_and_shards(tmp_path, suite, count, *args)
    merged = merge(tmp_path, list(reversed(reports)))
    assert merged.code == whole_code == 1, merged.err
    for name in REPORT_FILES:
        assert (tmp_path / "merged" / name).read_text("utf-8") == (tmp_path / "whole" / name).read_text("utf-8"), name
    report = json.loads((tmp_path / "merged" / "report.json").read_text("utf-8"))
    # The suite exercises what the merge must get right, judged on the whole.
    assert {"easy_regression", "medium_regression", "fixtures_changed", "fingerprint_changed"} <= set(report["alerts"])
    assert all(report["summary"]["counts"].values()) and report["regressions"] and report["base"]["downgraded"] == ["m-3"]
    assert any(r["fixture"] == "removed" for r in report["base"]["diff"]) and any("m-4: repeat 2 of 2" in b for b in report["blockers"])


def test_a_merge_loads_none_of_what_only_a_run_needs():
    """The merge's modules leave out the fixture loader and its schemas, YAML and the HTTP client: 0.3 s of a merge's start."""
    code = ("import sys, envelope_ci.cli, envelope_ci.merging; "
            "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in ('jsonschema', 'yaml', 'requests', 'urllib3') "
            "or m.startswith(('envelope_ci.sources.cases', 'envelope_ci.sources.pins', 'envelope_ci.grading', 'envelope_ci.api')))))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
                          capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split() == [], done.stdout


@pytest.mark.parametrize(("scenario", "code"), [("pass", 0), ("inconclusive", 3)])
def test_the_merge_exits_as_the_unsharded_run_and_no_shard_passes_alone(tmp_path, scenario, code):
    suite = pinned_suite(tmp_path)
    args = [] if scenario == "pass" else ["--replay", str(write_replay(tmp_path / "r.jsonl", [("s-2", transport_error())]))]
    whole_code, reports, shard_codes = run_whole_and_shards(tmp_path, suite, 3, *args)
    merged = merge(tmp_path, reports)
    assert merged.code == whole_code == code and shard_codes == [3, 3, 3]
    assert (tmp_path / "merged" / "report.json").read_bytes() == (tmp_path / "whole" / "report.json").read_bytes()


def test_a_regression_fails_its_shard_at_once(tmp_path):
    suite = pinned_suite(tmp_path)
    replay = write_replay(tmp_path / "r.jsonl", [("e-1", answer_envelope(WRONG_JSON))])
    numbers = dict(zip([c["id"] for c in base_cases()], shard_numbers([c["id"] for c in base_cases()], 3), strict=True))
    result, report = run_report(suite, tmp_path / "out", "--shard", f"{numbers['e-1']}/3", "--replay", replay)
    assert result.code == 1 and report["regressions"] == ["e-1"]
    assert report["alerts"] == [], "a shard judges no strata: the easy floor is the merge's to break"


def test_a_shard_report_is_marked_validates_and_round_trips(tmp_path):
    suite = pinned_suite(tmp_path)
    result, report = run_report(suite, tmp_path / "out", "--shard", "2/3")
    assert result.code == 3 and any(b.startswith("shard 2/3: graded 5 of 15 case(s)") for b in report["blockers"])
    shard = report["shard"]
    assert (shard["index"], shard["count"], shard["suite_cases"]) == (2, 3, 15)
    assert shard["tool_version"] == __version__, "the merge refuses shards whose tool versions differ: the mark must name the version that ran"
    assert shard["fixtures_hash"] == report["fixtures"]["hash"] and shard["pins_digest"].startswith("sha256:")
    assert shard["fingerprint"]["model_id"] is None and shard["model_ids"] == ["gpt-4o-mini-2024-07-18"]
    assert sorted(shard["cases"]) == sorted(row["id"] for row in report["cases"])
    jsonschema.Draft202012Validator(report_schema()).validate(report)
    assert Report.from_json(report).to_json() == report
    whole, whole_report = run_report(suite, tmp_path / "whole")
    assert "shard" not in whole_report


# -- the partition ------------------------------------------------------------------------------


def test_shards_are_balanced_within_one_case_and_depend_on_the_ids_alone():
    rng = random.Random(5)
    for n in (1, 2, 7, 100, 1001):
        ids = [f"case-{rng.random()}" for _ in range(n)]
        for count in (1, 2, 3, 4, 7):
            numbers = shard_numbers(ids, count)
            sizes = [numbers.count(k) for k in range(1, count + 1)]
            assert max(sizes) - min(sizes) <= 1 and sum(sizes) == n
            shuffled = ids[::-1]
            assert dict(zip(shuffled, shard_numbers(shuffled, count), strict=True)) == dict(zip(ids, numbers, strict=True))


def test_adding_a_case_moves_at_most_one_case_per_cut_point():
    """Only the added case and, at most, one case at each of the N - 1 cuts change shard, whatever the suite's size."""
    rng = random.Random(11)
    for count in (2, 3, 4, 8):
        for n in (10, 300, 2000):
            ids = [f"id-{rng.getrandbits(64):x}" for _ in range(n)]
            before = dict(zip(ids, shard_numbers(ids, count), strict=True))
            for _ in range(20):
                new = f"new-{rng.getrandbits(64):x}"
                after = dict(zip([*ids, new], shard_numbers([*ids, new], count), strict=True))
                moved = [i for i in ids if after[i] != before[i]]
                assert len(moved) <= count - 1


def test_the_suite_shards_add_up_to_the_suite_and_a_new_case_moves_little(tmp_path):
    suite = pinned_suite(tmp_path)
    shards = [run_report(suite, tmp_path / f"s{i}", "--shard", f"{i}/3")[1] for i in (1, 2, 3)]
    ids = [[row["id"] for row in r["cases"]] for r in shards]
    assert sorted(sum(ids, [])) == sorted(c["id"] for c in base_cases()) and [len(x) for x in ids] == [5, 5, 5]
    make_suite(tmp_path, [*base_cases(), answer_case("added", stratum="easy")])
    again = [[row["id"] for row in run_report(suite, tmp_path / f"t{i}", "--shard", f"{i}/3")[1]["cases"]] for i in (1, 2, 3)]
    moved = [cid for k in range(3) for cid in again[k] if cid != "added" and cid not in ids[k]]
    assert len(moved) <= 2 and sum("added" in x for x in again) == 1


@pytest.mark.parametrize("text", ["0/3", "4/3", "3", "1/0", "a/b", "1/3/5", ""])
def test_a_bad_shard_is_bad_usage(tmp_path, text):
    result = run_cli(["run", make_suite(tmp_path, base_cases()), "--out", tmp_path / "out", "--shard", text])
    assert result.code == 2 and "--shard" in result.err and not (tmp_path / "out").exists()
    with pytest.raises(ValueError):
        parse_shard(text)


@pytest.mark.parametrize("flag", [["--filter", "e-*"], ["--lane", "adjudication", "--write-pins"]])
def test_a_shard_is_never_a_filtered_run_nor_writes_pins(tmp_path, flag):
    suite = pinned_suite(tmp_path)
    before = (suite / "envelope-pins.json").read_bytes()
    result = run_cli(["run", suite, "--out", tmp_path / "out", "--shard", "1/2", *flag])
    assert result.code == 2 and "--shard cannot be used with" in result.err
    assert (suite / "envelope-pins.json").read_bytes() == before


def test_live_shards_record_their_own_cases_and_merge(tmp_path):
    suite = make_suite(tmp_path, [{"id": f"c-{i}", "prompt": f"[[c-{i}]]", "expect_fragment": "Hello", "stratum": "easy"} for i in range(6)])
    recorded: list[set[str]] = []
    with FakeOpenAI(Behaviour.ok("Hello there")) as srv:
        for i in (1, 2):
            result, report = run_report(suite, tmp_path / f"s{i}", "--base-url", srv.url, "--model", "m", "--shard", f"{i}/2",
                                        "--record", tmp_path / f"rec-{i}.jsonl")
            assert result.code == 3 and report["run"]["mode"] == "live"
            lines = (tmp_path / f"rec-{i}.jsonl").read_text("utf-8").splitlines()
            recorded.append({json.loads(line)["id"] for line in lines})
            assert recorded[-1] == {row["id"] for row in report["cases"]}
        assert all(srv.attempts(f"c-{i}") == 1 for i in range(6))
        whole, whole_report = run_report(suite, tmp_path / "whole", "--base-url", srv.url, "--model", "m")
    assert recorded[0].isdisjoint(recorded[1]) and len(recorded[0] | recorded[1]) == 6
    merged = merge(tmp_path, [tmp_path / "s1" / "report.json", tmp_path / "s2" / "report.json"])
    assert merged.code == whole.code == 0, merged.err + merged.out
    merged_report = json.loads((tmp_path / "merged" / "report.json").read_text("utf-8"))
    assert without_timing(merged_report) == without_timing(whole_report)


def without_timing(report: dict[str, Any]) -> dict[str, Any]:
    """A live report.json apart from what the run measured of time: what a live merge must agree on with the unsharded run.

    That is each case's times and the level they were judged at (each live shard is a batch of its own), the
    latency shift and its notes, and ``live`` (the pacing of each process, which the merge leaves out by design).
    """
    timed = ("ms", "ms_p95", "ttft_ms", "level_ms")
    rows = [{key: value for key, value in row.items() if key not in timed} for row in report["cases"]]
    notes = [n for n in report["notes"] if "latency" not in n]
    return {**{key: value for key, value in report.items() if key not in ("live", "latency")}, "cases": rows,
            "notes": notes}


# -- what the merge refuses ---------------------------------------------------------------------


@pytest.fixture
def three_shards(tmp_path) -> tuple[Path, list[Path]]:
    suite = pinned_suite(tmp_path)
    return suite, run_whole_and_shards(tmp_path, suite, 3)[1]


def refused(tmp_path: Path, reports: list[Path], *expected: str) -> str:
    result = merge(tmp_path, reports)
    assert result.code == 2, result.out
    for words in expected:
        assert words in result.err, result.err
    assert not (tmp_path / "merged").exists()
    return result.err


def edited(path: Path, edit) -> Path:
    data = json.loads(path.read_text("utf-8"))
    edit(data)
    out = path.with_name("edited.json")
    out.write_text(json.dumps(data), "utf-8")
    return out


def test_a_missing_shard_is_refused(tmp_path, three_shards):
    _, reports = three_shards
    refused(tmp_path, reports[:2], "shard 3/3 missing", "got 1/3, 2/3")


def test_a_shard_given_twice_is_refused(tmp_path, three_shards):
    _, reports = three_shards
    copy = tmp_path / "copy.json"
    shutil.copy(reports[1], copy)
    refused(tmp_path, [*reports, copy], "shard 2/3 given 2 times")


def test_a_case_in_two_shards_is_refused(tmp_path, three_shards):
    _, reports = three_shards

    def steal(data):
        other = json.loads(reports[0].read_text("utf-8"))
        row = other["cases"][0]
        data["cases"].append(row)
        data["shard"]["cases"][row["id"]] = other["shard"]["cases"][row["id"]]

    refused(tmp_path, [reports[0], edited(reports[1], steal), reports[2]], "1 case(s) are in more than one shard's report")


@pytest.mark.parametrize(("what", "edit"), [
    ("tool version", lambda d: d["shard"].update(tool_version="0.0.9")),
    ("shard count", lambda d: d["shard"].update(count=4)),
])
def test_marks_that_differ_are_refused(tmp_path, three_shards, what, edit):
    _, reports = three_shards
    refused(tmp_path, [reports[0], edited(reports[1], edit), reports[2]], f"differ in {what}", "not shards of one run")


def test_a_row_without_its_place_or_a_place_without_its_row_is_refused(tmp_path, three_shards):
    _, reports = three_shards
    renamed = edited(reports[0], lambda data: data["cases"][0].update(id="not-in-the-suite"))
    refused(tmp_path, [renamed, *reports[1:]], "case 'not-in-the-suite' has a row but no place in the shard's \"cases\"")
    dropped = edited(reports[1], lambda data: data["cases"].pop())
    refused(tmp_path, [reports[0], dropped, reports[2]], "a row is missing from a report")


@pytest.mark.parametrize(("field", "value", "words"), [
    ("position", 1.0, "Expected `int`, got `float` - at `$.shard.cases[...].position`"),
    ("temperature", "hot", "Expected `float | null`, got `str` - at `$.shard.cases[...].temperature`"),
    ("repeats", ["right", "maybe"], "Invalid enum value 'maybe' - at `$.shard.cases[...].repeats[1]`"),
])
def test_a_case_place_of_the_wrong_type_is_refused(tmp_path, three_shards, field, value, words):
    _, reports = three_shards
    first = next(iter(json.loads(reports[0].read_text("utf-8"))["shard"]["cases"]))
    bad = edited(reports[0], lambda data: data["shard"]["cases"][first].update({field: value}))
    refused(tmp_path, [bad, *reports[1:]], "not a readable envelope-ci report.json", words)


def test_a_merge_written_over_a_shards_own_report_is_the_whole_runs(tmp_path):
    """``--out`` a shard's own directory: the shards are read before their reports are written over."""
    suite, args = busy_pr(tmp_path)
    _, reports, _ = run_whole_and_shards(tmp_path, suite, 3, *args)
    assert run_cli(["merge", *reports, "--out", reports[0].parent]).code == 1
    for name in REPORT_FILES:
        assert (reports[0].parent / name).read_text("utf-8") == (tmp_path / "whole" / name).read_text("utf-8"), name


def test_other_fixtures_are_refused(tmp_path, three_shards):
    suite, reports = three_shards
    (suite / "notes.txt").write_text("a file in the fixtures changes their hash", "utf-8")
    run_report(suite, tmp_path / "late", "--shard", "3/3")
    refused(tmp_path, [*reports[:2], tmp_path / "late" / "report.json"], "differ in fixtures hash")


def test_other_pins_are_refused(tmp_path, three_shards):
    suite, reports = three_shards
    pins = json.loads((suite / "envelope-pins.json").read_text("utf-8"))
    pins["cases"]["e-1"]["ms"] = 1.0
    (tmp_path / "other-pins.json").write_text(json.dumps(pins), "utf-8")
    run_report(suite, tmp_path / "late", "--shard", "3/3", "--pins", tmp_path / "other-pins.json")
    refused(tmp_path, [*reports[:2], tmp_path / "late" / "report.json"], "differ in pins")


def test_other_base_pins_are_refused(tmp_path, three_shards):
    suite, reports = three_shards
    run_report(suite, tmp_path / "late", "--shard", "3/3", "--base-pins", suite / "envelope-pins.json")
    refused(tmp_path, [*reports[:2], tmp_path / "late" / "report.json"], "differ in base branch pins")


def test_another_fingerprint_is_refused(tmp_path, three_shards):
    suite, reports = three_shards
    run_report(suite, tmp_path / "late", "--shard", "3/3", "--endpoint-class", "vllm-a100")
    refused(tmp_path, [*reports[:2], tmp_path / "late" / "report.json"], "differ in fingerprint")


def test_a_report_that_is_not_a_shard_is_refused(tmp_path, three_shards):
    _, reports = three_shards
    refused(tmp_path, [*reports, tmp_path / "whole" / "report.json"], "not a shard's report")
    (tmp_path / "broken.json").write_text("{", "utf-8")
    refused(tmp_path, [*reports, tmp_path / "broken.json"], "not a readable envelope-ci report.json")


# -- the Action: mode shard, then mode merge ----------------------------------------------------


def test_action_shards_publish_nothing_and_the_merge_comments_once_as_a_run_would(tmp_path, stub):
    from tests.action.test_entrypoint import PR, make_pr_repo, planted_regression, run_action, writes

    repo = make_pr_repo(tmp_path, head=planted_regression)
    replay = {"replay": "recordings/pr.jsonl"}
    whole = run_action(repo, stub, inputs={**replay, "comment": "false"})
    whole_files = {name: (whole.out_dir / name).read_text("utf-8") for name in (*REPORT_FILES, "comment.md")}
    for i in (1, 2, 3):
        shard = run_action(repo, stub, inputs={**replay, "mode": "shard", "shard": f"{i}/3"})
        assert shard.code == 0, shard.stdout + shard.stderr
        assert shard.outputs["exit-code"] in ("1", "3") and shard.outputs["report-json"] == ".envelope-ci/evals/report.json"
        assert not shard.errors and not shard.warnings and f"envelope-ci shard {i}/3 of evals" in shard.summary
        assert not (shard.out_dir / "comment.md").exists()
        (repo.workspace / "envelope-shards" / str(i)).mkdir(parents=True)
        shutil.copy(shard.out_dir / "report.json", repo.workspace / "envelope-shards" / str(i) / "report.json")
    assert writes(stub) == [], "a shard never comments"
    merged = run_action(repo, stub, inputs={"mode": "merge", "reports": "envelope-shards/*/report.json"})
    assert merged.code == whole.code == 1 and merged.outputs["regressions"] == whole.outputs["regressions"] == "1"
    for name, text in whole_files.items():
        assert (merged.out_dir / name).read_text("utf-8") == text, name
    [comment] = stub.comments(PR)
    assert comment["body"].endswith(whole_files["comment.md"]) and merged.errors


@pytest.mark.parametrize(("inputs", "words"), [
    ({"mode": "sharded"}, "input 'mode' must be run, shard or merge"),
    ({"mode": "shard"}, "input 'shard' (I/N, e.g. 2/4) is needed with mode: shard"),
    ({"mode": "shard", "shard": "5/4"}, "input 'shard': '5/4': I must be from 1 to N"),
    ({"shard": "1/4"}, "input 'shard' is read only with mode: shard"),
    ({"mode": "merge"}, "input 'reports'"),
])
def test_action_mode_inputs_are_checked(inputs, words):
    from envelope_ci.action.inputs import InputError, read_inputs

    with pytest.raises(InputError) as caught:
        read_inputs({f"INPUT_{k.upper()}": v for k, v in inputs.items()})
    assert words in str(caught.value)


def test_action_merge_of_nothing_is_bad_input_and_says_so(tmp_path, stub):
    from tests.action.test_entrypoint import PR, make_pr_repo, run_action

    inputs = {"mode": "merge", "reports": "envelope-shards/*/report.json"}
    merged = run_action(make_pr_repo(tmp_path), stub, inputs=inputs)
    assert merged.code == 2 and merged.outputs["exit-code"] == "2"
    assert "no file matches 'envelope-shards/*/report.json'" in stub.comments(PR)[0]["body"]
