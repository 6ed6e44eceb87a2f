#!/usr/bin/env python3
"""Shard-and-merge benchmark (issue #10): N shard processes and a merge against one process, and the merge alone at
scale.

Every time is the wall time of the real command line (``python -m envelope_ci``), each in its own process:

* ``partition``: how balanced the shards are, and how many other cases change shard when one case is
  added, over --trials additions to a suite of --cases: envelope-ci's runs of the hash order, beside
  dealing that order round-robin and plain ``hash mod N`` (no processes: the partition is pure).
* ``speedup``: a suite of --cases cases graded by one process, then as --shards shard processes started
  at once and merged; printed live (against the local fixed-delay fake server, ``tests/support/fake_openai.py``,
  at --concurrency per process, as each matrix job would run) and offline (a --replay of recordings,
  the mix of ``bench/offline_bench.py``). The offline merged report.json must equal the unsharded
  run's byte for byte; a live one must agree on everything but timings.
* ``merge``: --shards shard reports of --merge-cases cases in all (4 x 25,000 by default), merged
  --repeat times; prints the wall time of ``envelope-ci merge`` (interpreter start included) and its CPU
  time (user + system, its forked writers' too), the time inside ``merging.merge`` (``api.merge``), and its peak memory.
  Target: at most ``MERGE_TARGET_S`` (2 s; it was under 5 s until issue #23).

    python -m bench.shard_bench                          # all three, the defaults below
    python -m bench.shard_bench --part partition --cases 8000 --shards 4 --trials 1000
    python -m bench.shard_bench --part speedup --cases 8000 --shards 4 --delay-ms 50 --concurrency 8
    python -m bench.shard_bench --part merge --merge-cases 100000
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench.live_bench import fixed_delay_server
from bench.offline_bench import generate
from envelope_ci.shard import shard_numbers

ROOT = Path(__file__).resolve().parent.parent

ENV = {**os.environ, "PYTHONPATH": str(ROOT), "CI": "", "GITHUB_ACTIONS": ""}
# A command that hangs fails the bench instead of stalling it.
TIMEOUT_S = 1800
# The merge of --shards reports (4 x 25,000 cases by default) takes at most this long, its median wall (issue #23).
MERGE_TARGET_S = 2.0
# merging.merge (api.merge) in a child of its own, timed inside (without the interpreter's start): all of it, and its
# reading of the shards' reports and its writing of the formats within that one call; then its peak RSS.
MERGE_TIMED = """
import resource, sys, time
from pathlib import Path
from envelope_ci import merging
out, paths = Path(sys.argv[1]), [Path(p) for p in sys.argv[2:]]
spent = {}
def timed(name, fn):
    def call(*args, **kwargs):
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[name] = time.perf_counter() - t
    return call
merging.read_shards = timed("read", merging.read_shards)  # parsing and checking; reading the files \
is read_texts, before it
merging.write_reports = timed("write", merging.write_reports)
t0 = time.perf_counter()
merging.merge(paths, out)
total = time.perf_counter() - t0
print(f"{total:.3f} {spent['read']:.3f} {spent['write']:.3f} \
{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}")
"""


def _sha(case_id: str) -> bytes:
    return hashlib.sha256(case_id.encode("utf-8")).digest()


def round_robin(ids: Sequence[str], count: int) -> list[int]:
    """The alternative: ids in hash order dealt one to each shard in turn."""
    order = sorted(range(len(ids)), key=lambda i: _sha(ids[i]))
    numbers = [0] * len(ids)
    for rank, i in enumerate(order):
        numbers[i] = rank % count + 1
    return numbers


def hash_mod(ids: Sequence[str], count: int) -> list[int]:
    """The other alternative: each id's hash modulo N, whatever the others."""
    return [int.from_bytes(_sha(i)[:8], "big") % count + 1 for i in ids]


def partition(args: argparse.Namespace) -> None:
    print(f"== partition: {args.cases} cases in {args.shards} shards, {args.trials} single-case additions")
    print(f"{'rule':<28} {'sizes max-min':>13} {'moved mean':>10} {'moved max':>9}")
    rng = random.Random(args.seed)
    ids = [f"case-{rng.getrandbits(64):016x}" for _ in range(args.cases)]
    added = [f"new-{rng.getrandbits(64):016x}" for _ in range(args.trials)]
    for name, rule in (("runs of the hash order (ours)", shard_numbers), ("round-robin of the hash order", round_robin),
                       ("hash mod N", hash_mod)):
        before = rule(ids, args.shards)
        sizes = [before.count(k) for k in range(1, args.shards + 1)]
        moved = [sum(a != b for a, b in zip(before, rule([*ids, new], args.shards), strict=False)) for new in added]
        print(f"{name:<28} {max(sizes) - min(sizes):>13} {statistics.mean(moved):>10.2f} {max(moved):>9}")


def cli(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "envelope_ci", *map(str, args)]


def timed(argv: Sequence[str]) -> tuple[float, int, float]:
    """Wall time, exit code and CPU time (user + system, its forked writers' included) of one command.

    On a shared machine the wall time says as much about the neighbours as about the command; its CPU time does not.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    code = subprocess.run(argv, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False,
                          timeout=TIMEOUT_S).returncode
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, code, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def shards_at_once(fixtures: Path, out: Path, count: int, extra: Sequence[str]) -> tuple[float, list[Path]]:
    """Every shard as its own process, started together; the wall time until the last one ends."""
    t0 = time.perf_counter()
    procs = [subprocess.Popen(
        cli("run", fixtures, "--shard", f"{i}/{count}", "--out", out / f"shard-{i}", "--quiet", *extra),
        env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for i in range(1, count + 1)]
    for proc in procs:
        try:
            _, err = proc.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            for each in procs:
                each.kill()
            raise
        if proc.returncode not in (0, 1, 3):
            raise RuntimeError(f"a shard exited {proc.returncode}: {err[-2000:]}")
    return time.perf_counter() - t0, [out / f"shard-{i}" / "report.json" for i in range(1, count + 1)]


def live_fixtures(root: Path, n: int) -> Path:
    fixtures = root / "live-fixtures"
    fixtures.mkdir()
    lines = (json.dumps({"id": f"bench-{i:05d}", "prompt": f"Say ok. [[bench-{i:05d}]]", "expect_fragment": "ok",
                         "stratum": "easy"})
             for i in range(n))
    (fixtures / "cases.jsonl").write_text("\n".join(lines) + "\n", "utf-8")
    return fixtures


def same_but_timing(a: Path, b: Path) -> bool:
    """Two report.json alike apart from what a live run measures: each row's times, the notes, and its pacing.

    ``live`` (each process's concurrency over time and wait on rate limits) is timing that the
    merge leaves out by design (``report.model.LiveRun``); notes may quote times, and are not
    compared. tests/cli/test_shard_merge.py holds the same comparison, rows without their times.
    """
    def plain(path: Path) -> dict:
        data = json.loads(path.read_text("utf-8"))
        for timing in ("notes", "live"):
            data.pop(timing, None)
        data["cases"] = [{key: value for key, value in row.items() if key not in ("ms", "ms_p95", "ttft_ms")}
                         for row in data["cases"]]
        return data

    one, two = plain(a), plain(b)
    differ = sorted(key for key in one.keys() | two.keys() if one.get(key) != two.get(key))
    if differ:
        print(f"  differ: {differ}: " + "; ".join(f"{k}: {_diff(one.get(k), two.get(k))}" for k in differ))
    return not differ


def _diff(one: object, two: object, path: str = "") -> str:
    """Where two JSON values first differ, as a path."""
    if isinstance(one, dict) and isinstance(two, dict):
        for key in sorted(one.keys() | two.keys()):
            if one.get(key) != two.get(key):
                return _diff(one.get(key), two.get(key), f"{path}.{key}")
    if isinstance(one, list) and isinstance(two, list) and len(one) == len(two):
        for i, (x, y) in enumerate(zip(one, two, strict=True)):
            if x != y:
                return _diff(x, y, f"{path}[{i}]")
    return f"{path or '.'} {str(one)[:80]!r} vs {str(two)[:80]!r}"


def speedup_row(name: str, fixtures: Path, root: Path, count: int, extra: Sequence[str], exact: bool) -> None:
    whole_s, whole_code, _ = timed(cli("run", fixtures, "--out", root / f"{name}-whole", "--quiet", *extra))
    shards_s, reports = shards_at_once(fixtures, root / f"{name}-shards", count, extra)
    merge_s, merge_code, _ = timed(cli("merge", *reports, "--out", root / f"{name}-merged", "--quiet"))
    whole, merged = root / f"{name}-whole" / "report.json", root / f"{name}-merged" / "report.json"
    equal = whole.read_bytes() == merged.read_bytes() if exact else same_but_timing(whole, merged)
    total = shards_s + merge_s
    print(f"{name:<8} {whole_s:>9.2f} {shards_s:>9.2f} {merge_s:>8.2f} {total:>9.2f} {whole_s / total:>8.2f}x   "
          f"exit {whole_code}/{merge_code}  merged {'==' if equal else '!='} "
          f"unsharded{'' if exact else ' (apart from timing)'}")


def speedup(args: argparse.Namespace) -> None:
    print(f"== speed-up: {args.cases} cases, 1 process against {args.shards} shard processes + merge "
          f"(live: {args.delay_ms:g} ms server, --concurrency {args.concurrency} per process)")
    print(f"{'mode':<8} {'1 proc s':>9} {'shards s':>9} {'merge s':>8} {'sharded s':>9} {'speed-up':>9}")
    with tempfile.TemporaryDirectory(prefix="envelope-ci-shard-bench-") as tmp:
        root = Path(tmp)
        with fixed_delay_server(args.delay_ms, "subprocess") as url:
            live = ["--base-url", url, "--model", "bench-model", "--concurrency", str(args.concurrency)]
            speedup_row("live", live_fixtures(root, args.cases), root, args.shards, live, exact=False)
        (root / "offline").mkdir()
        fixtures, recordings = generate(root / "offline", args.cases, args.seed)
        speedup_row("offline", fixtures, root, args.shards, ["--replay", str(recordings)], exact=True)


def _load() -> str:
    """The 1, 5 and 15 minute load averages: on a shared machine they say how far to trust a wall time."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def merge_time(args: argparse.Namespace) -> None:
    n, count = args.merge_cases, args.shards
    print(f"== merge: {count} shard reports of {n // count:,} cases ({n:,} in all), merged {args.repeat} times")
    with tempfile.TemporaryDirectory(prefix="envelope-ci-merge-bench-") as tmp:
        root = Path(tmp)
        fixtures, recordings = generate(root, n, args.seed)
        shards_s, reports = shards_at_once(fixtures, root, count, ["--replay", str(recordings)])
        size = sum(r.stat().st_size for r in reports) / 1e6
        print(f"shard runs        {shards_s:.1f} s for the {count} at once; reports {size:.0f} MB in all")
        print(f"load average before the merges {_load()}")
        walls: list[float] = []
        cpus: list[float] = []
        parts: dict[str, list[float]] = {"merge": [], "read": [], "write": [], "rss": []}
        for k in range(args.repeat):
            wall, code, cpu = timed(cli("merge", *reports, "--out", root / f"merged-{k}", "--quiet"))
            walls.append(wall)
            cpus.append(cpu)
            proc = subprocess.run([sys.executable, "-c", MERGE_TIMED, str(root / f"inside-{k}"), *map(str, reports)],
                                  env=ENV, capture_output=True, text=True, check=True, timeout=TIMEOUT_S)
            for part, value in zip(("merge", "read", "write", "rss"), proc.stdout.split(), strict=True):
                parts[part].append(float(value))
        merge_s, read_s, write_s = (statistics.median(parts[p]) for p in ("merge", "read", "write"))
        print(f"envelope-ci merge wall  median {statistics.median(walls):.2f} s  "
              f"(min {min(walls):.2f}, max {max(walls):.2f}; exit {code}); "
              f"CPU (user + system) median {statistics.median(cpus):.2f} s")
        print(f"merging.merge inside    median {merge_s:.2f} s: reading the reports {read_s:.2f} s, "
              f"writing the three formats {write_s:.2f} s, judging and building the report "
              f"{merge_s - read_s - write_s:.2f} s; peak RSS {max(parts['rss']):.0f} MiB")
        print(f"each merge: wall {' / '.join(f'{w:.2f}' for w in walls)} s, "
              f"CPU {' / '.join(f'{c:.2f}' for c in cpus)} s; load average after {_load()}")
        ok = statistics.median(walls) <= MERGE_TARGET_S
        print(f"target: merge of {count} x {n // count:,} at most {MERGE_TARGET_S:g} s: {'PASS' if ok else 'MISS'}")


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.shard_bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=("all", "partition", "speedup", "merge"), default="all")
    parser.add_argument("--cases", type=int, default=8000,
                        help="speed-up suite size (default: %(default)s, 2,000 per shard)")
    parser.add_argument("--shards", type=int, default=4, help="shard processes (default: %(default)s)")
    parser.add_argument("--delay-ms", type=float, default=50.0,
                        help="the live server's delay per answer (default: %(default)s)")
    parser.add_argument("--concurrency", type=int, default=8,
                        help="--concurrency of each live process (default: %(default)s)")
    parser.add_argument("--merge-cases", type=int, default=100_000,
                        help="cases over all shards for the merge timing (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=3, help="merges timed (default: %(default)s)")
    parser.add_argument("--trials", type=int, default=1000,
                        help="single-case additions for the partition figures (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    print(f"machine: nproc {os.cpu_count()}, python {sys.version.split()[0]}")
    if args.part in ("all", "partition"):
        partition(args)
    if args.part in ("all", "speedup"):
        speedup(args)
    if args.part in ("all", "merge"):
        merge_time(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
