"""``envelope-ci merge`` refuses a shard report it cannot trust, naming the file, and keeps a stopped shard's blocker."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.suites import case, make_suite, run_cli, run_module, run_report


def _shards(tmp_path: Path, count: int = 2) -> list[Path]:
    """The report.json of each shard of a small offline suite."""
    suite = make_suite(tmp_path, [case(f"c{i}", completion="ok", **{"assert": [{"type": "contains", "value": "ok"}]})
                                  for i in range(6)])
    paths = []
    for i in range(1, count + 1):
        result, _ = run_report(suite, tmp_path / f"shard-{i}", "--shard", f"{i}/{count}")
        assert result.code in (0, 3), result.err
        paths.append(tmp_path / f"shard-{i}" / "report.json")
    return paths


def _edit(path: Path, change) -> None:  # type: ignore[no-untyped-def]
    data = json.loads(path.read_text("utf-8"))
    change(data)
    path.write_text(json.dumps(data), "utf-8")


def test_the_untouched_shards_merge(tmp_path):
    result = run_cli(["merge", *_shards(tmp_path), "--out", tmp_path / "merged"])
    assert result.code == 0, result.err


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_a_number_json_does_not_have_is_refused_naming_the_file(tmp_path, literal):
    first, second = _shards(tmp_path)
    text = first.read_text("utf-8").replace('"temperature": 0.0', f'"temperature": {literal}', 1)
    assert literal in text
    first.write_text(text, "utf-8")
    result = run_cli(["merge", first, second, "--out", tmp_path / "merged"])
    assert result.code == 2 and first.as_posix() in result.err and "not a readable envelope-ci report.json" in result.err


@pytest.mark.parametrize("field, value, words", [
    ("count", 10**9, "shard(s) of a suite of"),
    ("index", 7, "is not a shard of"),
    ("replayed", 10**6, "case(s) replayed of the shard's"),
])
def test_a_count_beyond_what_the_report_holds_is_refused_at_once(tmp_path, field, value, words):
    first, second = _shards(tmp_path)
    _edit(first, lambda data: data["shard"].__setitem__(field, value))
    result = run_module(["merge", first, second, "--out", tmp_path / "merged"])  # a child: a hang or a blow-up fails the test
    assert result.code == 2 and first.as_posix() in result.err and words in result.err, result.err


def test_a_suite_size_beyond_the_rows_given_is_refused_without_making_room_for_it(tmp_path):
    shards = _shards(tmp_path)
    for path in shards:
        _edit(path, lambda data: data["shard"].__setitem__("suite_cases", 10**12))
    result = run_module(["merge", *shards, "--out", tmp_path / "merged"])
    assert result.code == 2 and "hold 6 of the suite's 1000000000000 case(s)" in result.err, result.err


def test_a_deeply_nested_shard_report_is_refused_not_a_crash(tmp_path):
    first, second = _shards(tmp_path)
    text = first.read_text("utf-8").replace('"remarks": []', '"remarks": [' + "[" * 5000 + "]" * 5000 + "]", 1)
    assert "[[[[" in text
    first.write_text(text, "utf-8")
    result = run_module(["merge", first, second, "--out", tmp_path / "merged"])
    assert result.code == 2 and first.as_posix() in result.err, result.err


def test_a_shard_stopped_by_max_run_time_keeps_its_blocker_through_the_merge(tmp_path):
    """Its stopped case is undelivered and the stop is a blocker: the merge is inconclusive, as the unsharded run is."""
    stuck = case("stuck", completion="a" * 40 + "!", **{"assert": [{"type": "regex", "value": "^(a|aa)+$"}]})
    fine = [case(f"c{i}", completion="ok", **{"assert": [{"type": "contains", "value": "ok"}]}) for i in range(3)]
    suite = make_suite(tmp_path, [stuck, *fine])
    whole = run_module(["run", suite, "--out", tmp_path / "whole", "--max-run-time", "3"])
    assert whole.code == 3, whole.err
    paths = []
    for i in (1, 2):
        result = run_module(["run", suite, "--out", tmp_path / f"shard-{i}", "--shard", f"{i}/2", "--max-run-time", "3"])
        assert result.code in (1, 3), result.err
        paths.append(tmp_path / f"shard-{i}" / "report.json")
    merged = run_module(["merge", *paths, "--out", tmp_path / "merged"])
    report = json.loads((tmp_path / "merged" / "report.json").read_text("utf-8"))
    assert merged.code == 3, merged.err
    assert report["verdict"] == "inconclusive"
    assert any("--max-run-time" in blocker for blocker in report["blockers"]), report["blockers"]
