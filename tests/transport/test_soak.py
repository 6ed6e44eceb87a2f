"""A soak: thousands of cases against the fake server planting a seeded mix of every fault, nothing left behind.

The short soak runs by default (1,000 cases at concurrency 32, a few seconds). The long one (20,000
cases at concurrency 64, plain and streamed, a few minutes) runs with ENVELOPE_CI_SOAK=1:

    ENVELOPE_CI_SOAK=1 python -m pytest -q tests/transport/test_soak.py
"""
from __future__ import annotations

import gc
import json
import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from envelope_ci.api import run
from envelope_ci.config import RunConfig
from envelope_ci.model import PINS_NAME, RetryPolicy
from tests.support.fake_openai import Behaviour, FakeOpenAI
from tests.support.suites import make_suite

ATTEMPTS = 3
# Faults worth a retry, with the label each leaves when it is the last attempt (plain, streamed).
TRANSIENT: dict[str, tuple[Callable[[], Behaviour], str, str]] = {
    "503": (lambda: Behaviour.server_error(503), "drop", "drop"),
    "502-html": (lambda: Behaviour.server_error(502), "drop", "drop"),
    "reset": (lambda: Behaviour.reset(partial=False), "drop", "drop"),
    "cut-body": (lambda: Behaviour.reset(), "drop", "drop"),
    "cut-stream": (lambda: Behaviour.stream_cut("Hello"), "empty", "drop"),  # SSE to a plain request is not a JSON body
    "html-200": (Behaviour.html_200, "empty", "empty"),
    "empty": (Behaviour.empty_choices, "empty", "empty"),
    "trickle": (lambda: Behaviour.trickle_head(gap_ms=300), "drop", "drop"),  # cut by the watchdog at the case's timeout_s
}
TRICKLED_TIMEOUT_S = 3.0  # the timeout_s of a case the server trickles: other cases wait as long as they must (--timeout 60)
# How a case ends once its faults are over, and the label that gives.
FINAL: dict[str, tuple[Callable[[random.Random], Behaviour], str]] = {
    "right": (lambda rng: Behaviour.ok("Hello there"), "right"),
    "slow": (lambda rng: Behaviour.ok("Hello, slowly", delay_ms=rng.uniform(20, 200)), "right"),
    "slow-body": (lambda rng: Behaviour.slow_body(chunks=3, gap_ms=30, content="Hello in pieces"), "right"),
    "wrong": (lambda rng: Behaviour.ok("Goodbye"), "wrong"),
    "truncated": (lambda rng: Behaviour.length("Hello wor"), "truncated"),
    "rejected": (lambda rng: Behaviour.bad_request_context_length(), "drop"),
}
FINAL_WEIGHTS = (40, 10, 5, 10, 10, 5)
TRANSIENT_WEIGHTS = (20, 10, 10, 10, 10, 5, 5, 1)
UNDELIVERED_SHARE = 0.03  # cases whose every attempt fails


@dataclass(frozen=True)
class Plan:
    """What the server does to one case, attempt by attempt, and the row it must end as."""

    behaviours: tuple[Behaviour, ...]
    label: str
    trickled: bool

    def case(self, key: str) -> dict[str, Any]:
        """The fixture case: only a trickled one has a deadline short enough to meet, so no label hangs on the machine's load."""
        return {"id": key, "prompt": f"Say hello. [[{key}]]", "expect_fragment": "Hello", **({"timeout_s": TRICKLED_TIMEOUT_S} if self.trickled else {})}


def plan(rng: random.Random, stream: bool) -> Plan:
    """A seeded mix: up to two transient faults (and the odd 429) before a final answer, or faults to the end."""
    if rng.random() < UNDELIVERED_SHARE:
        faults = to_the_end(rng)
        label = TRANSIENT[faults[-1]][2 if stream else 1]
        final: list[Behaviour] = []
    else:
        faults = rng.choices(list(TRANSIENT), TRANSIENT_WEIGHTS, k=rng.choice((0, 0, 0, 1, 1, 2)))
        make, label = FINAL[rng.choices(list(FINAL), FINAL_WEIGHTS)[0]]
        final = [make(rng)]
    steps = [TRANSIENT[name][0]() for name in faults] + final
    if rng.random() < 0.1:  # a 429: the run waits, the case's attempts are not spent
        steps.insert(rng.randrange(len(steps)), Behaviour.rate_limited(retry_after_ms=5))
    return Plan(tuple(steps), label, "trickle" in faults)


def to_the_end(rng: random.Random) -> list[str]:
    """Faults until the case's attempts are spent: a 503 counts half of one (the server is busy), any other fault one."""
    faults: list[str] = []
    while sum(1 if name == "503" else 2 for name in faults) < 2 * ATTEMPTS:
        faults += rng.choices(list(TRANSIENT), TRANSIENT_WEIGHTS)
    return faults


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


class PeakRss:
    """The process's resident memory, sampled every 50 ms while the run lasts."""

    def __init__(self) -> None:
        self.peak = rss_mb()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="soak-rss")

    def _sample(self) -> None:
        while not self._done.wait(0.05):
            self.peak = max(self.peak, rss_mb())

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._done.set()
        self._thread.join()


def settled(expected: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    """The server's connection threads end once the client has closed its connections: give them a moment."""
    end = time.monotonic() + timeout_s
    while not expected():
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


def soak(tmp_path: Path, n: int, concurrency: int, stream: bool, seed: int, rss_limit_mb: float) -> None:
    rng = random.Random(seed)
    plans = {f"soak-{i:05d}": plan(rng, stream) for i in range(n)}
    suite = make_suite(tmp_path, files={"cases.jsonl": [p.case(k) for k, p in plans.items()]})
    record = tmp_path / "recorded.jsonl"
    with FakeOpenAI() as srv:
        for key, p in plans.items():
            srv.plant(key, list(p.behaviours))
        config = RunConfig(fixtures_dir=suite, pins_path=suite / PINS_NAME, out_dir=tmp_path / "out", base_url=srv.url, model="soak",
                           concurrency=concurrency, stream=stream, timeout_s=60.0, record=record, quiet=True,
                           retry=RetryPolicy(max_attempts=ATTEMPTS, run_budget=3 * n, base_delay_s=0.005, max_delay_s=0.02))
        gc.collect()
        threads, fds, rss0 = set(threading.enumerate()), open_fds(), rss_mb()
        with PeakRss() as memory:
            result = run(config)
        gc.collect()
        assert settled(lambda: set(threading.enumerate()) == threads), sorted(t.name for t in set(threading.enumerate()) ^ threads)
        assert settled(lambda: open_fds() == fds), open_fds() ^ fds
        assert srv.errors == []
        served = {key: srv.attempts(key) for key in plans}
    assert memory.peak - rss0 < rss_limit_mb, f"RSS grew {memory.peak - rss0:.0f} MB (limit {rss_limit_mb} MB)"
    rows = result.report.to_json()["cases"]
    assert [row["id"] for row in rows] == list(plans)  # every case exactly one row, in fixture order
    wrong = {row["id"]: (row["label"], plans[row["id"]].label, row["reasons"]) for row in rows if row["label"] != plans[row["id"]].label}
    assert not wrong, list(wrong.items())[:5]
    assert [row["attempts"] for row in rows] == [served[k] for k in plans] == [len(p.behaviours) for p in plans.values()]
    lines = [json.loads(line) for line in record.read_text("utf-8").splitlines()]
    assert sorted(line["id"] for line in lines) == sorted(plans)
    for line in lines:  # retried only after a drop or an empty
        assert all(entry["label"] in ("drop", "empty") for entry in line["attempt_log"][:-1]), line


def test_soak_short(tmp_path):
    """1,000 cases at concurrency 32: every fault of the mix, a row each with its planted label, nothing left open."""
    soak(tmp_path, 1000, 32, stream=False, seed=17, rss_limit_mb=150)


@pytest.mark.skipif(os.environ.get("ENVELOPE_CI_SOAK") != "1",
                    reason="the long soak: ENVELOPE_CI_SOAK=1 python -m pytest tests/transport/test_soak.py")
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_soak_long(tmp_path, stream):
    """20,000 cases at concurrency 64, plain and streamed."""
    soak(tmp_path, 20_000, 64, stream=stream, seed=1711, rss_limit_mb=400)
