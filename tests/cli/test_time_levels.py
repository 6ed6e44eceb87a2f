"""Time is judged against the level it was measured at (docs/gate.md, "Time against its level"), live, end to end.

A server whose latency grows with its load stands in for the endpoint: pins measured with one
request in flight, runs made with eight. Load or a slower endpoint is a shift, reported; a
case slower than its neighbours still fails.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.loaded_server import LoadedServer
from tests.support.suites import case, make_suite, run_cli, run_report

CASES = 16
IDS = [f"t{i:02d}" for i in range(CASES)]


def _suite(tmp_path: Path) -> Path:
    return make_suite(tmp_path, [case(cid, prompt=f"Answer ok. [[{cid}]]", must_include=["ok"], stratum="easy")
                                 for cid in IDS])


def _live(srv: LoadedServer, concurrency: int, *more: str) -> list[str]:
    return ["--base-url", srv.url, "--model", "m", "--concurrency", str(concurrency), *more]


def _pin_live(suite: Path, tmp_path: Path, srv: LoadedServer, *more: str) -> None:
    result = run_cli(["run", suite, "--out", tmp_path / "pinning", "--lane", "adjudication", "--write-pins",
                      *_live(srv, 1), *more])
    assert result.code == 0, result.stderr


def _pin_recorded(suite: Path, tmp_path: Path, srv: LoadedServer) -> None:
    """Pins from recordings of a whole live run at concurrency 1, imported: each line carries the run's level."""
    recordings = tmp_path / "all.jsonl"
    assert run_cli(["run", suite, "--out", tmp_path / "rec1", *_live(srv, 1), "--record", recordings]).code == 0
    assert all("level_ms" in json.loads(line)["recorded"] for line in recordings.read_text("utf-8").splitlines())
    assert run_cli(["import", recordings, "--into", suite]).code == 0
    assert run_cli(["run", suite, "--out", tmp_path / "pin1", "--lane", "adjudication", "--write-pins"]).code == 0


def _time_failures(report: dict) -> list[str]:
    return [c["id"] for c in report["cases"] if c["channel"] == "time"]


@pytest.fixture
def srv():
    with LoadedServer(base_ms=400.0, busy_factor=1.6, busy_at=8) as server:  # slow enough that noise is small
        yield server


def test_load_that_slows_every_case_is_a_shift_not_a_failure(tmp_path, srv):
    suite = _suite(tmp_path)
    _pin_live(suite, tmp_path, srv)
    pins = json.loads((suite / "envelope-pins.json").read_text("utf-8"))
    assert {p["level_ms"] for p in pins["cases"].values()} == {pins["cases"]["t00"]["level_ms"]}
    result, report = run_report(suite, tmp_path / "out", *_live(srv, 8))
    assert result.code == 0, (report["alert_details"], _time_failures(report))
    shift = report["latency"]
    assert 1.3 <= shift["factor"] <= 1.9 and shift["cases"] == CASES
    assert any(n.startswith(f"endpoint latency x{shift['factor']:.2f} vs pins") for n in report["notes"])


def test_single_sample_pins_judge_a_run_of_three_repeats(tmp_path, srv):
    suite = _suite(tmp_path)
    _pin_live(suite, tmp_path, srv)
    result, report = run_report(suite, tmp_path / "out", *_live(srv, 8), "--repeats", "3")
    assert result.code == 0, (report["alert_details"], _time_failures(report))
    assert report["strata"]["easy"]["pass_rate"] == 1.0
    assert {tuple(c["passes"]) for c in report["cases"]} == {(3, 3)}


def test_the_tools_own_recovery_then_a_loaded_run_passes(tmp_path, srv):
    suite = _suite(tmp_path)
    _pin_recorded(suite, tmp_path, srv)
    # two cases re-recorded at concurrency 1: a batch too small for a level of its own
    again = tmp_path / "two.jsonl"
    result = run_cli(["run", suite, "--out", tmp_path / "rec2", *_live(srv, 1), "--filter", "t00", "--filter", "t01",
                      "--record", again])
    assert result.code == 3, result.stderr  # a partial run is never a pass
    assert not any("level_ms" in json.loads(line)["recorded"] for line in again.read_text("utf-8").splitlines())
    assert run_cli(["import", again, "--into", suite]).code == 0
    result = run_cli(["run", suite, "--out", tmp_path / "pin2", "--lane", "adjudication", "--write-pins"])
    assert result.code == 0, result.stderr
    pins = json.loads((suite / "envelope-pins.json").read_text("utf-8"))
    assert pins["cases"]["t00"]["level_ms"] == pins["cases"]["t05"]["level_ms"]  # borrowed from the pin it replaces
    for attempt in range(10):
        result, report = run_report(suite, tmp_path / f"out{attempt}", *_live(srv, 8))
        assert result.code == 0, (attempt, report["alert_details"], _time_failures(report))


def test_an_endpoint_slower_everywhere_fails_as_latency_shift_alone(tmp_path, srv):
    suite = _suite(tmp_path)
    _pin_live(suite, tmp_path, srv)
    srv.speed = 2.5
    result, report = run_report(suite, tmp_path / "out", *_live(srv, 1))
    assert result.code == 1
    assert report["alerts"] == ["latency_shift"] and _time_failures(report) == []
    assert report["regressions"] == []
    (step,) = [s for s in report["next_steps"] if "latency_shift" in s["why"]]
    assert step["command"].startswith("envelope-ci run") and "--base-url" in step["command"]


def test_latency_shift_off_reports_the_shift_and_passes(tmp_path, srv):
    suite = _suite(tmp_path)
    (suite / "envelope-ci.yaml").write_text("latency_shift_slack: 'off'\n", "utf-8")
    _pin_live(suite, tmp_path, srv)
    srv.speed = 2.5
    result, report = run_report(suite, tmp_path / "out", *_live(srv, 1))
    assert result.code == 0, report["alert_details"]
    assert report["latency"]["factor"] > 2.0


def test_one_case_slower_than_its_neighbours_fails_on_time_alone(tmp_path, srv):
    suite = _suite(tmp_path)
    _pin_live(suite, tmp_path, srv)
    srv.case_factor["t07"] = 3.0
    result, report = run_report(suite, tmp_path / "out", *_live(srv, 8))
    assert result.code == 1
    assert _time_failures(report) == ["t07"] and report["regressions"] == ["t07"]
    assert report["alerts"] == []  # one cause, one failure: the easy floor counts answers, and t07 was right


def test_shards_on_runners_of_different_speed_are_each_judged_at_their_own_level(tmp_path, srv):
    suite = _suite(tmp_path)
    _pin_live(suite, tmp_path, srv)
    reports = []
    for index, speed in ((1, 1.0), (2, 1.8)):
        srv.speed = speed
        out = tmp_path / f"shard{index}"
        result, report = run_report(suite, out, *_live(srv, 1), "--shard", f"{index}/2")
        assert _time_failures(report) == [], index
        reports.append(out / "report.json")
    merged = tmp_path / "merged"
    result = run_cli(["merge", *reports, "--out", merged])
    report = json.loads((merged / "report.json").read_text("utf-8"))
    assert result.code == 0, report["alert_details"]
    levels = [n for n in report["notes"] if "latency level" in n]
    assert [n.split(":")[0] for n in levels] == ["shard 1/2", "shard 2/2"]


def test_a_filter_run_says_its_level_comes_from_a_subset(tmp_path, srv):
    suite = _suite(tmp_path)
    _pin_live(suite, tmp_path, srv)
    result, report = run_report(suite, tmp_path / "out", *_live(srv, 1), "--filter", "t0*")
    assert result.code == 3 and report["alerts"] == []  # partial: never a pass, and no alert from a subset's level
    assert report["latency"]["subset"] is True
    assert any("the level comes from a subset" in n for n in report["notes"])


def test_a_filter_run_of_the_slow_cases_neither_alerts_nor_poisons_the_pins(tmp_path, srv):
    slow = ["t00", "t01", "t02", "t03", "t04"]
    srv.case_factor.update({cid: 4.0 for cid in slow})  # slower than their neighbours all along, pins included
    suite = _suite(tmp_path)
    _pin_recorded(suite, tmp_path, srv)
    again = tmp_path / "slow.jsonl"
    result, report = run_report(suite, tmp_path / "rec", *_live(srv, 1), *(w for c in slow for w in ("--filter", c)),
                                "--record", again)
    assert result.code == 3, (report["alert_details"], _time_failures(report))
    assert report["latency"]["factor"] > 2.0  # said: the subset is slow ...
    assert "latency_shift" not in report["alerts"]  # ... but a picked subset is no sample of the endpoint
    assert not any("level_ms" in json.loads(line)["recorded"] for line in again.read_text("utf-8").splitlines())
    assert run_cli(["import", again, "--into", suite]).code == 0
    assert run_cli(["run", suite, "--out", tmp_path / "pin2", "--lane", "adjudication", "--write-pins"]).code == 0
    result, report = run_report(suite, tmp_path / "out", *_live(srv, 8))
    assert result.code == 0, (report["alert_details"], _time_failures(report))
