"""A supervised run (``--max-run-time``) stops when asked and never outlives its caller, even stuck in a regex."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from envelope_ci.supervise import STOP_GRACE_S
from tests.support.suites import case, make_suite, run_cli

# ``^(a|aa)+$`` on 40 a's and a "!" backtracks for minutes in ``re`` (overlapping branches, not a nested repeat).
STUCK = case("stuck", completion="a" * 40 + "!", **{"assert": [{"type": "regex", "value": "^(a|aa)+$"}]})

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups and PR_SET_PDEATHSIG: Linux")


def _start(suite: Path, out: Path) -> subprocess.Popen[str]:
    """The command line in its own session (as a CI runner starts a job), a run that gets stuck grading."""
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "GITHUB_ACTIONS")}
    return subprocess.Popen([sys.executable, "-m", "envelope_ci", "run", str(suite), "--out", str(out), "--max-run-time", "600"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)


def _children(pid: int) -> list[int]:
    found = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in found.read_text().split()] if found.exists() else []


def _wait_for_child(parent: subprocess.Popen[str]) -> int:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        kids = _children(parent.pid)
        if kids:
            time.sleep(1.0)  # into the grading, where it sticks
            return kids[0]
        time.sleep(0.05)
    raise AssertionError("the run never started its child")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_a_sigterm_is_answered_within_seconds_with_partial_reports(tmp_path):
    suite = make_suite(tmp_path, [STUCK])
    run = _start(suite, tmp_path / "out")
    _wait_for_child(run)
    asked = time.monotonic()
    run.send_signal(signal.SIGTERM)
    _, err = run.communicate(timeout=60)
    took = time.monotonic() - asked
    assert took < STOP_GRACE_S + 8, took  # not the 600 s deadline
    assert run.returncode == 3, err
    report = json.loads((tmp_path / "out" / "report.json").read_text("utf-8"))
    assert report["verdict"] == "inconclusive"
    assert any("asked to stop" in blocker for blocker in report["blockers"]), report["blockers"]


def test_the_run_dies_with_its_caller_when_the_callers_group_is_killed(tmp_path):
    suite = make_suite(tmp_path, [STUCK])
    run = _start(suite, tmp_path / "out")
    child = _wait_for_child(run)
    os.killpg(run.pid, signal.SIGKILL)  # the caller's process group: the child has a group of its own
    run.wait(timeout=10)
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "the run's child outlived its killed parent"


def test_a_stale_temporary_report_is_removed_when_reports_are_written(tmp_path):
    suite = make_suite(tmp_path, [case("c1", completion="ok", **{"assert": [{"type": "contains", "value": "ok"}]})])
    out = tmp_path / "out"
    out.mkdir()
    stale = out / ".report.json.abc123.tmp"
    stale.write_text('{"half": ', "utf-8")
    assert run_cli(["run", suite, "--out", out]).code == 0
    assert not stale.exists() and (out / "report.json").is_file()
