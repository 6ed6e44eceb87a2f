"""--max-run-time bounds the whole run: a fixture that makes grading hang for ever still ends in partial reports
and exit 3.

The hang is real: a regular expression that backtracks catastrophically holds the interpreter
lock, so nothing in the run's own process can stop it. Each hanging run here is a subprocess
with a timeout, so a broken supervisor fails the test instead of hanging the suite.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from envelope_ci import supervise
from envelope_ci.api import CALLING, WRITING_PINS
from envelope_ci.report.model import report_schema
from tests.support.fake_openai import Behaviour, FakeOpenAI, serve_fixed_delay
from tests.support.suites import ENV_VARS, REPO_ROOT, case, chat_body, make_suite, recorded, run_cli, write_replay

# "^(a|aa)+$" against a run of a's that ends in something else: ~1.6^n ways to fail, minutes in practice.
EVIL = "^(a|aa)+$"  # overlapping branches: backtracks for minutes, and no load-time check can tell it apart
EVIL_ANSWER = "a" * 40 + "!"
LIMIT_S = 3


def evil_cases(completions: bool) -> tuple[list[dict[str, Any]], list[tuple[str, Any]]]:
    """A case graded fine, the case that hangs grading (a backtracking ``regex``), and one after it; answers embedded or not.

    A schema ``pattern`` cannot hang: jsonschema-rs runs it in linear time or up to a backtracking limit.
    """
    check = {"assert": [{"type": "regex", "value": EVIL}]}
    answers = ["aaa", EVIL_ANSWER, "a"]
    ids = ["a-first", "b-stuck", "c-after"]
    pairs = list(zip(ids, answers, strict=True))
    return [case(i, **check, **({"completion": a} if completions else {})) for i, a in pairs], [(i, recorded(chat_body(a))) for i, a in pairs]


def cli(args: list[str | Path], timeout: float = 40.0) -> tuple[subprocess.CompletedProcess[str], float]:
    """``python -m envelope_ci ARGS`` in its own process, and how long it took."""
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
    env["PYTHONPATH"] = str(REPO_ROOT)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "envelope_ci", *map(str, args)], capture_output=True, text=True, env=env,
                          cwd=REPO_ROOT, timeout=timeout)
    return done, time.monotonic() - started


def reports(out: Path) -> dict[str, Any]:
    """report.json, checked against its schema; report.md and junit.xml checked to say the same."""
    report = json.loads((out / "report.json").read_text("utf-8"))
    jsonschema.Draft202012Validator(report_schema()).validate(report)
    suites = ET.fromstring((out / "junit.xml").read_text("utf-8"))
    assert sorted(tc.get("name", "") for tc in suites.iter("testcase")) == sorted(row["id"] for row in report["cases"])
    markdown = (out / "report.md").read_text("utf-8")
    assert "max-run-time" in markdown and "inconclusive" in markdown.lower()
    return report


@pytest.mark.parametrize("replay", [True, False], ids=["replay", "embedded"])
def test_a_hanging_grade_ends_in_partial_reports_and_exit_3(tmp_path, replay):
    cases, lines = evil_cases(completions=not replay)
    suite = make_suite(tmp_path, cases)
    extra: list[str | Path] = ["--replay", write_replay(tmp_path / "rec.jsonl", lines)] if replay else []
    done, took = cli(["run", suite, "--out", tmp_path / "out", "--max-run-time", str(LIMIT_S), *extra])
    assert done.returncode == 3, done.stderr
    assert took < 15, took  # 3 s, 2 s for the run to finish on its own, then the partial reports
    report = reports(tmp_path / "out")
    assert report["verdict"] == "inconclusive"
    rows = {row["id"]: row for row in report["cases"]}
    assert [row["id"] for row in report["cases"]] == ["a-first", "b-stuck", "c-after"]
    assert rows["a-first"]["label"] == "right"  # graded before the deadline: kept
    assert rows["b-stuck"]["label"] == "drop"
    assert rows["b-stuck"]["reasons"] == [f"not graded: the run reached --max-run-time ({LIMIT_S} s) while grading this case"]
    assert rows["c-after"]["label"] == "drop"
    assert rows["c-after"]["reasons"] == [f"not run: the run reached --max-run-time ({LIMIT_S} s) while grading case b-stuck; "
                                          "this case was not graded"]
    assert report["blockers"] == [f"the run reached --max-run-time ({LIMIT_S} s) while grading case b-stuck and was stopped: "
                                  "1 of 3 case(s) graded, 2 not graded"]
    assert f"the run reached --max-run-time ({LIMIT_S} s) while grading case b-stuck: stopped it" in done.stderr
    assert "INCONCLUSIVE" in done.stdout and "report.json" in done.stdout
    (step,) = report["next_steps"]  # not "check the endpoint and the network": nothing was wrong with it
    assert step["why"].startswith("the run reached --max-run-time before 2 case(s) were graded (b-stuck, c-after)"), step
    if replay:
        assert any("graded 3 case(s) from the recordings" in note for note in report["notes"])


def test_a_run_out_of_time_never_writes_pins(tmp_path):
    cases, _ = evil_cases(completions=True)
    suite = make_suite(tmp_path, cases)
    done, _ = cli(["run", suite, "--out", tmp_path / "out", "--max-run-time", "1", "--lane", "adjudication", "--write-pins"])
    assert done.returncode == 3, done.stderr
    assert not (suite / "envelope-pins.json").exists()
    assert "wrote pins" not in done.stdout
    assert reports(tmp_path / "out").get("pins_update") is None


def test_a_run_past_its_time_when_it_comes_to_the_pins_stops_there():
    """A run that graded everything but late: its pins are not written, and the parent is told where it stopped."""
    sent: list[tuple[Any, ...]] = []

    class Channel:
        def send(self, message: tuple[Any, ...]) -> None:
            sent.append(message)

    late = supervise._Streaming(Channel(), started=time.monotonic() - 2, limit=1)  # type: ignore[arg-type]
    late.phase("analysing the results")
    with pytest.raises(supervise._OutOfTime):
        late.phase(WRITING_PINS)
    assert sent == [("phase", "analysing the results"), ("out of time", WRITING_PINS)]
    late.phase(CALLING)  # live calls do not restart the clock: the run's time counts from its start
    with pytest.raises(supervise._OutOfTime):
        late.phase(WRITING_PINS)
    assert sent[-2:] == [("phase", CALLING), ("out of time", WRITING_PINS)]


def test_the_time_spent_loading_counts_against_the_live_calls(tmp_path):
    """A grader whose import takes 1.5 s, then 700 ms calls one at a time under --max-run-time 2: about half a second is left for calls.

    Counted from the calls' start (as before), three calls would finish and a fourth in the grace; from the run's start, one, and one in the grace.
    """
    with FakeOpenAI(Behaviour.ok("Hello", delay_ms=700)) as srv:
        slow = {"assert": [{"type": "python", "value": "graders/slow.py:ok"}]}
        suite = make_suite(tmp_path, [case(f"slow-{i}", prompt=f"Hi [[slow-{i}]]", **slow) for i in range(6)],
                           files={"graders/slow.py": "import time\ntime.sleep(1.5)\n\ndef ok(answer, case):\n    return None\n"})
        done, took = cli(["run", suite, "--out", tmp_path / "out", "--base-url", srv.url, "--model", "m", "--concurrency", "1",
                          "--max-run-time", "2"])
        sent = len(srv.all_requests)
    assert done.returncode == 3, done.stderr
    assert took < 12, took
    assert sent <= 2, sent  # from the calls' start it would be 3 or 4
    report = reports(tmp_path / "out")
    assert [row["label"] for row in report["cases"]].count("drop") >= 4
    assert any("--max-run-time (2 s)" in b for b in report["blockers"]), report["blockers"]


def test_a_grader_that_never_returns_is_stopped_while_grading_not_while_loading(tmp_path):
    """Loading never runs a grader's code (it runs in its worker, when a case is graded): a grader stuck on import hangs
    grading, which the run stops at its time with partial reports that name the case."""
    suite = make_suite(tmp_path, [case("c1", completion="hi", **{"assert": [{"type": "python", "value": "graders/stuck.py:ok"}]})],
                       files={"graders/stuck.py": "import time\nwhile True:\n    time.sleep(0.05)\n"})
    done, took = cli(["run", suite, "--out", tmp_path / "out", "--max-run-time", "1"])
    assert done.returncode == 3, done.stderr
    assert took < 10, took
    report = json.loads((tmp_path / "out" / "report.json").read_text("utf-8"))
    assert report["verdict"] == "inconclusive"
    assert report["blockers"] == ["the run reached --max-run-time (1 s) while grading case c1 and was stopped: 0 of 1 case(s) graded, "
                                  "1 not graded"]


def test_a_run_that_ends_in_time_reports_as_without_the_flag(tmp_path):
    suite = REPO_ROOT / "fixtures_example" / "support-bot"
    plain = run_cli(["run", suite, "--out", tmp_path / "plain"])
    bounded = run_cli(["run", suite, "--out", tmp_path / "bounded", "--max-run-time", "60"])
    assert plain.code == bounded.code == 0, bounded.err
    assert bounded.out.replace("bounded", "plain") == plain.out
    for name in ("report.json", "report.md", "junit.xml"):  # an offline report has no timings to differ in
        assert (tmp_path / "bounded" / name).read_bytes() == (tmp_path / "plain" / name).read_bytes(), name


def test_usage_errors_of_a_bounded_run_are_named_as_ever(tmp_path):
    suite = make_suite(tmp_path, [case("c1", completion="hi", expect_fragment="hi"), {"id": "c1", "prompt": "again"}])
    result = run_cli(["run", suite, "--out", tmp_path / "out", "--max-run-time", "30"])
    assert result.code == 2
    assert "c1" in result.err and result.err.startswith("error: ") and not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- Ctrl-C and SIGTERM, as an unsupervised run answers them
def start(args: list[str | Path]) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
    env.update(PYTHONPATH=str(REPO_ROOT), PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "-m", "envelope_ci", *map(str, args)], cwd=REPO_ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def wait_for_requests(srv: FakeOpenAI, n: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 15
    while len(srv.all_requests) < n:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_first_signal_still_stops_a_live_run_politely(tmp_path, sig):
    suite = make_suite(tmp_path, [case(f"c{i}", must_include=["ok"]) for i in range(20)])
    out = tmp_path / "out"
    with serve_fixed_delay(300) as srv:
        proc = start(["run", suite, "--out", out, "--base-url", srv.url, "--model", "m", "--concurrency", "1", "--max-run-time", "60"])
        wait_for_requests(srv, 3, proc)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 3, err
    assert err.count("envelope-ci: stopping") == 1  # said once, by the run: the supervisor only passes the signal on
    report = json.loads((out / "report.json").read_text("utf-8"))
    jsonschema.Draft202012Validator(report_schema()).validate(report)
    assert report["verdict"] == "inconclusive" and len(report["cases"]) == 20
    assert any("interrupted" in b for b in report["blockers"])
    labels = [row["label"] for row in report["cases"]]
    assert "right" in labels and labels[-1] == "drop"


def test_a_second_ctrl_c_still_leaves_at_once(tmp_path):
    keys = [f"k{i}" for i in range(4)]
    with FakeOpenAI() as srv:
        for key in keys:
            srv.plant(key, Behaviour.hang(10.0))
        suite = make_suite(tmp_path, [case(k, prompt=f"Hi [[{k}]]", expect_fragment="Hello") for k in keys])
        proc = start(["run", suite, "--out", tmp_path / "out", "--base-url", srv.url, "--model", "m", "--concurrency", "2",
                      "--max-run-time", "60"])
        wait_for_requests(srv, 2, proc)
        proc.send_signal(signal.SIGINT)
        time.sleep(0.3)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 130, err
    assert time.monotonic() - t0 < 2.0
    assert "envelope-ci: interrupted" in err


def test_a_live_answer_that_hangs_grading_ends_in_partial_reports(tmp_path):
    """Live answers are graded as they arrive, in the pool's threads: one that hangs holds them all, and the pool's own deadline too."""
    with FakeOpenAI() as srv:
        srv.plant("live-ok", Behaviour.ok("aaa"))
        srv.plant("live-stuck", Behaviour.ok(EVIL_ANSWER))
        suite = make_suite(tmp_path, [case(k, prompt=f"Hi [[{k}]]", **{"assert": [{"type": "regex", "value": EVIL}]})
                                      for k in ("live-ok", "live-stuck")])
        done, took = cli(["run", suite, "--out", tmp_path / "out", "--base-url", srv.url, "--model", "m", "--concurrency", "1",
                          "--max-run-time", "1"])
    assert done.returncode == 3, done.stderr
    assert took < 15, took  # 1 s, the 5 s calls in flight get, 2 s more, then the partial reports
    report = reports(tmp_path / "out")
    assert [row["label"] for row in report["cases"]] == ["drop", "drop"]  # the grades were in the stuck process
    assert report["cases"][0]["reasons"] == ["not run: the run reached --max-run-time (1 s) while calling the endpoint and grading its answers; "
                                             "this case was not graded"]
    assert report["blockers"] == ["the run reached --max-run-time (1 s) while calling the endpoint and grading its answers and was stopped: "
                                  "0 of 2 case(s) graded, 2 not graded"]
