"""Offline grading throughput: generate N cases and a recordings file, run the real CLI, print figures.

    python -m bench.offline_bench --cases 100000

Target (issue #2): the whole run (load, validate, grade, write reports) under 15 s and
under 1 GiB peak memory on a 2-core machine. Prints wall time per stage, cases/second,
and the peak resident memory of this process (the CLI runs in-process).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from envelope_ci import cli

SCHEMA = {"type": "object", "required": ["answer", "unit"],
          "properties": {"answer": {"type": "integer"}, "unit": {"type": "string"}}}


def envelope(rng: random.Random, i: int) -> dict:
    """A realistic mix: mostly right, some wrong, schema misses, cuts, empties and drops."""
    roll = rng.random()
    if roll < 0.01:
        return {"error": "ConnectionResetError: [Errno 104] Connection reset by peer", "elapsed_ms": 12.0}
    if roll < 0.02:
        return {"http_status": 200, "elapsed_ms": 300.0,
                "body": {"id": f"c{i}", "object": "chat.completion", "model": "bench-model", "choices": []}}
    content, finish = '{"answer": 42, "unit": "m"}', "stop"
    if roll < 0.04:
        content, finish = '{"answer": 4', "length"
    elif roll < 0.07:
        content = '{"answer": 42}'
    elif roll < 0.12:
        content = '{"answer": 7, "unit": "m"}'
    body = {
        "id": f"chatcmpl-{i}", "object": "chat.completion", "created": 1764540000, "model": "bench-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content, "refusal": None},
                     "logprobs": None, "finish_reason": finish}],
        "usage": {"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52},
    }
    return {"http_status": 200, "elapsed_ms": round(200 + rng.random() * 300, 1),
            "headers": {"content-type": "application/json"}, "body": body}


def generate(root: Path, n: int, seed: int) -> tuple[Path, Path]:
    rng = random.Random(seed)
    fixtures = root / "fixtures"
    fixtures.mkdir()
    strata = ["easy", "medium", "stretch"]
    with (fixtures / "cases.jsonl").open("w") as fh:
        for i in range(n):
            fh.write(json.dumps({
                "id": f"case-{i:06d}", "stratum": strata[i % 3],
                "prompt": f"Measure item {i}. Reply with JSON {{answer, unit}}.",
                "schema": SCHEMA, "expect_json": {"answer": 42}, "max_chars": 200,
            }) + "\n")
    recordings = root / "recordings.jsonl"
    with recordings.open("w") as fh:
        for i in range(n):
            fh.write(json.dumps({"id": f"case-{i:06d}", "recorded": envelope(rng, i)}) + "\n")
    return fixtures, recordings


@dataclass(frozen=True)
class Suite:
    """A generated suite in a temporary folder: the fixtures, the recordings, and what making them took."""

    root: Path
    fixtures: Path
    recordings: Path
    generated_s: float
    size_mb: float


def bench_parser(doc: str | None, module: str) -> argparse.ArgumentParser:
    """``--cases`` and ``--seed``, as every offline bench takes them; ``module`` is the one run:
    ``python -m MODULE``."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=7)
    return parser


def bench_args(doc: str | None, module: str) -> argparse.Namespace:
    """The arguments of a bench that takes only ``bench_parser``'s."""
    return bench_parser(doc, module).parse_args()


@contextmanager
def generated_suite(cases: int, seed: int) -> Iterator[Suite]:
    """The generated suite, removed afterwards."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        fixtures, recordings = generate(root, cases, seed)
        generated_s = time.perf_counter() - t0
        size_mb = (os.path.getsize(fixtures / "cases.jsonl") + os.path.getsize(recordings)) / 1e6
        yield Suite(root, fixtures, recordings, generated_s, size_mb)


def main() -> int:
    args = bench_args(__doc__, "bench.offline_bench")
    with generated_suite(args.cases, args.seed) as suite:
        root, fixtures, recordings = suite.root, suite.fixtures, suite.recordings
        t1 = time.perf_counter()
        code = cli.main(["run", str(fixtures), "--replay", str(recordings), "--out", str(root / "out"), "--quiet"])
        wall = time.perf_counter() - t1
        report = json.loads((root / "out" / "report.json").read_text())
        peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        child_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"cases              {args.cases}")
    print(f"input              {suite.size_mb:.1f} MB (fixtures + recordings), generated in {suite.generated_s:.1f} s")
    print(f"run wall           {wall:.2f} s  (load + validate + grade + analyse + report.json/md/junit)")
    print(f"throughput         {args.cases / wall:,.0f} cases/s")
    print(f"peak RSS           {peak_mib:,.0f} MiB (this process)")
    print(f"                   {child_mib:,.0f} MiB "
          "(largest forked helper; its pages are shared copy-on-write with the parent)")
    print(f"exit code          {code}  labels {report['summary']['counts']}")
    ok = wall < 15 and peak_mib < 1024
    print(f"target <15 s, <1 GiB: {'PASS' if ok else 'MISS'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
