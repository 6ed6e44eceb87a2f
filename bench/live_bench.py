#!/usr/bin/env python3
"""Live-run benchmark (issue #3): envelope-ci's transport against a bare loop of ``requests`` calls.

Both sides call the same local fake server (``tests/support/fake_openai.py``'s ``serve_fixed_delay``),
which answers every request with a fixed delay, at the same concurrency, from the same script,
with the same request bodies. For each concurrency it prints, side by side:

* wall time, and wall against the ideal (cases x delay / concurrency);
* requests per second;
* the median and p95 of the timing error (measured ms - server delay).

It then runs the full pipeline once (``envelope_ci.cli.main`` on a generated fixtures directory,
concurrency 8) so the whole CLI's wall is shown too, and prints PASS/MISS for the targets at
concurrency 8: envelope-ci's wall <= 1.10x the bare loop's; its timing-error median within 1 ms
of the bare loop's and its p95 within 5 ms.

The figures mean something only if the server adds no delay of its own. By default the server
runs in its own process (``python -m tests.support.fake_openai --delay-ms D``, which is
``serve_fixed_delay(D)``), so it does not share this process's GIL with the clients being
measured; ``--server inprocess`` starts ``serve_fixed_delay`` in this process instead. The
bare loop's timing error is the server's (and the loopback's) own overhead: read the
envelope-ci figures against it, not against zero.

    python -m bench.live_bench --cases 2000 --delay-ms 50 --concurrency 1,8,32

Two more measurements (issue #11), each instead of the above:

* ``--faults``: a bad day (10% 503, 5% resets, 5% 429, 2% cut bodies; the fake's ``Chaos``) at
  concurrency 64, run once with the old fixed ``--retry-budget 100`` and once with the default
  sized to the suite; prints how many cases each left undelivered.
* ``--memory``: the CLI in its own process against answers of ``--answer-mb`` MB each; prints its
  peak RSS, which must not grow with the number of answers (``--answers``).

And one for adaptive concurrency (issue #10 item 4), also instead of the above:

* ``--rate-limit``: a token bucket (the fake's ``Chaos``, ``--rpm`` requests a 3 s "minute",
  bursts of 10) in front of the 50 ms server, at concurrency 8, run once adapting and once at a
  fixed concurrency; prints the 429s the server sent, the wall, the wait and the concurrency history.

    python -m bench.live_bench --faults --cases 5000
    python -m bench.live_bench --memory --answers 100 --answer-mb 15
    python -m bench.live_bench --rate-limit --cases 300
"""
from __future__ import annotations

import argparse
import collections
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from io import StringIO
from pathlib import Path

import requests

from envelope_ci.cli import main as cli_main
from envelope_ci.model import Case, RetryPolicy
from envelope_ci.providers.openai_chat import OPENAI_CHAT
from envelope_ci.sources.cases import build_case
from envelope_ci.sources.parse import RawCase
from envelope_ci.transport.http import USER_AGENT, ClientSettings
from envelope_ci.transport.pool import run_live
from envelope_ci.transport.progress import Progress
from tests.support.fake_openai import Behaviour, Chaos, FakeOpenAI, serve_fixed_delay

ROOT = Path(__file__).resolve().parent.parent

MODEL = "bench-model"


@dataclass(frozen=True)
class Figures:
    """One side of one row."""

    name: str
    concurrency: int
    cases: int
    wall_s: float
    errors_ms: list[float]
    failures: int
    delay_ms: float

    @property
    def ideal_s(self) -> float:
        return self.cases * self.delay_ms / 1000.0 / self.concurrency

    @property
    def rps(self) -> float:
        return self.cases / self.wall_s if self.wall_s else 0.0

    @property
    def median_err(self) -> float:
        return statistics.median(self.errors_ms) if self.errors_ms else math.nan

    @property
    def p95_err(self) -> float:
        return percentile(self.errors_ms, 0.95)


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest rank, as the report computes ms_p95."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def make_cases(n: int) -> list[Case]:
    return [build_case(RawCase({"id": f"bench-{i:05d}", "prompt": f"Say ok. [[bench-{i:05d}]]",
                                "expect_fragment": "ok"}, "bench/cases.yaml", i + 1, {}))
            for i in range(n)]


# --------------------------------------------------------------------------- the two sides
def bare_loop(url: str, cases: Sequence[Case], concurrency: int, delay_ms: float) -> Figures:
    """N threads, each with its own requests.Session: post + .content, perf_counter around the call."""
    settings = ClientSettings(base_url=url, model=MODEL)
    bodies = [json.dumps(OPENAI_CHAT.request_body(c, settings.model, settings.temperature,
                                                  settings.stream)).encode("utf-8") for c in cases]
    headers = {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": USER_AGENT}
    target = url.rstrip("/") + OPENAI_CHAT.path
    lock = threading.Lock()
    it = iter(range(len(bodies)))
    elapsed: list[float] = []
    failures = [0]

    def worker() -> None:
        session = requests.Session()
        mine: list[float] = []
        try:
            while True:
                with lock:
                    i = next(it, None)
                if i is None:
                    break
                t0 = time.perf_counter()
                try:
                    resp = session.post(target, data=bodies[i], headers=headers, timeout=(10, 120))
                    _ = resp.content
                    ok = resp.status_code == 200
                except requests.RequestException:
                    ok = False
                dt = (time.perf_counter() - t0) * 1000.0
                if ok:
                    mine.append(dt)
                else:
                    with lock:
                        failures[0] += 1
        finally:
            session.close()
            with lock:
                elapsed.extend(mine)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(concurrency)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    return Figures("bare requests", concurrency, len(cases), wall, [e - delay_ms for e in elapsed], failures[0],
                   delay_ms)


def harness(url: str, cases: Sequence[Case], concurrency: int, delay_ms: float) -> Figures:
    """envelope-ci's transport as the CLI drives it (progress counted, quiet), minus fixtures and reports."""
    settings = ClientSettings(base_url=url, model=MODEL)
    progress = Progress(len(cases), quiet=True)
    t0 = time.perf_counter()
    outcome = run_live(cases, settings, concurrency=concurrency, policy=RetryPolicy(), progress=progress)
    wall = time.perf_counter() - t0
    grades = [g for c in cases for g in outcome.grades[c.id]]
    ok = [g for g in grades if g.http_status == 200 and g.elapsed_ms is not None]
    return Figures("envelope-ci run_live", concurrency, len(cases), wall,
                   [g.elapsed_ms - delay_ms for g in ok], len(grades) - len(ok), delay_ms)  # type: ignore[operator]


def full_cli(url: str, n: int, concurrency: int, delay_ms: float) -> Figures:
    """The whole pipeline: fixtures on disk -> live run -> grading -> reports."""
    with tempfile.TemporaryDirectory(prefix="envelope-ci-bench-") as tmp:
        fixtures = Path(tmp) / "fixtures"
        fixtures.mkdir()
        lines = [json.dumps({"id": f"bench-{i:05d}", "prompt": f"Say ok. [[bench-{i:05d}]]", "expect_fragment": "ok"})
                 for i in range(n)]
        (fixtures / "cases.jsonl").write_text("\n".join(lines) + "\n", "utf-8")
        out = Path(tmp) / "out"
        argv = ["run", str(fixtures), "--out", str(out), "--base-url", url, "--model", MODEL,
                "--concurrency", str(concurrency), "--quiet"]
        sink = StringIO()
        env_key = os.environ.pop("EVAL_API_KEY", None)
        try:
            t0 = time.perf_counter()
            with redirect_stdout(sink), redirect_stderr(sink):
                code = cli_main(argv)
            wall = time.perf_counter() - t0
        finally:
            if env_key is not None:
                os.environ["EVAL_API_KEY"] = env_key
        report = json.loads((out / "report.json").read_text("utf-8"))
    if code != 0:
        print(f"warning: the CLI exited {code}: {sink.getvalue().strip()[:300]}", file=sys.stderr)
    ms = [c["ms"] for c in report["cases"] if c["ms"] is not None]
    return Figures("envelope-ci CLI (full run)", concurrency, n, wall, [m - delay_ms for m in ms], n - len(ms),
                   delay_ms)


# --------------------------------------------------------------------------- issue #11: faults and memory
def faults_bench(n: int, concurrency: int, seed: int) -> int:
    """Undelivered cases on a bad day, with the old fixed retry budget and with the default sized to the suite."""
    cases = make_cases(n)
    for budget in (100, None):
        chaos = Chaos(rpm=10**9, share_429=0.05, share_503=0.10, share_reset=0.05, share_cut=0.02, seed=seed)
        with FakeOpenAI(Behaviour.ok("ok"), chaos=chaos) as srv:
            t0 = time.perf_counter()
            outcome = run_live(cases, ClientSettings(base_url=srv.url, model=MODEL), concurrency=concurrency,
                               policy=RetryPolicy(run_budget=budget), seed=seed)
            wall = time.perf_counter() - t0
            requests_sent = len(srv.all_requests)
        labels = collections.Counter(g.label.value for c in cases for g in outcome.grades[c.id])
        undelivered = labels["drop"] + labels["empty"]
        name = f"--retry-budget {budget}" if budget is not None else "default (sized to the suite)"
        print(f"{name:<30} undelivered {undelivered:>5} of {n}  requests {requests_sent:>6}  faults {chaos.counts}  "
              f"wall {wall:.1f} s")
        for remark in outcome.remarks():
            print(f"  remark: {remark}")
    return 0


def rate_limit_bench(n: int, rpm: int, delay_ms: float) -> int:
    """429s the server had to send, adapting the concurrency and at a fixed 8, against one token bucket."""
    cases = make_cases(n)
    for adaptive in (True, False):
        chaos = Chaos(rpm=rpm, burst=10, minute_s=3.0, share_429=0.0, share_503=0.0)
        with FakeOpenAI(Behaviour.ok("ok", delay_ms=delay_ms), chaos=chaos) as srv:
            t0 = time.perf_counter()
            outcome = run_live(cases, ClientSettings(base_url=srv.url, model=MODEL), concurrency=8,
                               policy=RetryPolicy(adaptive_concurrency=adaptive))
            wall = time.perf_counter() - t0
        labels = collections.Counter(g.label.value for c in cases for g in outcome.grades[c.id])
        history = outcome.concurrency_history
        print(f"{'adaptive' if adaptive else 'fixed 8':<9} 429s {chaos.counts['bucket_429']:>5}  "
              f"labels {dict(labels)}  wall {wall:.1f} s  "
              f"rate-limit wait {outcome.rate_limit_wait_s:.1f} s  history {len(history)} point(s): "
              f"{history[:8]}{' ...' if len(history) > 8 else ''}")
    return 0


def memory_bench(answers: int, answer_mb: int, concurrency: int) -> int:
    """The CLI's peak RSS (its own process) for ``answers`` live answers of ``answer_mb`` MB."""
    with (FakeOpenAI(Behaviour.huge(answer_mb * 1024 * 1024)) as srv,
          tempfile.TemporaryDirectory(prefix="envelope-ci-bench-") as tmp):
        fixtures = Path(tmp) / "fixtures"
        fixtures.mkdir()
        lines = [json.dumps({"id": f"big-{i:04d}", "prompt": f"Say x. [[big-{i:04d}]]", "expect_fragment": "xxx"})
                 for i in range(answers)]
        (fixtures / "cases.jsonl").write_text("\n".join(lines) + "\n", "utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith("EVAL_")}
        argv = [sys.executable, "-m", "envelope_ci", "run", str(fixtures), "--out", str(Path(tmp) / "out"),
                "--base-url", srv.url, "--model", MODEL, "--concurrency", str(concurrency), "--quiet"]
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
    print(f"{answers} answers of {answer_mb} MB at concurrency {concurrency}: "
          f"exit {os.waitstatus_to_exitcode(status)}, "
          f"peak RSS {usage.ru_maxrss / 1024:.0f} MB, wall {wall:.1f} s")
    return 0


# --------------------------------------------------------------------------- the server
@contextmanager
def fixed_delay_server(delay_ms: float, where: str) -> Iterator[str]:
    """A fixed-delay fake server: its own process (default) or this one."""
    if where == "inprocess":
        srv = serve_fixed_delay(delay_ms)
        try:
            yield srv.url
        finally:
            srv.close()
        return
    argv = [sys.executable, "-m", "tests.support.fake_openai", "--port", "0", "--delay-ms", str(delay_ms)]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("http://"):
            raise RuntimeError(f"the fake server did not start (printed {url!r})")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def warm_up(url: str) -> None:
    cases = make_cases(20)
    bare_loop(url, cases, 4, 0.0)
    run_live(cases, ClientSettings(base_url=url, model=MODEL), concurrency=4)


# --------------------------------------------------------------------------- output
def row(f: Figures) -> str:
    return (f"{f.name:<27} {f.concurrency:>4} {f.cases:>6} {f.wall_s:>8.2f} {f.ideal_s:>8.2f} "
            f"{f.wall_s / f.ideal_s:>6.3f} {f.rps:>8.1f} {f.median_err:>9.3f} {f.p95_err:>9.3f} {f.failures:>5}")


HEADER = (f"{'side':<27} {'conc':>4} {'cases':>6} {'wall_s':>8} {'ideal_s':>8} {'x_ideal':>6} "
          f"{'req/s':>8} {'err_med':>9} {'err_p95':>9} {'fail':>5}")


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.live_bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=2000, help="cases per concurrency (default: %(default)s)")
    ap.add_argument("--cases-c1", type=int, default=400,
                    help="cases at concurrency 1, where the full count would take cases x delay (default: %(default)s)")
    ap.add_argument("--delay-ms", type=float, default=50.0, help="the server's fixed delay (default: %(default)s)")
    ap.add_argument("--concurrency", default="1,8,32", help="comma-separated (default: %(default)s)")
    ap.add_argument("--server", choices=["process", "inprocess"], default="process",
                    help="run the fake server in its own process (default) or in this one")
    ap.add_argument("--no-cli", action="store_true", help="skip the full-CLI run")
    ap.add_argument("--faults", action="store_true",
                    help="instead: undelivered cases on a bad day, old vs sized retry budget (concurrency 64)")
    ap.add_argument("--seed", type=int, default=11, help="--faults: the fault draws' seed (default: %(default)s)")
    ap.add_argument("--memory", action="store_true", help="instead: the CLI's peak RSS against big answers")
    ap.add_argument("--answers", type=int, default=100, help="--memory: answers (default: %(default)s)")
    ap.add_argument("--answer-mb", type=int, default=15, help="--memory: MB per answer (default: %(default)s)")
    ap.add_argument("--rate-limit", action="store_true",
                    help="instead: 429s against a token bucket, adaptive vs fixed concurrency 8")
    ap.add_argument("--rpm", type=int, default=60,
                    help="--rate-limit: the bucket's requests per 3 s 'minute' (default: %(default)s)")
    args = ap.parse_args(argv)
    if args.faults:
        return faults_bench(args.cases, 64, args.seed)
    if args.memory:
        return memory_bench(args.answers, args.answer_mb, 4)
    if args.rate_limit:
        return rate_limit_bench(args.cases, args.rpm, args.delay_ms)
    levels = [int(x) for x in args.concurrency.split(",") if x.strip()]
    results: dict[int, tuple[Figures, Figures]] = {}
    cli: Figures | None = None
    with fixed_delay_server(args.delay_ms, args.server) as url:
        print(f"server: {url} ({args.server}), fixed delay {args.delay_ms:g} ms; python {sys.version.split()[0]}, "
              f"{os.cpu_count()} CPUs")
        warm_up(url)
        for c in levels:
            n = args.cases_c1 if c == 1 and args.cases_c1 < args.cases else args.cases
            if n != args.cases:
                print(f"note: concurrency 1 runs {n} cases, not {args.cases} ({args.cases} x {args.delay_ms:g} ms "
                      f"would take {args.cases * args.delay_ms / 1000:.0f} s); --cases-c1 changes it")
            cases = make_cases(n)
            bare = bare_loop(url, cases, c, args.delay_ms)
            ours = harness(url, cases, c, args.delay_ms)
            results[c] = (bare, ours)
        if not args.no_cli:
            cli = full_cli(url, args.cases, 8, args.delay_ms)
    print()
    print("timing error = measured ms - server delay; x_ideal = wall / (cases x delay / concurrency)")
    print(HEADER)
    for c in levels:
        bare, ours = results[c]
        print(row(bare))
        print(row(ours))
        print(f"{'  envelope-ci / bare':<27} {'':>4} {'':>6} {ours.wall_s / bare.wall_s:>8.3f}x wall   "
              f"err_med {ours.median_err - bare.median_err:+.3f} ms   err_p95 {ours.p95_err - bare.p95_err:+.3f} ms")
    if cli is not None:
        print(row(cli))
    if 8 in results:
        bare, ours = results[8]
        print()
        ratio = ours.wall_s / bare.wall_s
        d_med = abs(ours.median_err - bare.median_err)
        d_p95 = abs(ours.p95_err - bare.p95_err)
        # The target is the whole run's (issue #10, item 6): the live path alone is what it is made of.
        if cli is not None:
            # In this process, as the bare loop runs: neither pays an interpreter's start. Every case must have been
            # answered.
            print(f"{verdict(cli.wall_s / bare.wall_s <= 1.10 and cli.failures == 0)}  concurrency 8: "
                  f"the whole CLI run {cli.wall_s:.2f} s = {cli.wall_s / bare.wall_s:.3f}x the bare loop's "
                  f"{bare.wall_s:.2f} s (target <= 1.10x; loading fixtures, grading, "
                  f"writing reports included; {cli.failures} case(s) unanswered)")
        else:
            print("not judged  concurrency 8: the whole CLI run (--no-cli)")
        print(f"info  concurrency 8: the live path alone (run_live) {ours.wall_s:.2f} s = {ratio:.3f}x the bare loop's")
        print(f"{verdict(d_med <= 1.0)}  concurrency 8: timing error median {ours.median_err:.3f} ms vs bare "
              f"{bare.median_err:.3f} ms, |diff| {d_med:.3f} ms (target <= 1 ms)")
        print(f"{verdict(d_p95 <= 5.0)}  concurrency 8: timing error p95 {ours.p95_err:.3f} ms vs bare "
              f"{bare.p95_err:.3f} ms, |diff| {d_p95:.3f} ms (target <= 5 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
