"""The live client against hostile endpoints: bounded in time and memory, leaking nothing."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from envelope_ci.model import Case, Grade, RetryPolicy
from envelope_ci.secrets import Secrets
from envelope_ci.transport.http import ClientSettings
from envelope_ci.transport.pool import run_live
from envelope_ci.transport.watchdog import Watchdog
from tests.support.fake_openai import Behaviour, FakeOpenAI
from tests.support.suites import ENV_VARS, REPO_ROOT, case, make_case, make_suite, run_report

KEY = "sk-envci-hostile-5c2e9a1f"


def planted(key: str, **fields: Any) -> Case:
    """A validated case whose prompt carries the fake server's ``[[key]]`` marker."""
    return make_case(id=key, prompt=f"Answer briefly. [[{key}]]", **fields)


ONE_ATTEMPT = RetryPolicy(max_attempts=1)


def one(key: str, url: str, *, policy: RetryPolicy = ONE_ATTEMPT, **settings: Any) -> Grade:
    """The grade of one planted case run live on its own."""
    (got,) = run_live([planted(key, expect_fragment="Hello")], ClientSettings(base_url=url, model="m", **settings), policy=policy).grades[key]
    return got


# --------------------------------------------------------------------------- 1: one deadline per attempt, and per run
def test_watchdog_shuts_a_blocked_read_at_the_deadline_and_only_then():
    dog = Watchdog()
    a, b = socket.socketpair()
    try:
        t0 = time.monotonic()
        with dog.deadline(0.3) as alarm:
            alarm.attach(a)
            assert a.recv(1) == b""  # blocked until the watchdog shut the socket
        assert alarm.fired and 0.25 < time.monotonic() - t0 < 1.0
        with dog.deadline(0.2) as early:
            pass
        time.sleep(0.3)
        assert not early.fired  # disarmed in time: never fired
    finally:
        dog.close()
        a.close()
        b.close()
    assert not any(t.name == "envelope-ci-watchdog" for t in threading.enumerate())


def test_a_trickled_status_line_ends_at_the_timeout(tmp_path, srv):
    """One byte every 2 s, status line first: each read is within any read timeout, the attempt is not."""
    srv.plant("trickle", Behaviour.trickle_head(gap_ms=2000))
    t0 = time.monotonic()
    result, report = run_report(make_suite(tmp_path, [case("trickle", prompt="Hi [[trickle]]", expect_fragment="Hello")]), tmp_path / "out",
                                "--base-url", srv.url, "--model", "m", "--timeout", "2", "--max-attempts", "1")
    assert time.monotonic() - t0 < 4.5
    assert result.code == 3 and report is not None
    (row,) = report["cases"]
    assert row["label"] == "drop" and row["reasons"][0] == ("no response: Deadline: no complete response within the case deadline of 2 s "
                                                            "(connect to last byte)")


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_headers_trickled_inside_the_read_timeout_end_at_the_deadline(srv, stream):
    srv.plant("drip-head", Behaviour.trickle_head(gap_ms=150))
    got = one("drip-head", srv.url, case_timeout_s=0.6, stream=stream)
    assert got.label.value == "drop" and "deadline of 0.6 s" in got.reasons[0]
    assert got.elapsed_ms is not None and 550 <= got.elapsed_ms < 1000


def test_max_run_time_writes_partial_reports_and_exits_3(tmp_path, srv):
    srv.default = Behaviour.ok("Hello", delay_ms=700)
    cases = [case(f"slow-{i}", prompt=f"Hi [[slow-{i}]]", expect_fragment="Hello") for i in range(6)]
    t0 = time.monotonic()
    result, report = run_report(make_suite(tmp_path, cases), tmp_path / "out", "--base-url", srv.url, "--model", "m",
                                "--concurrency", "1", "--max-run-time", "1")
    assert time.monotonic() - t0 < 4.0
    assert result.code == 3 and report is not None
    assert [row["id"] for row in report["cases"]] == [c["id"] for c in cases]  # every case has its row
    labels = [row["label"] for row in report["cases"]]
    assert labels[:2] == ["right", "right"] and labels[2:] == ["drop"] * 4  # the one in flight at 1 s finished in the grace
    assert report["cases"][-1]["reasons"][0] == "no response: not run: the run reached --max-run-time (1 s) before this case finished"
    assert any("--max-run-time (1 s): 2 of 6 calls finished; 4 case(s) not run" in b for b in report["blockers"])
    assert len(srv.all_requests) == 2


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_max_run_time_is_checked_before_any_request(tmp_path, srv, value):
    result, report = run_report(make_suite(tmp_path, [case("c1", expect_fragment="Hello")]), tmp_path / "out",
                                "--base-url", srv.url, "--model", "m", "--max-run-time", value)
    assert result.code == 2 and report is None and srv.all_requests == []
    assert "--max-run-time must be a positive finite number of seconds" in result.err


# --------------------------------------------------------------------------- 2: memory independent of answer sizes
# Started from a small launcher: a child's ru_maxrss counts the peak of the process it was started from (Linux keeps
# the old memory's high-water mark across exec), and this test process can be bigger than the run it measures.
_LAUNCHER = ("import os, subprocess, sys\n"
             "proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
             "_, status, usage = os.wait4(proc.pid, 0)\n"
             "print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)\n")


def peak_rss_mb(suite: Path, out: Path, url: str) -> float:
    """The CLI's peak resident memory for one live run, in its own process."""
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
    command = [sys.executable, "-m", "envelope_ci", "run", str(suite), "--out", str(out), "--base-url", url,
               "--model", "m", "--concurrency", "4", "--quiet"]
    done = subprocess.run([sys.executable, "-c", _LAUNCHER, *command], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, check=True)
    code, peak_kb = map(int, done.stdout.split())
    assert code == 0
    return peak_kb / 1024


def test_memory_does_not_grow_with_answer_sizes(tmp_path, srv):
    """40 answers of 8 MB (320 MB in all) at concurrency 4: the run keeps grades, not bodies.

    Peak RSS before: 488 MB (every body kept to the end); after: about 200 MB, the same with 100 answers
    (bounded by concurrency x answer size, not by their number).
    """
    srv.default = Behaviour.huge(8 * 1024 * 1024)
    suite = make_suite(tmp_path, [case(f"big-{i}", prompt=f"Hi [[big-{i}]]", expect_fragment="xxx") for i in range(40)])
    peak = peak_rss_mb(suite, tmp_path / "out", srv.url)
    assert peak < 330, f"peak RSS {peak:.0f} MB"
    report = json.loads((tmp_path / "out" / "report.json").read_text("utf-8"))
    assert all(row["label"] == "right" and row["chars"] > 8_000_000 and len(row["preview"]) == 240 for row in report["cases"])


def test_a_grade_keeps_the_measurements_and_the_preview_only(srv):
    srv.plant("long", Behaviour.ok("Hello " + "x" * 10_000))
    got = one("long", srv.url)
    assert got.label.value == "right" and got.chars == 10_006 and got.text == ("Hello " + "x" * 10_000)[:240]


# --------------------------------------------------------------------------- 5: a retry budget sized to the suite
def test_the_report_says_when_the_budget_ended_retries(srv):
    keys = [f"flaky-{i}" for i in range(4)]
    for key in keys:
        srv.plant(key, [Behaviour.server_error(503), Behaviour.ok("Hello")])
    cases = [planted(k, expect_fragment="Hello") for k in keys]
    settings = ClientSettings(base_url=srv.url, model="m")
    tight = run_live(cases, settings, concurrency=1, policy=RetryPolicy(base_delay_s=0.01, run_budget=1))
    assert [tight.grades[k][0].label.value for k in keys] == ["right", "drop", "drop", "drop"]
    assert any("the run's retry budget of 1 is spent (--retry-budget 1)" in r for r in tight.grades[keys[-1]][0].reasons)
    (note,) = tight.remarks()
    assert note.startswith("retries ended by the budget, not the server") and "3 failed attempt(s) got no retry" in note
    srv.clear()
    for key in keys:
        srv.plant(key, [Behaviour.server_error(503), Behaviour.ok("Hello")])
    sized = run_live(cases, settings, concurrency=1, policy=RetryPolicy(base_delay_s=0.01))
    assert [sized.grades[k][0].label.value for k in keys] == ["right"] * 4 and sized.remarks() == []


# --------------------------------------------------------------------------- 6: no redirects
@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_redirects_are_not_followed(srv, status):
    """requests strips only Authorization on a redirect: an api-key header, and on 307/308 the prompt, would go to the other host."""
    with FakeOpenAI() as other:
        port = other.port
        elsewhere = f"http://user:hunter22@127.0.0.1:{port}/v1/chat/completions?" + "a" * 300
        srv.plant("moved", Behaviour.status(status, "", {"Location": elsewhere}))
        got = one("moved", srv.url, api_key=KEY, extra_headers={"api-key": "azure-style-key-77"}, policy=RetryPolicy())
        assert other.all_requests == []
    assert srv.attempts("moved") == 1 and got.attempts == 1  # not retried either
    assert got.label.value == "drop"
    shown = f"http://***@127.0.0.1:{port}/v1/chat/completions?".ljust(120, "a")
    assert got.reasons[0] == f"HTTP {status} redirect to '{shown}'…, not followed: point --base-url at where the endpoint really is"
    assert got.reasons[-1] == f"not retried: a redirect (HTTP {status}) is not followed"


# --------------------------------------------------------------------------- 13: hostile bodies graded as they are
def test_invalid_utf8_in_a_valid_body_is_graded_with_a_note(srv):
    body = b'{"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hello \xff\xfe there"},"finish_reason":"stop"}]}'
    srv.plant("bad-bytes", Behaviour.status(200, body, {"Content-Type": "application/json"}))
    got = one("bad-bytes", srv.url)
    assert got.label.value == "right" and got.text == "Hello \ufffd\ufffd there"
    bad_at = body.index(b"\xff")
    assert got.reasons == (f"the body is not valid UTF-8 (a bad byte at offset {bad_at}): read with U+FFFD in place of the bad bytes",)


def test_invalid_utf8_in_a_stream_is_graded_with_a_note(srv):
    chunks = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hello @@"}, "finish_reason": None}]},
              {"model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]
    sse = b"".join(b"data: " + json.dumps(c).encode().replace(b"@@", b"\xc3") + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
    srv.plant("bad-stream", Behaviour.status(200, sse, {"Content-Type": "text/event-stream"}))
    got = one("bad-stream", srv.url, stream=True)
    assert got.label.value == "right" and got.text == "Hello \ufffd"
    assert got.reasons == ("the stream is not valid UTF-8: read with U+FFFD in place of the bad bytes",)


def deep_body(depth: int) -> bytes:
    """A right answer with an extra field nested ``depth`` levels."""
    answer = {"model": "m", "choices": [{"index": 0, "message": {"role": "assistant", "content": f"Hello {KEY}"}, "finish_reason": "stop"}]}
    return json.dumps(answer).encode()[:-1] + b', "extra": ' + b"[" * depth + b"1" + b"]" * depth + b"}"


@pytest.mark.parametrize("depth, label", [(900, "right"), (5000, "empty")])
def test_a_deep_body_is_graded_the_same_with_or_without_a_key(srv, depth, label):
    """The scrubber ran only with a key set, and recursed: a deep body was an internal error with a key, an answer without."""
    srv.plant("deep", Behaviour.status(200, deep_body(depth), {"Content-Type": "application/json"}))
    without = one("deep", srv.url)
    masked = one("deep", srv.url, api_key=KEY)
    assert masked.label.value == without.label.value == label
    if label == "right":
        assert masked.reasons == without.reasons == ()
        assert masked.text == "Hello ***" and without.text == f"Hello {KEY}"
    else:  # deeper than the JSON parser goes: text, so not a chat completion, with or without the key
        assert masked.reasons[0].startswith("HTTP 200 but the body is not a JSON object: {")
        assert without.reasons[0].startswith("HTTP 200 but the body is not a JSON object: {")


def test_scrub_is_iterative():
    nested: Any = f"key {KEY} here"
    for i in range(5000):
        nested = [nested, {"k": (i, KEY)}] if i % 2 else {"level": nested}
    scrubbed = Secrets([KEY]).scrub(nested)
    depth = 0
    while not isinstance(scrubbed, str):
        scrubbed = scrubbed[0] if isinstance(scrubbed, list) else scrubbed["level"]
        depth += 1
    assert depth == 5000 and scrubbed == "key *** here"
    assert Secrets([KEY]).scrub({"a": (1, KEY), KEY: [None, 2.5]}) == {"a": [1, "***"], "***": [None, 2.5]}
