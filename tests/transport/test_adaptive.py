"""Adaptive concurrency: 429s lower the run's concurrency, answers raise it back, used-up limits pace it.

The limiter is tested alone with a fake clock; the live tests run the whole pipeline (``api.run``)
against ``tests/support/fake_openai.py`` twice, adapting and at a fixed ``--concurrency``, and compare
how many 429s the server had to send. They assert orders and comparisons, never exact times.
"""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from envelope_ci.api import run
from envelope_ci.config import RunConfig
from envelope_ci.model import Case, Envelope, RetryPolicy
from envelope_ci.report.model import report_schema
from envelope_ci.transport.adaptive import MAX_HISTORY_POINTS, AdaptiveLimit, Pressure
from envelope_ci.transport.http import ClientSettings
from envelope_ci.transport.pool import LiveOutcome, run_live
from envelope_ci.transport.retry import Throttle, pressure
from envelope_ci.transport.retry_after import spent_limit_reset_s
from tests.support.fake_openai import Behaviour, Chaos, FakeOpenAI

LIMITED, ANSWERED, NEITHER = Pressure.LIMITED, Pressure.ANSWERED, Pressure.NEITHER


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def limiter(ceiling: int = 8, adaptive: bool = True) -> tuple[AdaptiveLimit, Clock]:
    clock = Clock()
    return AdaptiveLimit(ceiling, adaptive, clock), clock


def attempts(lim: AdaptiveLimit, *signals: Pressure) -> None:
    """As many attempts admitted together as there are signals (no more than the limit), then each returning with its signal."""
    assert len(signals) <= lim.limit
    stop = threading.Event()
    epochs = [lim.acquire(stop) for _ in signals]
    for epoch, signal in zip(epochs, signals, strict=True):
        lim.release(epoch, signal)


# --------------------------------------------------------------------------- the limiter
def test_a_burst_of_429s_halves_the_limit_once():
    lim, clock = limiter()
    clock.now += 1.5
    attempts(lim, *[LIMITED] * 8)  # eight refusals of one overload, all admitted before the decrease
    assert lim.limit == 4 and lim.history == [(0.0, 8), (1.5, 4)]
    attempts(lim, LIMITED, LIMITED)  # admitted after it: the overload goes on, halve again (once)
    assert lim.limit == 2


def test_the_limit_never_goes_below_one_nor_above_the_ceiling():
    lim, _ = limiter(4)
    for _ in range(5):
        attempts(lim, LIMITED)
    assert lim.limit == 1 and [n for _, n in lim.history] == [4, 2, 1]
    for _ in range(50):
        attempts(lim, ANSWERED)
    assert lim.limit == 4 and [n for _, n in lim.history] == [4, 2, 1, 2, 3, 4]


def test_the_limit_rises_by_one_after_as_many_answers_in_a_row():
    lim, _ = limiter(8)
    attempts(lim, LIMITED)
    attempts(lim, LIMITED)
    assert lim.limit == 2
    attempts(lim, ANSWERED)
    assert lim.limit == 2  # one answer at 2 is not yet a round
    attempts(lim, ANSWERED)
    assert lim.limit == 3
    attempts(lim, ANSWERED, ANSWERED)
    attempts(lim, NEITHER, LIMITED)  # a drop says nothing; a 429 breaks the row, and halves
    assert lim.limit == 1


def test_answers_admitted_before_a_decrease_do_not_raise_it():
    lim, _ = limiter(8)
    stop = threading.Event()
    old = [lim.acquire(stop) for _ in range(8)]
    lim.release(old.pop(), LIMITED)
    for epoch in old:  # the overload's other requests come back answered: still the overload
        lim.release(epoch, ANSWERED)
    assert lim.limit == 4


def test_a_fixed_concurrency_never_moves():
    lim, _ = limiter(8, adaptive=False)
    attempts(lim, *[LIMITED] * 8)
    attempts(lim, LIMITED)
    assert lim.limit == 8 and lim.history == [(0.0, 8)]


def test_attempts_wait_for_a_slot_and_a_stop_lets_them_go():
    lim, _ = limiter(2)
    attempts(lim, LIMITED)
    stop = threading.Event()
    held = lim.acquire(stop)
    got: list[float] = []
    waiter = threading.Thread(target=lambda: got.append(lim.acquire(stop)))
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive(), "the limit is 1 and one attempt is in flight"
    lim.release(held, ANSWERED)
    waiter.join(2.0)
    assert got == [1]
    blocked = threading.Thread(target=lambda: lim.acquire(stop))
    blocked.start()
    stop.set()
    blocked.join(2.0)
    assert not blocked.is_alive()


def test_a_long_oscillation_keeps_a_short_history_of_changes():
    lim, clock = limiter(2)
    for _ in range(1000):
        clock.now += 0.01
        attempts(lim, LIMITED)
        attempts(lim, ANSWERED)
    assert len(lim.history) <= MAX_HISTORY_POINTS
    assert lim.history[0] == (0.0, 2) and min(n for _, n in lim.history) == 1 and lim.history[-1][1] == lim.limit
    assert all(a[1] != b[1] and a[0] <= b[0] for a, b in zip(lim.history, lim.history[1:], strict=False))


@pytest.mark.parametrize("status, headers, answered, expected", [
    (429, {}, False, LIMITED),
    (503, {"retry-after": "1"}, False, LIMITED),
    (503, {}, False, NEITHER),  # busy, but it did not say when to come back: a retry's backoff, not the run's concurrency
    (500, {}, False, NEITHER),
    (None, {}, False, NEITHER),  # a drop says nothing about the server's capacity
    (200, {}, True, ANSWERED),
])
def test_what_an_attempt_says_about_capacity(status, headers, answered, expected):
    assert pressure(Envelope(http_status=status, headers=headers), answered) is expected


# --------------------------------------------------------------------------- pacing on x-ratelimit-remaining-*
@pytest.mark.parametrize("headers, expected", [
    ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "300ms"}, 0.3),
    ({"X-RateLimit-Remaining-Tokens": "0", "x-ratelimit-reset-tokens": "2s", "x-ratelimit-reset-requests": "9s"}, 2.0),
    ({"x-ratelimit-remaining-requests": "5", "x-ratelimit-reset-requests": "300ms"}, None),  # not used up: no hold
    ({"x-ratelimit-remaining-requests": "0"}, None),  # used up, reset unknown: the 429 will say
    ({}, None),
])
def test_a_used_up_limit_says_when_it_resets(headers, expected):
    assert spent_limit_reset_s(headers) == expected


def test_pacing_counts_as_rate_limit_wait_and_never_ends_the_run():
    throttle = Throttle(threading.Event(), max_wait_s=1.0)
    throttle.pace(0.4)
    assert throttle.waited_s == pytest.approx(0.4, abs=0.01) and throttle.paced_s == pytest.approx(0.4, abs=0.01)
    throttle.pace(5.0)  # would pass --max-rate-limit-wait: not taken, and the run goes on
    assert not throttle.spent and throttle.waited_s == pytest.approx(0.4, abs=0.01)
    assert throttle.pause(0.5) and not throttle.spent  # the 429s still have what is left of the cap


def test_pacing_holds_the_next_request_until_the_reset(tmp_path):
    used_up = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "400ms"}
    with FakeOpenAI(Behaviour.ok("Hello")) as srv:
        srv.plant("first", Behaviour.ok("Hello", headers=used_up))
        out = run_live([planted("first"), planted("second")], ClientSettings(base_url=srv.url, model="m"), concurrency=1)
        first, second = (srv.requests(k)[0].t for k in ("first", "second"))
    assert second - first >= 0.38  # held until the limit reset, not refused
    assert all(r.behaviour.status_code == 200 for r in srv.all_requests)
    assert 0.35 <= out.paced_s <= out.rate_limit_wait_s < 1.0
    assert any("holding requests until a used-up x-ratelimit-remaining-* reset" in r for r in out.remarks())


# --------------------------------------------------------------------------- remarks and the report block
def test_the_remark_says_how_far_the_concurrency_fell_and_whether_it_came_back():
    back = LiveOutcome({}, concurrency=8, concurrency_history=((0.0, 8), (3.1, 4), (3.4, 2), (5.0, 3), (9.0, 8)))
    assert "concurrency lowered from 8 to 2 at 3.4 s by 429s or 503s with Retry-After, back to 8 by 9.0 s" in " ".join(back.remarks())
    low = LiveOutcome({}, concurrency=8, concurrency_history=((0.0, 8), (1.0, 4), (2.0, 5)))
    assert "lowered from 8 to 4 at 1.0 s by 429s or 503s with Retry-After, 5 at the end" in " ".join(low.remarks())
    assert LiveOutcome({}, concurrency=8, concurrency_history=((0.0, 8),)).remarks() == []
    block = back.live_run()
    assert block.concurrency_max == 8 and [(p.t_s, p.limit) for p in block.concurrency_history][-1] == (9.0, 8)


# --------------------------------------------------------------------------- live: 429 in bursts
def planted(key: str) -> Case:
    return Case(id=key, stratum=None, messages=({"role": "user", "content": f"[[{key}]]"},), file="t", line=None, digest="")


@dataclass
class Overload:
    """A server overloaded for a while: from its ``start``-th request on, ``length_s`` of 429s (retry-after-ms), then fine again.

    FakeOpenAI asks it first, under its lock, as it asks a Chaos (None: serve as planted).
    """

    start: int = 40
    length_s: float = 0.8
    counts: dict[str, int] = field(default_factory=lambda: {"burst_429": 0})
    _seen: int = 0
    _from: float | None = None

    def behaviour(self, key: str | None) -> Behaviour | None:
        self._seen += 1
        now = time.monotonic()
        if self._from is None and self._seen >= self.start:
            self._from = now
        if self._from is not None and now < self._from + self.length_s:
            self.counts["burst_429"] += 1
            return Behaviour.rate_limited(retry_after_ms=100)
        return None


def live_run(tmp_path: Path, chaos: Any, n: int, adaptive: bool) -> dict[str, Any]:
    """The whole pipeline at --concurrency 8 against a 50 ms server behind ``chaos``; report.json's data."""
    fixtures = tmp_path / "fixtures"
    fixtures.mkdir(exist_ok=True)
    cases = [{"id": f"c-{i:03d}", "prompt": f"[[c-{i:03d}]]", "expect_fragment": "Hello"} for i in range(n)]
    (fixtures / "cases.json").write_text(json.dumps(cases), "utf-8")
    out = tmp_path / ("adaptive" if adaptive else "fixed")
    with FakeOpenAI(Behaviour.ok("Hello there", delay_ms=50), chaos=chaos) as srv:
        result = run(RunConfig(fixtures, fixtures / "pins.json", out, base_url=srv.url, model="m", concurrency=8, quiet=True,
                               retry=RetryPolicy(adaptive_concurrency=adaptive)))
        assert srv.errors == []
    assert result.exit_code == 0
    data: dict[str, Any] = json.loads((out / "report.json").read_text("utf-8"))
    assert [c["label"] for c in data["cases"]] == ["right"] * n  # every case graded, none given up on
    return data


def history(report: dict[str, Any]) -> list[tuple[float, int]]:
    return [(p["t_s"], p["limit"]) for p in report["live"]["concurrency_history"]]


def test_a_burst_of_429s_lowers_the_concurrency_and_answers_bring_it_back(tmp_path):
    adaptive, fixed = Overload(), Overload()
    got = live_run(tmp_path, adaptive, 150, adaptive=True)
    same = live_run(tmp_path, fixed, 150, adaptive=False)
    assert 0 < adaptive.counts["burst_429"] < fixed.counts["burst_429"], (adaptive.counts, fixed.counts)
    points = history(got)
    lowest = min(range(len(points)), key=lambda i: points[i][1])
    assert points[0] == (0.0, 8) and points[lowest][1] <= 2 and points[-1][1] == 8 and lowest < len(points) - 1, points
    assert [t for t, _ in points] == sorted(t for t, _ in points)
    assert got["live"]["concurrency_max"] == 8 and got["live"]["rate_limit_wait_s"] > 0
    assert any(n.startswith("concurrency lowered from 8 to ") and "back to 8 by" in n for n in got["notes"]), got["notes"]
    assert history(same) == [(0.0, 8)]
    jsonschema.Draft202012Validator(report_schema()).validate(got)


def test_a_token_bucket_sees_fewer_429s_than_at_a_fixed_concurrency(tmp_path):
    """20 requests a second, 10 at once: at a fixed 8 every run-wide pause ends with the whole pool refused but one."""
    adaptive, fixed = (Chaos(rpm=60, burst=10, minute_s=3.0, share_429=0.0, share_503=0.0) for _ in range(2))
    got = live_run(tmp_path, adaptive, 60, adaptive=True)
    live_run(tmp_path, fixed, 60, adaptive=False)
    assert 0 < adaptive.counts["bucket_429"] * 2 < fixed.counts["bucket_429"], (adaptive.counts, fixed.counts)
    limits = [n for _, n in history(got)]
    first_low = next(i for i, n in enumerate(limits) if n < 8)
    assert min(limits) < 8 and max(limits[first_low:]) > min(limits), limits  # lowered, and raised again after


def test_an_offline_report_has_no_live_block(tmp_path):
    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    (fixtures / "cases.json").write_text(json.dumps([{"id": "c", "prompt": "hi", "expect_fragment": "Hello", "completion": "Hello"}]), "utf-8")
    run(RunConfig(fixtures, fixtures / "pins.json", tmp_path / "out", quiet=True))
    assert "live" not in json.loads((tmp_path / "out" / "report.json").read_text("utf-8"))
