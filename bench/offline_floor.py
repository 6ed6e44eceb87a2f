"""Offline grading against two floors (issue #10 item 5, issue #23 item 5), measured side by side in one run.

    python -m bench.offline_floor --cases 100000 --repeat 3 [--keep DIR]

Generates the case mix of ``bench/offline_bench.py`` (its generator is imported, not copied), or
with ``--keep DIR`` reuses the one made earlier in ``DIR/N-cases-seed-S`` (made there if missing), then
runs three subprocesses over the same two files, ``--repeat`` times:

  plain floor  a plain script: read the fixtures JSONL and the recordings JSONL with ``json.loads``,
               validate each answer with one compiled ``jsonschema`` validator per schema, check
               the expected subset, write one JSON file (``json.dump``).
  fast floor   the same loop, the same code, with ``orjson`` to decode and write and one
               ``jsonschema_rs.validator_for`` per schema (``is_valid``). Bench-only dependencies:
               ``pip install orjson jsonschema-rs`` (without them the script says so and exits 2).
  envelope-ci  ``python -m envelope_ci run FIXTURES --replay RECORDINGS --out DIR --quiet`` (load,
               validate, grade, analyse, all reports) with ``PYTHONPATH`` set to the repository.

Each repeat runs the three in turn, the order rotated by one each repeat, so the machine's drift
(its speed moves by a quarter between minutes) falls on each alike. The verdicts read the medians
of the per-repeat ratios, envelope-ci against the plain floor: wall <= 1.2x, CPU <= 1.2x, peak
memory <= 1.5x. Against the fast floor, wall and CPU ratios are printed as information. The three
must agree on every label count (a floor's ``pass`` is envelope-ci's ``right``, and so on), else
the script exits 1.

Measured on each run (``os.wait4`` of the child, wall time around it):

* CPU time: ``ru_utime + ru_stime`` of the child, which includes every descendant that was waited
  for at each level (a grandchild reaped by its parent counts; one left running when its parent
  exits, reparented elsewhere, does not). A descendant still alive once the child is reaped is
  reported (its CPU is missing).
* Peak memory: ``ru_maxrss`` (Linux: the largest single process of the tree, not a sum). A thread
  watches ``/proc/PID/task/TID/children`` every ``WATCH_S`` for children. If any run grew one, the
  memory verdict reads the whole tree instead: one more untimed run of the plain floor and of
  envelope-ci, sampled every ``WATCH_S`` for the sum of their processes' PSS
  (``/proc/PID/smaps_rollup``: a page a forked child still shares counts half to each).

A child spawned by vfork (``subprocess``'s default) would inherit this script's peak RSS as its own
(exec keeps the high-water mark of the memory it leaves), so the runs are forked (``FORK``), this script
reads no report itself (a helper process does), and it prints its own peak, which should stay far
below the floors'.

Exit codes: 0 measured (whatever the verdicts), 1 the counts disagree, 2 a run failed or a
dependency is missing.
"""
from __future__ import annotations

import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import NamedTuple

from bench.offline_bench import bench_parser, generate  # the same generator, not a copy

REPO = Path(__file__).resolve().parent.parent

WALL_TARGET = 1.2
CPU_TARGET = 1.2
MEM_TARGET = 1.5
# How often a run's process tree is looked at: for children in the timed runs, for PSS in the sampled ones.
WATCH_S = 0.02
# A floor's label as envelope-ci names it (an answer that is not JSON fails its schema).
CI_LABEL = {"pass": "right", "wrong": "wrong", "schema": "schema", "bad_json": "schema", "cut": "truncated",
            "error": "drop", "empty": "empty"}

# One script for both floors: the loop is the same code, only the functions bound at the top differ.
FLOOR = r'''
import sys

impl, fixtures_path, recordings_path, out_path = sys.argv[1:5]
if impl == "fast":
    import jsonschema_rs
    import orjson
    mode, loads, compile_schema = "rb", orjson.loads, jsonschema_rs.validator_for
    def schema_key(schema):
        return orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
    def dump(obj, fh):
        fh.write(orjson.dumps(obj))
else:
    import json
    from jsonschema.validators import validator_for
    mode, loads, dump = "r", json.loads, json.dump
    def schema_key(schema):
        return json.dumps(schema, sort_keys=True)
    def compile_schema(schema):
        return validator_for(schema)(schema)

def subset(expected, actual):
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(k in actual and subset(v, actual[k]) for k, v in expected.items())
    if isinstance(expected, list):
        return (isinstance(actual, list) and len(actual) >= len(expected)
                and all(subset(v, a) for v, a in zip(expected, actual)))
    return expected == actual and isinstance(expected, bool) == isinstance(actual, bool)

cases, validators = {}, {}
with open(fixtures_path, mode) as fh:
    for line in fh:
        if line.strip():
            case = loads(line)
            key = schema_key(case["schema"])
            if key not in validators:
                validators[key] = compile_schema(case["schema"])
            cases[case["id"]] = (case, validators[key])

labels, counts = {}, {}
with open(recordings_path, mode) as fh:
    for line in fh:
        if not line.strip():
            continue
        rec = loads(line)
        case, validator = cases[rec["id"]]
        env = rec["recorded"]
        body = env.get("body") or {}
        choices = body.get("choices") or []
        if "error" in env:
            label = "error"
        elif not choices:
            label = "empty"
        else:
            choice = choices[0]
            content = (choice.get("message") or {}).get("content") or ""
            if choice.get("finish_reason") == "length":
                label = "cut"
            elif len(content) > case.get("max_chars", 1 << 60):
                label = "wrong"
            else:
                try:
                    parsed = loads(content)
                except ValueError:
                    label = "bad_json"
                else:
                    if not validator.is_valid(parsed):
                        label = "schema"
                    elif not subset(case.get("expect_json"), parsed):
                        label = "wrong"
                    else:
                        label = "pass"
        labels[rec["id"]] = label
        counts[label] = counts.get(label, 0) + 1

with open(out_path, "wb" if mode == "rb" else "w") as fh:
    dump({"counts": counts, "cases": labels}, fh)
'''

# Prints the label counts of a floor's JSON or of report.json: run as a child, so that parsing a big report
# does not raise this script's peak RSS, which every later child would inherit.
COUNTS = r'''
import json, sys
data = json.load(open(sys.argv[1], encoding="utf-8"))
print(json.dumps(data["counts"] if "counts" in data else data["summary"]["counts"]))
'''

# Any callable makes ``subprocess`` fork instead of vfork. A vforked child execs from this script's own memory, and
# exec keeps that memory's high-water mark as the child's ru_maxrss; a forked one starts from its own copy, near zero.
FORK = os.getpid

NAMES = ("plain", "fast", "ci")
TITLES = {"plain": "plain floor", "fast": "fast floor", "ci": "envelope-ci"}


class Run(NamedTuple):
    """One subprocess's figures."""

    wall: float
    cpu: float
    mib: float  # ru_maxrss
    code: int
    children: int  # descendants seen while it ran
    outlived: int  # descendants still alive once it was reaped (their CPU is not in ``cpu``)


class Command(NamedTuple):
    argv: list[str]
    output: Path  # the one file whose counts are compared
    stderr: Path


def children_file_works() -> bool:
    return Path(f"/proc/self/task/{os.getpid()}/children").exists()


def descendants(root: int) -> list[int]:
    """Every process below ``root`` (``/proc/PID/task/TID/children``), as now."""
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                kids = [int(k) for k in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
                found += kids
                todo += kids
        except (OSError, ValueError):  # it ended meanwhile
            continue
    return found


def start_time(pid: int) -> str | None:
    """Field 22 of ``/proc/PID/stat`` (tells a process from a later one given the same pid); None once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def measure(cmd: Command, env: dict[str, str]) -> Run:
    """Wall, CPU (children included) and ru_maxrss of one subprocess; a thread notes the descendants it grows."""
    seen: dict[int, str | None] = {}
    done = threading.Event()
    with cmd.stderr.open("wb") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd.argv, env=env, stdout=subprocess.DEVNULL, stderr=err, preexec_fn=FORK)

        def watch() -> None:
            while not done.wait(WATCH_S):
                for pid in descendants(proc.pid):
                    if pid not in seen:
                        seen[pid] = start_time(pid)

        watcher = threading.Thread(target=watch, daemon=True)
        if children_file_works():
            watcher.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
    done.set()
    if watcher.is_alive():
        watcher.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    outlived = sum(1 for pid, started in seen.items() if started is not None and start_time(pid) == started)
    return Run(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, proc.returncode, len(seen), outlived)


def tree_peak_mib(cmd: Command, env: dict[str, str]) -> tuple[float, int] | None:
    """Peak of the sum of PSS over a subprocess and its descendants, in MiB, and the most processes seen at once.

    None where Linux's ``smaps_rollup`` is missing, or where the command failed (its figure would not be the run's).
    """
    if not Path("/proc/self/smaps_rollup").exists() or not children_file_works():
        return None
    with cmd.stderr.open("wb") as err:
        proc = subprocess.Popen(cmd.argv, env=env, stdout=subprocess.DEVNULL, stderr=err, preexec_fn=FORK)
        peak_kib, most = 0, 0
        while proc.poll() is None:
            pids = [proc.pid, *descendants(proc.pid)]
            peak_kib, most = max(peak_kib, sum(map(pss_kib, pids))), max(most, len(pids))
            time.sleep(WATCH_S)
    return (peak_kib / 1024, most) if proc.returncode in (0, 1) else None


def pss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except (OSError, ValueError):  # it ended meanwhile
        pass
    return 0


def counts_of(path: Path) -> dict[str, int] | None:
    """The label counts in a floor's output or a report.json, read by a child; None when there is none."""
    if not path.exists():
        return None
    done = subprocess.run([sys.executable, "-c", COUNTS, str(path)], capture_output=True, text=True, check=False)
    return json.loads(done.stdout) if done.returncode == 0 else None


def as_ci_labels(counts: dict[str, int]) -> dict[str, int]:
    named: dict[str, int] = {}
    for label, n in counts.items():
        key = CI_LABEL.get(label, f"?{label}")
        named[key] = named.get(key, 0) + n
    return named


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def loads() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def suite_in(keep: Path | None, work: Path, cases: int, seed: int) -> tuple[Path, Path, str]:
    """The fixtures and recordings: in ``work``, or kept in a folder of ``keep`` for these cases and seed."""
    root = keep.resolve() / f"{cases}-cases-seed-{seed}" if keep else work / "suite"
    fixtures, recordings, complete = root / "fixtures", root / "recordings.jsonl", root / "complete"
    if complete.exists():
        return fixtures, recordings, f"reused from {root}"
    shutil.rmtree(root, ignore_errors=True)  # an earlier making of it that did not finish
    root.mkdir(parents=True)
    t0 = time.perf_counter()
    generate(root, cases, seed)
    complete.touch()
    made = f"generated in {time.perf_counter() - t0:.1f} s"
    return fixtures, recordings, made + (f", kept in {root}" if keep else "")


def commands(work: Path, fixtures: Path, recordings: Path) -> dict[str, Command]:
    floor_py = work / "floor.py"
    floor_py.write_text(FLOOR)
    cases = str(fixtures / "cases.jsonl")
    return {
        "plain": Command([sys.executable, str(floor_py), "plain", cases, str(recordings), str(work / "plain.json")],
                         work / "plain.json", work / "plain.err"),
        "fast": Command([sys.executable, str(floor_py), "fast", cases, str(recordings), str(work / "fast.json")],
                        work / "fast.json", work / "fast.err"),
        "ci": Command([sys.executable, "-m", "envelope_ci", "run", str(fixtures), "--replay", str(recordings),
                       "--out", str(work / "out"), "--quiet"], work / "out" / "report.json", work / "ci.err"),
    }


def clear_outputs(work: Path) -> None:
    """No run reads another's files."""
    for name in ("plain.json", "fast.json"):
        (work / name).unlink(missing_ok=True)
    shutil.rmtree(work / "out", ignore_errors=True)


def failed(name: str, cmd: Command, run: Run) -> bool:
    if run.code in ((0, 1) if name == "ci" else (0,)):
        return False
    tail = cmd.stderr.read_text(errors="replace")[-3000:].rstrip()
    print(f"{TITLES[name]} exited {run.code}; its stderr ends:\n{tail or '(empty)'}")
    return True


def ratio_line(label: str, values: list[float], target: float | None) -> str:
    median = statistics.median(values)
    each = " / ".join(f"{v:.2f}" for v in values)
    verdict = f"(target <= {target}x): {'PASS' if median <= target else 'MISS'}" if target else "(info)"
    return f"{label:<27} {median:.2f}x median of {each} {verdict}"


def main() -> int:
    parser = bench_parser(__doc__, "bench.offline_floor")
    parser.add_argument("--repeat", type=int, default=3,
                        help="rounds of plain floor, fast floor and envelope-ci, order rotated (default: %(default)s)")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="keep the suite in DIR/N-cases-seed-S, or reuse it from there (default: a temporary one)")
    args = parser.parse_args()
    try:
        import jsonschema_rs  # noqa: F401
        import orjson  # noqa: F401
    except ImportError as exc:
        print(f"the fast floor needs {exc.name} (bench-only, not in pyproject.toml): pip install orjson jsonschema-rs",
              file=sys.stderr)
        return 2

    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    print(f"machine            {platform.processor() or platform.machine()}, {cpu_model()}, nproc "
          f"{len(os.sched_getaffinity(0))} (of {os.cpu_count()}), Python {platform.python_version()}")
    load_before = loads()
    with tempfile.TemporaryDirectory(prefix="envelope-ci-floor-") as tmp:
        work = Path(tmp)
        fixtures, recordings, made = suite_in(args.keep, work, args.cases, args.seed)
        size_mb = ((fixtures / "cases.jsonl").stat().st_size + recordings.stat().st_size) / 1e6
        print(f"input              {args.cases} cases, {size_mb:.1f} MB (fixtures + recordings), {made}")
        cmds = commands(work, fixtures, recordings)
        rounds: list[dict[str, Run]] = []
        counts: dict[str, dict[str, int] | None] = {}
        broken = False
        print(f"{'':11} | " + " | ".join(f"{TITLES[n]:<22}" for n in NAMES) + " | envelope-ci / plain")
        print(f"{'round order':<11} | " + " | ".join(f"{'wall s':>7} {'CPU s':>7} {'MiB':>6}" for _ in NAMES)
              + f" | {'wall':>5} {'CPU':>5} {'mem':>5}")
        for k in range(max(1, args.repeat)):
            order = NAMES[k % 3:] + NAMES[:k % 3]
            runs: dict[str, Run] = {}
            clear_outputs(work)
            for name in order:
                runs[name] = measure(cmds[name], env)
                broken = failed(name, cmds[name], runs[name]) or broken
                counts[name] = counts_of(cmds[name].output)
            rounds.append(runs)
            cells = " | ".join(f"{runs[n].wall:7.2f} {runs[n].cpu:7.2f} {runs[n].mib:6,.0f}" for n in NAMES)
            p, c = runs["plain"], runs["ci"]
            print(f"{k + 1:>5} {'>'.join(n[0] for n in order):<5} | {cells} | "
                  f"{c.wall / p.wall:4.2f}x {c.cpu / p.cpu:4.2f}x {c.mib / p.mib:4.2f}x")
            if broken:
                break
        clear_outputs(work)
        grew = {n: max(r[n].children for r in rounds) for n in NAMES}
        tree: dict[str, tuple[float, int] | None] = {}
        if not broken and any(grew.values()):
            tree = {n: tree_peak_mib(cmds[n], env) for n in ("plain", "ci")}
    print(f"load average       {load_before} before, {loads()} after (1, 5, 15 min)")

    ci_counts = counts.get("ci")
    floors = {n: as_ci_labels(counts[n] or {}) for n in ("plain", "fast")}
    for name in NAMES:
        print(f"{TITLES[name] + ' counts':<18} {counts.get(name)}")
    agree = ci_counts is not None and floors["plain"] == floors["fast"] == ci_counts
    if ci_counts is None:
        print("agreement          not checked: envelope-ci left no report.json")
    else:
        print(f"agreement          {'the three agree on every count' if agree else 'MISMATCH: the counts differ'}")
    if broken:
        return 2

    def ratios(metric: str, over: str) -> list[float]:
        return [getattr(r["ci"], metric) / getattr(r[over], metric) for r in rounds]

    print(ratio_line("wall ci/plain", ratios("wall", "plain"), WALL_TARGET))
    print(ratio_line("CPU ci/plain", ratios("cpu", "plain"), CPU_TARGET))
    print(ratio_line("wall ci/fast", ratios("wall", "fast"), None))
    print(ratio_line("CPU ci/fast", ratios("cpu", "fast"), None))
    outlived = {n: max(r[n].outlived for r in rounds) for n in NAMES}
    if any(outlived.values()):
        print(f"warning            processes outlived their run, their CPU not counted: {outlived}")
    if not any(grew.values()):
        how = "no run grew a child" if children_file_works() else "children not watched (no /proc children here)"
        print(ratio_line("memory ci/plain (maxrss)", ratios("mib", "plain"), MEM_TARGET) + f"; {how}")
    else:
        print(f"children           most descendants seen in one run: {grew}")
        print(ratio_line("largest process ci/plain", ratios("mib", "plain"), None))
        plain_tree, ci_tree = tree.get("plain"), tree.get("ci")
        if plain_tree and ci_tree:
            (plain_mib, plain_n), (ci_mib, ci_n) = plain_tree, ci_tree
            tree_ratio = ci_mib / plain_mib
            print(f"whole tree         plain {plain_mib:,.0f} MiB PSS ({plain_n} process(es)), envelope-ci "
                  f"{ci_mib:,.0f} MiB PSS (up to {ci_n} at once), one untimed sampled run each")
            print(f"memory ci/plain (tree PSS)  {tree_ratio:.2f}x (target <= {MEM_TARGET}x): "
                  f"{'PASS' if tree_ratio <= MEM_TARGET else 'MISS'}")
        else:
            print("memory ci/plain (tree PSS)  not measured: no /proc/PID/smaps_rollup here, or a sampled run failed")
    self_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    low = min(r["plain"].mib for r in rounds)
    note = "" if self_mib < low / 2 else " (near the floors' peak: the runs are forked, so they should not inherit it)"
    print(f"this script        {self_mib:,.0f} MiB peak RSS{note}")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
