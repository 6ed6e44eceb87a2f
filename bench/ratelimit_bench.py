#!/usr/bin/env python3
"""Rate-limit benchmark (issue #24 item 5): a live run against a token bucket that sends OpenAI's headers.

The server is ``tests/support/token_bucket.py`` in this process: ``--rpm`` requests a minute, a bucket
of ``--rpm`` tokens that starts full, every answer after ``--delay-ms`` and carrying
``x-ratelimit-limit-requests`` / ``-remaining-requests`` / ``-reset-requests`` (the time until the
bucket is full again, as OpenAI means it), and a 429 with ``Retry-After`` when the bucket is empty.
With ``--tpm``, a token limit beside it (``x-ratelimit-*-tokens``): each case asks ``--max-tokens``, and
the server charges each request what the run reckons it (its prompt's characters / 4 and its max_tokens).

Each side runs ``run_live`` on ``--cases`` cases at ``--concurrency`` in its own process, against a
fresh bucket, one after the other in the same run:

* **before**: the package as it was at ``--before`` (a commit, unpacked with ``git archive`` into
  a temporary folder; ``--before none`` skips it): it held every request until the bucket was full;
* **now**: this checkout, which paces request starts to the refill rate the headers imply.

For each: wall time, the 429s the server sent, the cases graded right, the time the run waited
on rate limits. The floor is what the bucket allows at best: the cases beyond its first burst at
its refill rate, plus one answer. Targets for **now** (the issue's): wall within 30 s, at most 32
answers of 429, every case right, at the defaults (160 cases, 120 per minute, concurrency 16).

    python -m bench.ratelimit_bench      # --cases 160 --rpm 120 --concurrency 16 --delay-ms 50 --before 759dd88
    python -m bench.ratelimit_bench --rpm 6000 --tpm 24000 --max-tokens 200 --before 417e86e   # the token limit
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from bench.offline_floor import cpu_model, loads
from tests.support.fake_openai import Behaviour
from tests.support.token_bucket import TokenBucket, serve_token_bucket

ROOT = Path(__file__).resolve().parent.parent
MODEL = "bench-model"
# The last commit whose live runs held every request until a used-up limit was full again.
BEFORE = "759dd88"
TARGET_WALL_S = 30.0
TARGET_429 = 32


def bench_cases(cases: int, max_tokens: int) -> list:
    """The cases, built by whichever ``envelope_ci`` this process imports; each asks ``max_tokens`` when it is > 0."""
    from envelope_ci.sources.cases import build_case
    from envelope_ci.sources.parse import RawCase

    asked = {"max_tokens": max_tokens} if max_tokens > 0 else {}
    return [build_case(RawCase({"id": f"rl-{i:04d}", "prompt": f"Say ok. [[rl-{i:04d}]]", "expect_fragment": "ok",
                                **asked}, "bench/cases.yaml", i + 1, {})) for i in range(cases)]


def client(url: str, cases: int, concurrency: int, max_tokens: int) -> int:
    """The child: one live run against ``url`` with whichever ``envelope_ci`` this process imports; JSON on stdout."""
    from envelope_ci.model import RetryPolicy
    from envelope_ci.transport.http import ClientSettings
    from envelope_ci.transport.pool import run_live

    made = bench_cases(cases, max_tokens)
    t0 = time.perf_counter()
    outcome = run_live(made, ClientSettings(base_url=url, model=MODEL), concurrency=concurrency, policy=RetryPolicy())
    wall = time.perf_counter() - t0
    labels = Counter(g.label.value for c in made for g in outcome.grades[c.id])
    print(json.dumps({"wall_s": wall, "labels": labels, "wait_s": outcome.rate_limit_wait_s,
                      "remarks": outcome.remarks()}))
    return 0


def side(name: str, package_dir: Path, args: argparse.Namespace, cost: int) -> dict:
    """One side's run in its own process, importing ``envelope_ci`` from ``package_dir``, against a fresh bucket that
    charges each request ``cost`` tokens when there is a token limit."""
    bucket = TokenBucket(rpm=args.rpm, answer=Behaviour.ok("ok", delay_ms=args.delay_ms), tpm=args.tpm or None,
                         token_cost=cost)
    with serve_token_bucket(bucket) as srv:
        argv = [sys.executable, "-c", "import sys; sys.path[:0] = sys.argv[1:3]; from bench.ratelimit_bench import "
                "client; sys.exit(client(sys.argv[3], *map(int, sys.argv[4:7])))",
                str(package_dir), str(ROOT), srv.url, str(args.cases), str(args.concurrency), str(args.max_tokens)]
        done = subprocess.run(argv, cwd=package_dir, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{name}: the run failed ({done.returncode}): {done.stderr.strip()[-600:]}")
    got = json.loads(done.stdout.strip().splitlines()[-1])
    got.update(name=name, refused=bucket.counts["refused"], answered=bucket.counts["answered"])
    return got


def unpacked(rev: str, into: Path) -> Path:
    """The package as it was at ``rev``, in a folder of its own (read from git's objects, the work tree untouched)."""
    archive = subprocess.run(["git", "archive", rev, "envelope_ci"], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def row(got: dict, cases: int) -> str:
    right = got["labels"].get("right", 0)
    return (f"{got['name']:<22} {got['wall_s']:>7.1f} {got['refused']:>5} {right:>4}/{cases:<4} "
            f"{got['wait_s']:>8.1f}   {dict(got['labels'])}")


def verdict(now: dict, cases: int, defaults: bool) -> str:
    ok = now["wall_s"] <= TARGET_WALL_S and now["refused"] <= TARGET_429 and now["labels"].get("right", 0) == cases
    word = ("PASS" if ok else "MISS") if defaults else "not judged (not the defaults)"
    return (f"{word}  now: {now['wall_s']:.1f} s (target <= {TARGET_WALL_S:g} s), {now['refused']} answers of 429 "
            f"(target <= {TARGET_429}), {now['labels'].get('right', 0)} of {cases} right (target all)")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.ratelimit_bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=160, help="cases (default: %(default)s)")
    ap.add_argument("--rpm", type=int, default=120, help="the bucket's size and refill a minute (default: %(default)s)")
    ap.add_argument("--concurrency", type=int, default=16, help="--concurrency (default: %(default)s)")
    ap.add_argument("--delay-ms", type=float, default=50.0, help="the server's delay per answer (default: %(default)s)")
    ap.add_argument("--before", default=BEFORE, help="the commit to compare with, or none (default: %(default)s)")
    ap.add_argument("--tpm", type=int, default=0, help="a token limit too: its size and refill a minute (default: off)")
    ap.add_argument("--max-tokens", type=int, default=0, help="each case's max_tokens (default: none)")
    args = ap.parse_args(argv)
    from envelope_ci.providers.openai_chat import OPENAI_CHAT
    from envelope_ci.transport.http import tokens_charged

    sample = bench_cases(1, args.max_tokens)[0]
    cost = int(tokens_charged(sample, OPENAI_CHAT.request_body(sample, MODEL, 0.0, False)))
    floor = max(max(0, args.cases - args.rpm) * 60.0 / args.rpm,
                max(0, args.cases * cost - args.tpm) * 60.0 / args.tpm if args.tpm else 0.0) + args.delay_ms / 1000.0
    print(f"machine  {platform.processor() or platform.machine()}, {cpu_model()}, nproc "
          f"{len(os.sched_getaffinity(0))} (of {os.cpu_count()}), Python {platform.python_version()}; load {loads()}")
    tokens = f", {args.tpm} tokens a minute as many at once, {cost} a request" if args.tpm else ""
    print(f"bucket   {args.rpm} requests a minute, {args.rpm} at once{tokens}, answers after {args.delay_ms:g} ms; "
          f"{args.cases} cases at concurrency {args.concurrency}; the bucket's floor {floor:.1f} s")
    runs = []
    with tempfile.TemporaryDirectory(prefix="envelope-ci-ratelimit-") as tmp:
        if args.before != "none":
            runs.append(side(f"before ({args.before})", unpacked(args.before, Path(tmp)), args, cost))
        runs.append(side("now (this checkout)", ROOT, args, cost))
    print(f"\n{'side':<22} {'wall_s':>7} {'429s':>5} {'right':>9} {'waited_s':>8}   labels")
    for got in runs:
        print(row(got, args.cases))
        for remark in got["remarks"]:
            print(f"{'':<22} remark: {remark}")
    print(f"{'bucket floor':<22} {floor:>7.1f}")
    defaults = (args.cases, args.rpm, args.concurrency) == (160, 120, 16)
    print(f"\n{verdict(runs[-1], args.cases, defaults)}\nload after {loads()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
