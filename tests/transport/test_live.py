"""Live runs against an OpenAI-compatible endpoint, end to end over real sockets.

Every test drives the real CLI (``envelope_ci.cli.main`` in-process, or ``python -m envelope_ci``
as a subprocess for signals) against ``tests/support/fake_openai.py`` on 127.0.0.1, plants one failure
per case (matched by the ``[[KEY]]`` marker in the prompt), and checks the label, the attempts
(report.json ``cases[].attempts`` and the server's own count) and, where it matters, the timing
of the retries as the server saw them. Only the response-size cap (a small cap) and a body
trickling past the deadline are tested through ``run_live`` directly.
"""
from __future__ import annotations

import io
import itertools
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from envelope_ci.cli import main
from envelope_ci.model import Case, RetryPolicy
from envelope_ci.transport.http import ClientSettings
from envelope_ci.transport.pool import run_live
from tests.support.fake_openai import Behaviour, Chaos, FakeOpenAI, refused_url

pytestmark = pytest.mark.usefixtures("clean_env")

KEY = "sk-envci-live-test-7d1f0c9a2b"
# RetryPolicy's default backoff: attempt 1 waits 0.5 s x (1 - 0.25 x jitter), attempt 2 twice that.
BACKOFF_1 = (0.375, 0.5)
BACKOFF_2 = (0.75, 1.0)


# --------------------------------------------------------------------------- helpers
@dataclass
class Run:
    code: int
    report: dict[str, Any] | None
    wall: float
    out: Path
    stdout: str
    stderr: str

    def case(self, case_id: str) -> dict[str, Any]:
        assert self.report is not None, f"no report.json (exit {self.code}): {self.stderr}"
        found = [c for c in self.report["cases"] if c["id"] == case_id]
        assert len(found) == 1, case_id
        return found[0]


def case(key: str, expect: str | None = "Hello", **extra: Any) -> dict[str, Any]:
    """A fixture case whose prompt carries the fake server's ``[[KEY]]`` marker."""
    data: dict[str, Any] = {"id": key, "prompt": f"Please answer briefly. [[{key}]]"}
    if expect is not None:
        data["expect_fragment"] = expect
    data.update(extra)
    return data


def write_fixtures(directory: Path, cases: list[dict[str, Any]]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "cases.json").write_text(json.dumps(cases, indent=1), "utf-8")
    return directory


def cli(fixtures: Path, out: Path, *args: str) -> Run:
    """The real CLI in-process; stdout and stderr captured (not a TTY)."""
    so, se = io.StringIO(), io.StringIO()
    t0 = time.monotonic()
    with redirect_stdout(so), redirect_stderr(se):
        code = main(["run", str(fixtures), "--out", str(out), *args])
    wall = time.monotonic() - t0
    path = out / "report.json"
    report = json.loads(path.read_text("utf-8")) if path.is_file() else None
    return Run(code, report, wall, out, so.getvalue(), se.getvalue())


def live(tmp: Path, url: str, cases: list[dict[str, Any]], *args: str, model: str = "alias") -> Run:
    fixtures = write_fixtures(tmp / "fixtures", cases)
    return cli(fixtures, tmp / "out", "--base-url", url, "--model", model, *args)


def planted_case(key: str, **fields) -> Case:
    """A Case whose message carries the fake server's `[[key]]` marker, for run_live tests."""
    return Case(id=key, stratum=None, messages=({"role": "user", "content": f"[[{key}]]"},), file="t", line=None, digest="", **fields)


def gaps(srv: FakeOpenAI, key: str) -> list[float]:
    """Seconds between successive arrivals of one case's requests, as the server saw them."""
    ts = [r.t for r in srv.requests(key)]
    return [b - a for a, b in itertools.pairwise(ts)]


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


# A tool the tool-call cases offer: a case without tools that gets only a tool call is wrong (rule 6).
WEATHER_TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}


# --------------------------------------------------------------------------- one run, many planted failures
# key -> (behaviour(s), case extras, expected label, expected attempts, substrings of the reasons)
MATRIX: dict[str, tuple[Any, dict[str, Any], str, int, tuple[str, ...]]] = {
    "m-ok": (Behaviour.ok("Hello there"), {}, "right", 1, ()),
    "m-reset": (Behaviour.reset(), {}, "drop", 2, ("no response",)),
    "m-reset-early": (Behaviour.reset(partial=False), {}, "drop", 2, ("no response",)),
    "m-slow-headers": (Behaviour.hang(3.0), {"timeout_s": 0.3}, "drop", 2, ("Deadline", "0.3 s")),
    "m-500": ([Behaviour.server_error(500), Behaviour.ok("Hello")], {}, "right", 2, ()),
    "m-502": ([Behaviour.server_error(502), Behaviour.ok("Hello")], {}, "right", 2, ()),
    "m-503": ([Behaviour.server_error(503), Behaviour.ok("Hello")], {}, "right", 2, ()),
    "m-context": (Behaviour.bad_request_context_length(), {}, "drop", 1, ("HTTP 400", "maximum context length", "context_length_exceeded")),
    "m-401": (Behaviour.unauthorized(), {}, "drop", 1, ("HTTP 401", "Unauthorized")),
    "m-flat-400": (Behaviour.flat_error(), {}, "drop", 1, ("HTTP 400", "max_tokens must be at least 1")),
    "m-quota": (Behaviour.quota_exhausted(), {}, "drop", 1, ("HTTP 429", "insufficient_quota")),
    "m-choices-empty": (Behaviour.empty_choices(), {}, "empty", 2, ("no choices",)),
    "m-choices-empty-then-ok": ([Behaviour.empty_choices(), Behaviour.ok("Hello")], {}, "right", 2, ()),
    "m-null-content": (Behaviour.null_content(), {}, "empty", 2, ("content is null",)),
    "m-tool-call": (Behaviour.tool_call("get_weather", {"city": "Edinburgh"}), {"tools": [WEATHER_TOOL], "expect": None, "expect_json": {"city": "Edinburgh"}}, "right", 1, ()),
    "m-refusal": (Behaviour.refusal(), {}, "wrong", 1, ("model refused", "missing fragment")),
    "m-length": (Behaviour.length("Hello, the answer is"), {}, "truncated", 1, ("length",)),
    "m-malformed": (Behaviour.malformed_json(), {}, "empty", 2, ("not a JSON object",)),
    "m-html-200": (Behaviour.html_200(), {}, "empty", 2, ("Authentication required",)),
    "m-wrong": (Behaviour.ok("Goodbye"), {}, "wrong", 1, ("missing fragment 'Hello'",)),
}
RETRIED = [k for k, v in MATRIX.items() if v[3] > 1]


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    with FakeOpenAI() as s:
        for key, (behaviour, _, _, _, _) in MATRIX.items():
            s.plant(key, behaviour)
        cases = [case(key, **extra) for key, (_, extra, _, _, _) in MATRIX.items()]
        run = live(tmp_path_factory.mktemp("matrix"), s.url, cases, "--concurrency", "16", "--max-attempts", "2",
                   "--record", str(tmp_path_factory.mktemp("matrix-rec") / "rec.jsonl"))
        yield s, run
    assert s.errors == []


@pytest.mark.parametrize("key", list(MATRIX))
def test_planted_failure_label_attempts_and_reasons(matrix, key):
    srv, run = matrix
    _, _, label, attempts, needles = MATRIX[key]
    got = run.case(key)
    assert got["label"] == label, got["reasons"]
    assert got["attempts"] == attempts
    assert srv.attempts(key) == attempts
    text = " ".join(got["reasons"])
    for needle in needles:
        assert needle in text, (needle, got["reasons"])
    if label in ("drop", "empty"):
        assert got["channel"] == "transport" and got["outcome"] == "undelivered"


@pytest.mark.parametrize("key", RETRIED)
def test_retries_wait_for_the_backoff(matrix, key):
    srv, _ = matrix
    (gap,) = gaps(srv, key)
    timeout = MATRIX[key][1].get("timeout_s", 0)
    # Never sooner than the backoff; later only by scheduling (1.5 s leaves room for a loaded 2-core runner).
    # The server stamps an attempt when its handler runs: on a loaded runner the first stamp came 10.4 ms late
    # (a gap of 0.6646 s where 0.665 was the floor), so 50 ms of slack below; a retry that skipped the backoff
    # would come 0.375 s early and still fail.
    assert BACKOFF_1[0] + timeout - 0.05 <= gap <= BACKOFF_1[1] + timeout + 1.5


def test_rejected_requests_report_their_status(matrix):
    _, run = matrix
    assert run.case("m-context")["http_status"] == 400
    assert run.case("m-401")["http_status"] == 401
    assert run.case("m-quota")["http_status"] == 429
    assert run.case("m-ok")["http_status"] == 200


def test_matrix_verdict_and_summary(matrix):
    _, run = matrix
    assert run.report is not None
    # wrong/truncated cases break the easy floor: that is a failure, not an inconclusive run
    assert run.code == 1 and run.report["verdict"] == "fail"
    counts = run.report["summary"]["counts"]
    expected: dict[str, int] = {}
    for _, _, label, _, _ in MATRIX.values():
        expected[label] = expected.get(label, 0) + 1
    assert {k: v for k, v in counts.items() if v} == expected


def test_refused_connection_is_retried_up_to_max_attempts(tmp_path, monkeypatch):
    monkeypatch.setenv("EVAL_API_KEY", KEY)
    rec = tmp_path / "rec.jsonl"
    run = live(tmp_path, refused_url(), [case("refused")], "--max-attempts", "3", "--record", str(rec))
    got = run.case("refused")
    assert run.code == 3 and run.report["verdict"] == "inconclusive"
    assert got["label"] == "drop" and got["attempts"] == 3
    assert "Connection refused" in " ".join(got["reasons"])
    (line,) = read_jsonl(rec)
    log = line["attempt_log"]
    assert [e["attempt"] for e in log] == [1, 2, 3]
    assert BACKOFF_1[0] <= log[0]["retry_in_s"] <= BACKOFF_1[1]
    assert BACKOFF_2[0] <= log[1]["retry_in_s"] <= BACKOFF_2[1]
    assert log[2]["gave_up"] == "gave up after 3 attempt(s) (--max-attempts)"
    assert "gave up after 3 attempt(s) (--max-attempts)" in got["reasons"]  # said in the report too
    assert run.wall >= BACKOFF_1[0] + BACKOFF_2[0]
    # the key never leaks, not even through a connection error
    assert_no_key(run, rec)


# --------------------------------------------------------------------------- 429 and Retry-After
@pytest.mark.parametrize("behaviour, low, high", [
    (Behaviour.rate_limited(retry_after=1), 1.0, 1.6),
    (Behaviour.rate_limited(retry_after_ms=400), 0.4, 0.9),  # ms, not 400 seconds
    (Behaviour.rate_limited(retry_after_date=1), 1.0, 2.6),  # HTTP date: 1 s resolution, rounded up
    (Behaviour.rate_limited(retry_after=0), BACKOFF_1[0], 1.0),  # 0 (or Azure's -1) is no wait: back off
], ids=["seconds", "ms", "http-date", "zero"])
def test_waits_as_asked_then_succeeds(tmp_path, srv, behaviour, low, high):
    srv.plant("rl", [behaviour, Behaviour.ok("Hello")])
    run = live(tmp_path, srv.url, [case("rl")])
    got = run.case("rl")
    assert got["label"] == "right" and got["attempts"] == 2 and srv.attempts("rl") == 2
    (gap,) = gaps(srv, "rl")
    assert low - 0.01 <= gap <= high


def test_retry_after_beyond_the_cap_gives_up_at_once(tmp_path, srv):
    srv.plant("rl-long", [Behaviour.rate_limited(retry_after=120), Behaviour.ok("Hello")])
    rec = tmp_path / "rec.jsonl"
    run = live(tmp_path, srv.url, [case("rl-long")], "--max-retry-after", "5", "--record", str(rec))
    got = run.case("rl-long")
    assert got["label"] == "drop" and got["attempts"] == 1 and srv.attempts("rl-long") == 1
    assert run.wall < 3.0
    assert "120" in read_jsonl(rec)[0]["attempt_log"][0]["gave_up"]
    assert any("retry after 120 s, more than the cap of 5 s" in r for r in got["reasons"])  # the report says why
    assert run.code == 3


def test_pauses_the_whole_run(tmp_path, srv):
    """Concurrency 4: after one 429 Retry-After 1, no worker sends anything until the pause is over."""
    srv.plant("rw-429", [Behaviour.rate_limited(retry_after=1), Behaviour.ok("Hello")])
    others = [f"rw-{i}" for i in range(9)]
    for key in others:
        srv.plant(key, Behaviour.ok("Hello", delay_ms=150))
    run = live(tmp_path, srv.url, [case("rw-429")] + [case(k) for k in others], "--concurrency", "4")
    assert run.code == 0, run.stdout
    t429 = srv.requests("rw-429")[0].t
    arrivals = sorted(r.t - t429 for r in srv.all_requests)
    first_batch = [a for a in arrivals if a < 0.1]
    later = [a for a in arrivals if a >= 0.1]
    assert len(first_batch) <= 4  # what was already in flight
    assert len(later) == len(arrivals) - len(first_batch) >= 7
    # without the run-wide pause the three busy workers would be back at ~0.15 s
    assert min(later) >= 1.0 - 0.01, arrivals
    assert srv.requests("rw-429")[1].t - t429 >= 1.0 - 0.01
    assert run.case("rw-429")["attempts"] == 2


# --------------------------------------------------------------------------- rule 11: a rate limit is not a failure
def test_rate_limits_use_no_attempts_nor_retry_budget(tmp_path, srv):
    """Four 429s, a 503, then the answer: right with --max-attempts 2 and --retry-budget 1 (the 503 spends it)."""
    srv.plant("rl-many", [Behaviour.rate_limited(retry_after_ms=20)] * 4 + [Behaviour.server_error(503), Behaviour.ok("Hello")])
    rec = tmp_path / "rec.jsonl"
    run = live(tmp_path, srv.url, [case("rl-many")], "--max-attempts", "2", "--retry-budget", "1", "--record", str(rec))
    got = run.case("rl-many")
    assert got["label"] == "right", got["reasons"]
    assert got["attempts"] == 6 == srv.attempts("rl-many")
    assert [e["http_status"] for e in read_jsonl(rec)[0]["attempt_log"]] == [429] * 4 + [503, 200]
    assert run.code == 0


def test_rate_limits_do_not_hide_a_failing_case(tmp_path, srv):
    """--max-attempts still ends a case that keeps failing between rate limits, and says what it did not count."""
    srv.plant("rl-503", [Behaviour.rate_limited(retry_after_ms=10), Behaviour.server_error(500)])
    run = live(tmp_path, srv.url, [case("rl-503")], "--max-attempts", "2")
    got = run.case("rl-503")
    assert got["label"] == "drop" and got["attempts"] == 3 == srv.attempts("rl-503")
    assert any("gave up after 2 attempt(s), besides 1 rate-limited one(s) (--max-attempts)" in r for r in got["reasons"])


@pytest.mark.parametrize("headers, low, high", [
    ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "300ms",
      "x-ratelimit-remaining-tokens": "9000", "x-ratelimit-reset-tokens": "6m0s"}, 0.3, 0.8),  # the spent limit's reset
    ({"x-ratelimit-reset-requests": "20ms", "x-ratelimit-reset-tokens": "1s"}, 1.0, 1.6),  # unknown which: the later
], ids=["requests-spent", "later-of-two"])
def test_429_waits_for_the_x_ratelimit_reset(tmp_path, srv, headers, low, high):
    srv.plant("rl-reset", [Behaviour.status(429, headers=headers), Behaviour.ok("Hello")])
    run = live(tmp_path, srv.url, [case("rl-reset")])
    assert run.case("rl-reset")["label"] == "right"
    (gap,) = gaps(srv, "rl-reset")
    assert low - 0.01 <= gap <= high


def test_the_runs_wait_on_rate_limits_is_bounded(tmp_path, srv):
    """A server that limits for good: after --max-rate-limit-wait the cases left are undelivered, saying why."""
    srv.default = Behaviour.rate_limited(retry_after_ms=150)
    keys = [f"rl-wall-{i}" for i in range(8)]
    run = live(tmp_path, srv.url, [case(k) for k in keys], "--concurrency", "2", "--max-rate-limit-wait", "0.5")
    assert run.wall < 4.0
    assert run.code == 3
    for key in keys:
        got = run.case(key)
        assert got["label"] == "drop" and got["gate"] == "undelivered"
        assert any("--max-rate-limit-wait" in r for r in got["reasons"]), got["reasons"]
    assert len(srv.all_requests) < 20  # once the wait is spent, no case is sent again


def test_the_outcome_says_how_long_the_run_waited(srv):
    srv.plant("rl-note", [Behaviour.rate_limited(retry_after_ms=100), Behaviour.ok("Hello")])
    out = run_live([planted_case("rl-note")], ClientSettings(base_url=srv.url, model="m"))
    assert 0.09 <= out.rate_limit_wait_s < 0.5 and not out.rate_limit_spent
    assert any("waited 0.1 s on 429s" in r for r in out.remarks())
    srv.plant("rl-spent", Behaviour.rate_limited(retry_after_ms=100))
    spent = run_live([planted_case("rl-spent")], ClientSettings(base_url=srv.url, model="m"), policy=RetryPolicy(max_rate_limit_wait_s=0.0))
    assert spent.rate_limit_spent and any("--max-rate-limit-wait" in r for r in spent.remarks())
    assert any("--max-rate-limit-wait" in r for r in spent.grades["rl-spent"][0].reasons)


def test_a_repeat_the_spent_rate_limit_left_unsent_is_lost_evidence(tmp_path, srv):
    """Three repeats: the first answers, the second meets a 429 the run may not wait for, the third is never sent: inconclusive, naming both."""
    srv.plant("rl-repeats", [Behaviour.ok("Hello"), Behaviour.rate_limited(retry_after_ms=100)])
    run = live(tmp_path, srv.url, [case("rl-repeats")], "--repeats", "3", "--concurrency", "1", "--max-rate-limit-wait", "0")
    assert run.code == 3, run.stdout
    assert srv.attempts("rl-repeats") == 2
    got = run.case("rl-repeats")
    assert got["label"] == "right"  # graded on the repeat it got, but not passed on it
    assert any("rl-repeats: repeat 2, 3 of 3 got no gradeable answer" in b for b in run.report["blockers"]), run.report["blockers"]


@pytest.mark.parametrize("seed", [1, 3, 13])
def test_a_chaos_server_ends_with_every_case_graded(tmp_path, seed):
    """120 requests/minute (a "minute" scaled to 3 s), 10% random 429 and 10% random 503, 48 cases at concurrency 6, default attempts.

    The 429s (bucket and random) cost no attempts, however many. A 503 costs half of one: with the
    default 3 attempts a case gives up after six 503s in a row (one case in a million), where three
    (one in 729) left a 48-case run in about 15 with an undelivered case: seeds 3 and 13 did (case 21,
    case 25), as did 17 and 21 of seeds 1..39. Each case's draws are fixed by the seed, so a seed's run
    is the same whatever the threads' order.
    """
    chaos = Chaos(rpm=120, burst=8, minute_s=3.0, share_429=0.1, share_503=0.1, seed=seed)
    with FakeOpenAI(Behaviour.ok("Hello from a busy endpoint"), chaos=chaos) as srv:
        keys = [f"chaos-{i}" for i in range(48)]
        run = live(tmp_path, srv.url, [case(k) for k in keys], "--concurrency", "6")
        assert srv.errors == []
    assert run.code == 0, run.stdout
    assert run.report is not None
    assert [c["label"] for c in run.report["cases"]] == ["right"] * 48
    assert all(c["gate"] == "pass" for c in run.report["cases"])
    counts = chaos.counts
    assert counts["bucket_429"] > 0 and counts["random_429"] > 0 and counts["random_503"] > 0, counts
    assert max(c["attempts"] for c in run.report["cases"]) > 3  # more than --max-attempts: the 429s were not counted
    assert run.wall < 20.0


def test_a_503_counts_half_an_attempt(tmp_path, srv):
    """At the default 3 attempts five 503s then the answer is right, six 503s are a drop, and 500, 503, 500, 503 spend them (1 + 1/2 + 1 + 1/2)."""
    srv.plant("busy-5", [Behaviour.server_error(503)] * 5 + [Behaviour.ok("Hello")])
    srv.plant("busy-6", [Behaviour.server_error(503)] * 6 + [Behaviour.ok("Hello")])
    srv.plant("mixed", [Behaviour.server_error(500), Behaviour.server_error(503), Behaviour.server_error(500), Behaviour.server_error(503), Behaviour.ok("Hello")])
    cases = [planted_case(k) for k in ("busy-5", "busy-6", "mixed")]
    out = run_live(cases, ClientSettings(base_url=srv.url, model="m"), concurrency=3, policy=RetryPolicy(base_delay_s=0.01, max_delay_s=0.02))
    assert out.grades["busy-5"][0].label.value == "right" and srv.attempts("busy-5") == 6
    (six,) = out.grades["busy-6"]
    assert six.label.value == "drop" and srv.attempts("busy-6") == 6
    assert any("gave up after 6 attempt(s) (6 of them 503, counted half: the server was busy) (--max-attempts)" in r for r in six.reasons)
    (mixed,) = out.grades["mixed"]
    assert mixed.label.value == "drop" and srv.attempts("mixed") == 4
    assert any("gave up after 4 attempt(s) (2 of them 503" in r for r in mixed.reasons)
    one = run_live([planted_case("busy-5")], ClientSettings(base_url=srv.url, model="m"), policy=RetryPolicy(max_attempts=1))
    assert one.grades["busy-5"][0].attempts == 1  # --max-attempts 1 is one attempt, 503 or not


# --------------------------------------------------------------------------- size cap (run_live, small cap)
def test_response_over_the_cap_is_cut_off_and_not_retried(srv):
    srv.plant("huge-fixed", Behaviour.huge(200_000))
    srv.plant("huge-endless", Behaviour.huge(None))
    cases = [planted_case(k)
             for k in ("huge-fixed", "huge-endless")]
    t0 = time.monotonic()
    out = run_live(cases, ClientSettings(base_url=srv.url, model="m", max_response_bytes=20_000), concurrency=2,
                   policy=RetryPolicy(max_attempts=3))
    assert time.monotonic() - t0 < 3.0
    for c in cases:
        (got,) = out.grades[c.id]
        assert got.http_status is None
        assert got.reasons[0] == "no response: response larger than the cap of 20000 bytes: cut off"
        assert got.attempts == 1 and srv.attempts(c.id) == 1


def test_streamed_response_over_the_cap_is_cut_off(srv):
    srv.plant("huge-stream", Behaviour.huge(None))
    c = planted_case("huge-stream")
    out = run_live([c], ClientSettings(base_url=srv.url, model="m", stream=True, max_response_bytes=50_000))
    (got,) = out.grades["huge-stream"]
    assert got.label.value == "drop" and "cut off" in got.reasons[0]
    assert got.attempts == 1 and srv.attempts("huge-stream") == 1
    assert srv.requests("huge-stream")[0].stream


def test_slow_body_past_the_deadline_is_a_timeout(srv):
    srv.plant("trickle", Behaviour.slow_body(chunks=4, gap_ms=600))
    c = planted_case("trickle", timeout_s=0.3)
    out = run_live([c], ClientSettings(base_url=srv.url, model="m"), policy=RetryPolicy(max_attempts=1))
    (got,) = out.grades["trickle"]
    assert got.reasons[0] == "no response: Deadline: no complete response within the case deadline of 0.3 s (connect to last byte)"
    assert got.elapsed_ms is not None and 250 <= got.elapsed_ms < 1000


def test_a_trickle_inside_the_read_timeout_still_ends_at_the_deadline(srv):
    """Each chunk comes well within the read timeout; the total must still stop at timeout_s."""
    srv.plant("drip", Behaviour.slow_body(chunks=3, gap_ms=900))
    c = planted_case("drip", timeout_s=1.0)
    out = run_live([c], ClientSettings(base_url=srv.url, model="m"), policy=RetryPolicy(max_attempts=1))
    (got,) = out.grades["drip"]
    assert "deadline of 1 s" in got.reasons[0]
    assert got.elapsed_ms is not None and 900 <= got.elapsed_ms < 1300  # not the 1.8 s it takes to notice after the next chunk


def test_an_interrupt_during_a_retry_wait_sends_no_early_retry(srv):
    import threading

    srv.plant("wait", [Behaviour.server_error(503, headers={"Retry-After": "4"}), Behaviour.ok("Hello")])
    c = planted_case("wait")
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    t0 = time.monotonic()
    out = run_live([c], ClientSettings(base_url=srv.url, model="m"), stop=stop, grace_s=2.0)
    assert time.monotonic() - t0 < 2.0
    assert srv.attempts("wait") == 1  # the retry was not sent early
    (got,) = out.grades["wait"]
    assert got.http_status == 503 and "interrupted before a retry" in got.reasons


# --------------------------------------------------------------------------- streaming
STREAM: dict[str, tuple[Any, dict[str, Any], str, int]] = {
    "s-ok": (Behaviour.ok("Hello there, friend", ttft_ms=100, chunk_gap_ms=30, pings=True), {}, "right", 1),
    "s-cut": (Behaviour.stream_cut("Hello is"), {}, "drop", 2),  # rule 8: the server cut it, retried
    "s-cut-done": (Behaviour.stream_cut("Hello is", done=True), {}, "drop", 2),  # llama-cpp-python's bare [DONE]
    "s-cut-then-ok": ([Behaviour.stream_cut("Hello is"), Behaviour.ok("Hello there")], {}, "right", 2),
    "s-error": (Behaviour.stream_error("Hello"), {}, "drop", 2),
    "s-azure": (Behaviour.stream_azure_prefilter("Hello from Azure", model="served-azure"), {}, "right", 1),
    "s-tool": (Behaviour.tool_call("get_weather", {"city": "Edinburgh", "units": "c"}), {"tools": [WEATHER_TOOL], "expect": None, "expect_json": {"city": "Edinburgh"}}, "right", 1),
    "s-refusal": (Behaviour.refusal(), {}, "wrong", 1),
    "s-length": (Behaviour.length("Hello wor"), {}, "truncated", 1),
    "s-null": (Behaviour.null_content(), {}, "empty", 2),
    "s-empty": (Behaviour.empty_choices(), {}, "empty", 2),
}


@pytest.fixture(scope="module")
def streamed(tmp_path_factory):
    with FakeOpenAI() as s:
        for key, (behaviour, _, _, _) in STREAM.items():
            s.plant(key, behaviour)
        cases = [case(key, **extra) for key, (_, extra, _, _) in STREAM.items()]
        run = live(tmp_path_factory.mktemp("stream"), s.url, cases, "--stream", "--concurrency", "9", "--max-attempts", "2")
        yield s, run
    assert s.errors == []


@pytest.mark.parametrize("key", list(STREAM))
def test_streamed_label_and_attempts(streamed, key):
    srv, run = streamed
    _, _, label, attempts = STREAM[key]
    got = run.case(key)
    assert got["label"] == label, got["reasons"]
    assert got["attempts"] == attempts == srv.attempts(key)
    assert all(r.stream for r in srv.requests(key))


def test_stream_ttft_and_total_time(streamed):
    _, run = streamed
    got = run.case("s-ok")
    # ttft_ms=100 on the server; ": ping" comments sent before it must not count as the first token
    assert 95 <= got["ttft_ms"] <= 250
    # three content deltas and a finish chunk, each 30 ms apart, come after the first token
    assert got["ms"] >= got["ttft_ms"] + 100
    assert got["finish_reason"] == "stop"
    md = (run.out / "report.md").read_text("utf-8")
    assert "| ttft ms" in md  # report.md shows time to first token for streamed runs


def test_stream_asks_for_usage_and_reports_real_tokens(streamed):
    srv, run = streamed
    body = srv.requests("s-ok")[0].body
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["model"] == "alias"
    got = run.case("s-ok")
    assert got["tokens_estimated"] is False
    assert isinstance(got["tokens"], int) and got["tokens"] > 0


def test_stream_cut_and_error_reasons(streamed):
    _, run = streamed
    for key in ("s-cut", "s-cut-done"):
        reasons = " ".join(run.case(key)["reasons"])
        assert "stream cut: it ended before a finish_reason" in reasons and "gave up after 2 attempt(s)" in reasons
    error = " ".join(run.case("s-error")["reasons"])
    assert "HTTP 200 carrying an error" in error and "generation failed" in error
    assert "model refused" in " ".join(run.case("s-refusal")["reasons"])


def test_cut_streams_are_counted_and_suggest_concurrency_1(srv):
    """Every cut attempt counts, retried or not; one cut alone suggests nothing."""
    srv.plant("cut-a", [Behaviour.stream_cut("Hello", done=True), Behaviour.ok("Hello")])
    srv.plant("cut-b", [Behaviour.stream_cut("Hello"), Behaviour.stream_cut("Hello"), Behaviour.ok("Hello")])
    srv.plant("cut-length", Behaviour.length("Hello wor"))
    cases = [planted_case(k) for k in ("cut-a", "cut-b", "cut-length")]
    settings = ClientSettings(base_url=srv.url, model="m", stream=True)
    out = run_live(cases, settings, policy=RetryPolicy(base_delay_s=0.01))
    assert out.cut_streams == 3
    assert [g.attempts for c in cases for g in out.grades[c.id]] == [2, 3, 1]
    assert any("try --concurrency 1" in r for r in out.remarks())
    srv.plant("cut-once", [Behaviour.stream_cut("Hello"), Behaviour.ok("Hello")])
    once = run_live([planted_case("cut-once")], settings, policy=RetryPolicy(base_delay_s=0.01))
    assert once.cut_streams == 1 and once.remarks() == []


def test_stream_model_is_the_first_non_empty_one(streamed):
    _, run = streamed
    assert run.case("s-azure")["model_id"] == "served-azure"  # Azure's first chunk has model ""
    assert run.case("s-ok")["model_id"] == "fake-model-1"


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_calls_reuse_the_connection(tmp_path, srv, stream):
    """A new connection per call would put a handshake inside every measured ms (and ttft)."""
    keys = [f"reuse-{i}" for i in range(5)]
    run = live(tmp_path, srv.url, [case(k) for k in keys], "--concurrency", "1", *(["--stream"] if stream else []))
    assert run.code == 0
    assert len(srv.all_requests) == 5
    assert len({r.client for r in srv.all_requests}) == 1


def test_stream_held_open_after_done_is_still_an_answer(tmp_path):
    """A server that sends [DONE] but never ends the chunked body: graded at [DONE], no timeout, no wait."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    release = threading.Event()
    events = [{"model": "held-open", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hello"}, "finish_reason": None}]},
              {"model": "held-open", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]
    body = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"

    def handle(conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                         + b"%x\r\n%s\r\n" % (len(body), body))
            release.wait(10)  # no terminal chunk, no close

    def accept() -> None:
        while not release.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        run = live(tmp_path, f"http://127.0.0.1:{port}/v1", [case("held-1"), case("held-2")], "--stream",
                   "--concurrency", "1", "--timeout", "5")
    finally:
        release.set()
        listener.close()
    assert run.code == 0, run.stdout
    for key in ("held-1", "held-2"):
        got = run.case(key)
        assert got["label"] == "right" and got["attempts"] == 1 and got["model_id"] == "held-open"
        assert got["ms"] < 500
    assert run.wall < 3.0


# --------------------------------------------------------------------------- concurrency and repeats
def test_results_keep_fixture_order_whatever_finishes_first(tmp_path, srv):
    delays = [400, 340, 280, 220, 160, 100, 40, 0]
    keys = [f"order-{i}" for i in range(len(delays))]
    for key, delay in zip(keys, delays, strict=False):
        srv.plant(key, Behaviour.ok("Hello", delay_ms=delay))
    run = live(tmp_path, srv.url, [case(k) for k in keys], "--concurrency", "8")
    assert run.code == 0
    assert [c["id"] for c in run.report["cases"]] == keys
    for key, delay in zip(keys, delays, strict=False):
        ms = run.case(key)["ms"]
        assert delay <= ms < delay + 150, (key, ms)  # each case got its own envelope
    assert run.wall < sum(delays) / 1000  # and they ran side by side


def test_repeats_give_median_and_p95_per_case(tmp_path, srv):
    keys = ["rep-a", "rep-b"]
    for key in keys:
        srv.plant(key, [Behaviour.ok("Hello", delay_ms=d) for d in (30, 90, 150)])
    run = live(tmp_path, srv.url, [case(k) for k in keys], "--repeats", "3", "--concurrency", "3")
    assert run.code == 0
    for key in keys:
        got = run.case(key)
        assert srv.attempts(key) == 3
        assert got["repeats"] == 3 and got["attempts"] == 3
        assert 90 <= got["ms"] < 150  # the median repeat
        assert 150 <= got["ms_p95"] < 260  # nearest-rank p95 of three: the slowest
    assert run.report["run"]["repeats"] == 3


# --------------------------------------------------------------------------- fingerprint
def test_model_id_comes_from_the_response_not_the_flag(tmp_path, srv):
    srv.plant("fp", Behaviour.ok("Hello", model="served-model-x"))
    run = live(tmp_path, srv.url, [case("fp")], model="alias")
    assert srv.requests("fp")[0].body["model"] == "alias"
    assert run.case("fp")["model_id"] == "served-model-x"
    assert run.report["fingerprint"]["model_id"] == "served-model-x"
    assert run.code == 0


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_adjudication_without_a_model_id_fails_closed(tmp_path, srv, stream):
    srv.plant("blind", Behaviour.ok("Hello", model=""))
    srv.plant("seen", Behaviour.ok("Hello", model="served-model-x"))
    args = ["--lane", "adjudication"] + (["--stream"] if stream else [])
    run = live(tmp_path, srv.url, [case("blind"), case("seen")], *args)
    assert run.code == 3
    assert run.report["verdict"] == "inconclusive"
    assert run.case("blind")["label"] == "right" and run.case("blind")["model_id"] is None
    (blocker,) = run.report["blockers"]
    assert "blind" in blocker and "seen" not in blocker
    assert "blind" in run.stdout


def test_smoke_lane_without_a_model_id_is_not_blocked(tmp_path, srv):
    srv.plant("blind-smoke", Behaviour.ok("Hello", model=""))
    run = live(tmp_path, srv.url, [case("blind-smoke")])
    assert run.code == 0 and run.report["blockers"] == []


# --------------------------------------------------------------------------- secrets
def assert_no_key(run: Run, *extra: Path) -> None:
    files = [p for p in run.out.rglob("*") if p.is_file()] + list(extra)
    assert files
    for path in files:
        assert KEY not in path.read_text("utf-8", "replace"), path
    assert KEY not in run.stdout
    assert KEY not in run.stderr


def test_key_is_sent_as_bearer_and_never_written(tmp_path, srv, monkeypatch):
    monkeypatch.setenv("EVAL_API_KEY", KEY)
    srv.plant("sec-ok", Behaviour.ok("Hello"))
    # a proxy that echoes the key back in its error body
    srv.plant("sec-echo", Behaviour.status(401, {"error": {"message": f"Incorrect API key provided: {KEY}",
                                                           "type": "invalid_request_error", "code": "invalid_api_key"}}))
    srv.plant("sec-reset", Behaviour.reset())
    rec = tmp_path / "rec.jsonl"
    run = live(tmp_path, srv.url, [case("sec-ok"), case("sec-echo"), case("sec-reset")], "--record", str(rec),
               "--max-attempts", "2")
    for key in ("sec-ok", "sec-echo", "sec-reset"):
        for request in srv.requests(key):
            assert request.headers["authorization"] == f"Bearer {KEY}"
    assert run.case("sec-ok")["label"] == "right"
    assert "Incorrect API key provided: ***" in " ".join(run.case("sec-echo")["reasons"])
    assert_no_key(run, rec)


def test_no_key_no_authorization_header(tmp_path, srv):
    srv.plant("nokey", Behaviour.ok("Hello"))
    run = live(tmp_path, srv.url, [case("nokey")])
    assert run.code == 0
    assert "authorization" not in srv.requests("nokey")[0].headers


# --------------------------------------------------------------------------- recordings and replay
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_record_then_replay_gives_the_same_grades(tmp_path, srv, stream):
    plants = {
        "rec-ok": Behaviour.ok("Hello", headers={"Set-Cookie": "session=abc123; HttpOnly"}, chunk_gap_ms=5),
        "rec-wrong": Behaviour.ok("Goodbye"),
        "rec-503": [Behaviour.server_error(503), Behaviour.ok("Hello")],
        "rec-length": Behaviour.length("Hello wo"),
        "rec-tool": Behaviour.tool_call("lookup", {"q": "Hello"}),
        "rec-reset": Behaviour.reset(),
        "rec-cut": Behaviour.stream_cut("Hello is"),
    }
    for key, behaviour in plants.items():
        srv.plant(key, behaviour)
    fixtures = write_fixtures(tmp_path / "fixtures", [case(k) for k in plants])
    rec = tmp_path / "recordings" / "live.jsonl"
    args = ["--base-url", srv.url, "--model", "alias", "--repeats", "2", "--max-attempts", "2", "--concurrency", "7",
            "--record", str(rec)] + (["--stream"] if stream else [])
    first = cli(fixtures, tmp_path / "live-out", *args)
    lines = read_jsonl(rec)
    assert len(lines) == len(plants) * 2  # one line per envelope, repeats included
    assert sorted(l["id"] for l in lines) == sorted(list(plants) * 2)
    for line in lines:
        recorded = line["recorded"]
        assert recorded["attempts"] >= 1 and recorded["elapsed_ms"] >= 0
        assert len(line["attempt_log"]) == recorded["attempts"]
        if "error" in recorded:
            assert line["id"] == "rec-reset"
            continue
        assert isinstance(recorded["http_status"], int)
        assert recorded["headers"] == {}  # no response header is recorded unless record_headers names it
        if isinstance(recorded["body"], dict):
            assert "id" not in recorded["body"] and "created" not in recorded["body"]
        assert isinstance(recorded["body"], (dict, str))
        if stream and recorded["http_status"] == 200:
            assert recorded["ttft_ms"] <= recorded["elapsed_ms"]
            assert isinstance(recorded["stream_complete"], bool)
    assert {l["recorded"]["attempts"] for l in lines if l["id"] == "rec-503"} >= {2}

    replayed = cli(fixtures, tmp_path / "replay-out", "--replay", str(rec))
    assert replayed.report["run"]["mode"] == "replay"
    assert first.report["run"]["mode"] == "live"
    keys = ("id", "label", "channel", "attempts", "repeats", "ms", "ms_p95", "ttft_ms", "chars", "tokens", "model_id",
            "finish_reason", "http_status", "reasons")
    for a, b in zip(first.report["cases"], replayed.report["cases"], strict=False):
        assert {k: a[k] for k in keys} == {k: b[k] for k in keys}
    assert first.report["summary"] == replayed.report["summary"]
    assert first.code == replayed.code


LOOKUP_TOOL = {"type": "function", "function": {"name": "lookup_order", "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}}}}


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_tool_call_assertions_live_then_replayed(tmp_path, srv, stream):
    """Issue #9: `tool-call` graded on the wire's tool calls, sent with the case's tools, then the same offline."""
    plants = {
        "tc-right": (Behaviour.tool_call("lookup_order", {"order_id": "NW-1", "verbose": True}), "right", []),
        "tc-name": (Behaviour.tool_call("cancel_order", {"order_id": "NW-1"}), "wrong", ["no call to lookup_order (called: cancel_order)"]),
        "tc-args": (Behaviour.tool_call("lookup_order", {"order_id": "NW-2"}), "wrong",
                    ['tool call lookup_order: arguments $.order_id: expected "NW-1", got "NW-2"']),
        "tc-broken": (Behaviour.tool_call("lookup_order", '{"order_id": NW-1}'), "schema",
                      ["tool call 1: lookup_order: arguments are not JSON: Expecting value at char 13"]),
        "tc-prose": (Behaviour.ok("Your order shipped."), "wrong", ["no tool call (expected lookup_order)"]),
    }
    for key, (behaviour, _, _) in plants.items():
        srv.plant(key, behaviour)
    expect = {"type": "tool-call", "value": {"name": "lookup_order", "arguments": {"order_id": "NW-1"}}}
    cases = [case(key, None, tools=[LOOKUP_TOOL], tool_choice="auto", **{"assert": [expect]}) for key in plants]
    rec = tmp_path / "rec.jsonl"
    run = live(tmp_path, srv.url, cases, "--record", str(rec), *(["--stream"] if stream else []))
    replayed = cli(tmp_path / "fixtures", tmp_path / "replay-out", "--replay", str(rec))
    for key, (_, label, reasons) in plants.items():
        (sent,) = srv.requests(key)
        assert sent.body["tools"] == [LOOKUP_TOOL] and sent.body["tool_choice"] == "auto" and sent.stream is stream
        got = run.case(key)
        assert (got["label"], got["reasons"]) == (label, reasons)
        again = replayed.case(key)
        assert (again["label"], again["reasons"]) == (label, reasons)


def test_recording_survives_a_lone_surrogate(tmp_path, srv):
    raw = (b'{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"message":'
           b'{"role":"assistant","content":"Hello \\ud800 there"},"finish_reason":"stop"}]}')
    srv.plant("surrogate", Behaviour.status(200, raw))
    srv.plant("after", Behaviour.ok("Hello"))
    rec = tmp_path / "rec.jsonl"
    run = live(tmp_path, srv.url, [case("surrogate"), case("after")], "--record", str(rec), "--concurrency", "1")
    assert [l["id"] for l in read_jsonl(rec)] == ["surrogate", "after"]
    assert run.case("after")["label"] == "right"
    assert run.case("surrogate")["label"] == "right"


# --------------------------------------------------------------------------- progress
def test_progress_without_a_tty_is_one_line_per_tenth(tmp_path, srv):
    keys = [f"prog-{i}" for i in range(50)]
    run = live(tmp_path, srv.url, [case(k) for k in keys], "--repeats", "2", "--concurrency", "8")
    assert run.code == 0
    assert len(srv.all_requests) == 100
    progress = [l for l in run.stderr.splitlines() if re.match(r"^\[\d+/100\] ", l)]
    assert 1 <= len(progress) <= 11
    assert progress[-1].startswith("[100/100] right=100 ")
    assert len(run.stderr.splitlines()) <= 12  # nothing per request
    assert "\r" not in run.stderr


# --------------------------------------------------------------------------- interrupts
def start_cli(tmp_path: Path, url: str, keys: list[str]) -> subprocess.Popen[str]:
    fixtures = write_fixtures(tmp_path / "fixtures", [case(k) for k in keys])
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVAL_")}
    env["PYTHONUNBUFFERED"] = "1"
    return subprocess.Popen(
        [sys.executable, "-m", "envelope_ci", "run", str(fixtures), "--out", str(tmp_path / "out"),
         "--base-url", url, "--model", "alias", "--concurrency", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True,
    )


def wait_for_requests(srv: FakeOpenAI, n: int, proc: subprocess.Popen[str], timeout: float = 15.0) -> float:
    deadline = time.monotonic() + timeout
    while len(srv.all_requests) < n:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the CLI never reached the server"
        time.sleep(0.02)
    return time.monotonic()


def test_first_interrupt_finishes_politely_and_is_inconclusive(tmp_path, srv):
    hang_s = 3.0
    keys = [f"int-{i}" for i in range(6)]
    for key in keys:
        srv.plant(key, Behaviour.hang(hang_s, content="Hello, late"))
    proc = start_cli(tmp_path, srv.url, keys)
    try:
        started = wait_for_requests(srv, 2, proc)
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    ended = time.monotonic() - started
    assert proc.returncode == 3, (stdout, stderr)
    # the two calls in flight finish (~3 s); the four never started would have taken 6 s more
    assert ended < hang_s + 2.0
    assert len(srv.all_requests) == 2
    report = json.loads((tmp_path / "out" / "report.json").read_text("utf-8"))
    assert report["verdict"] == "inconclusive"
    assert any("interrupted" in b for b in report["blockers"])
    labels = {c["id"]: c["label"] for c in report["cases"]}
    finished = {r.key for r in srv.all_requests}
    assert all(labels[k] == "right" for k in finished)
    assert all(labels[k] == "drop" for k in set(keys) - finished)
    assert "stopping" in stderr


def test_second_interrupt_leaves_at_once(tmp_path, srv):
    keys = [f"int2-{i}" for i in range(4)]
    for key in keys:
        srv.plant(key, Behaviour.hang(10.0))
    proc = start_cli(tmp_path, srv.url, keys)
    try:
        wait_for_requests(srv, 2, proc)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        time.sleep(0.3)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, (stdout, stderr)
    assert time.monotonic() - t0 < 2.0
    assert "interrupted" in stderr
