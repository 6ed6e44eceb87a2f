"""Offline grading against the floor (issue #10, item 5), measured side by side in one run.

    python bench/offline_floor.py --cases 100000 --repeat 5

Generates the case mix of ``bench/offline_bench.py`` (its generator is imported, not copied),
then runs two subprocesses over the same two files, one after the other, ``--repeat`` times,
and prints wall time and peak RSS of each:

  floor        a plain script: read the fixtures JSONL and the recordings JSONL with
               ``json.loads``, validate each answer with one compiled ``jsonschema`` validator
               per schema, check the expected subset, write one JSON file.
  envelope-ci  ``python -m envelope_ci run FIXTURES --replay RECORDINGS --out DIR --quiet``
               (load, validate, grade, analyse, all reports) with ``PYTHONPATH`` set to the
               repository.

Target: envelope-ci within 1.5x the floor's wall time and 2x its peak memory. Each pair's
ratios are printed; the verdict reads their medians. The machines these run on are shared and
their speed drifts by a quarter between minutes: one pair can land either side of the target
for the same code, and alternating pairs see the same drift.

Peak RSS in the timed pairs comes from ``os.wait4`` on each child (Linux ``ru_maxrss``: the
largest single process of that child's tree, not a sum over processes). A child spawned from
this script can inherit this script's high-water mark, so this script's own peak is printed
too; it should stay far below both figures.

envelope-ci forks children (the replay's reader, the digests' idle child, a report writer), so
its memory is judged on the whole tree: after the pairs, one more run of each is sampled every
``TREE_SAMPLE_S`` for the sum of its processes' PSS (``/proc/PID/smaps_rollup``: a page shared
by a parent and its forked child counts half to each, so pages still shared are not counted
twice). Reading smaps costs milliseconds a process, so these runs are not timed. The memory
verdict reads this tree ratio; the largest process's ratio is printed beside it.
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
import time
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO))

from offline_bench import bench_parser, generated_suite  # noqa: E402  (the same generator, not a copy)

WALL_TARGET = 1.5
MEM_TARGET = 2.0

FLOOR = r'''
import json, sys
from jsonschema.validators import validator_for

fixtures_path, recordings_path, out_path = sys.argv[1:4]

def subset(expected, actual):
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(k in actual and subset(v, actual[k]) for k, v in expected.items())
    if isinstance(expected, list):
        return isinstance(actual, list) and len(actual) >= len(expected) and all(subset(v, a) for v, a in zip(expected, actual))
    return expected == actual and isinstance(expected, bool) == isinstance(actual, bool)

cases, validators = {}, {}
with open(fixtures_path) as fh:
    for line in fh:
        if line.strip():
            case = json.loads(line)
            key = json.dumps(case["schema"], sort_keys=True)
            if key not in validators:
                cls = validator_for(case["schema"])
                validators[key] = cls(case["schema"])
            cases[case["id"]] = (case, validators[key])

labels, counts = {}, {}
with open(recordings_path) as fh:
    for line in fh:
        if not line.strip():
            continue
        rec = json.loads(line)
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
                    parsed = json.loads(content)
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

with open(out_path, "w") as fh:
    json.dump({"counts": counts, "cases": labels}, fh)
'''


def measure(cmd: list[str], env: dict | None = None) -> tuple[float, float, int, float]:
    """Wall seconds, peak RSS MiB (wait4 ru_maxrss), exit code and CPU seconds (user+sys) of one subprocess."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_maxrss / 1024, proc.returncode, usage.ru_utime + usage.ru_stime


# How often the whole tree's memory is sampled (``tree_peak_mib``): each sample reads every process's smaps.
TREE_SAMPLE_S = 0.02


def tree_peak_mib(cmd: list[str], env: dict | None = None) -> tuple[float, int] | None:
    """Peak of the sum of PSS over a subprocess and its descendants, in MiB, and the most processes seen at once.

    None where Linux's ``smaps_rollup`` or ``task/TID/children`` is missing (the tree could not be
    walked), or where the command failed (its figure would not be the run's).
    """
    if not Path("/proc/self/smaps_rollup").exists() or not Path(f"/proc/self/task/{os.getpid()}/children").exists():
        return None
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
    peak_kib, most = 0, 0
    while proc.poll() is None:
        pids = _tree(proc.pid)
        peak_kib, most = max(peak_kib, sum(map(_pss_kib, pids))), max(most, len(pids))
        time.sleep(TREE_SAMPLE_S)
    return (peak_kib / 1024, most) if proc.returncode in (0, 1) else None


def _tree(root: int) -> list[int]:
    """``root`` and every process below it (``/proc/PID/task/TID/children``), as now."""
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                todo += map(int, Path(f"/proc/{pid}/task/{task}/children").read_text().split())
        except OSError:  # it ended meanwhile
            continue
    return found


def _pss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except (OSError, ValueError):  # it ended meanwhile
        pass
    return 0


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


class Pair(NamedTuple):
    """One floor run and the envelope-ci run right after it, over the same files."""

    floor_wall: float
    floor_mib: float
    floor_cpu: float
    ci_wall: float
    ci_mib: float
    ci_cpu: float


class Commands(NamedTuple):
    """The two commands over the same files, and envelope-ci's environment."""

    floor: list[str]
    ci: list[str]
    ci_env: dict[str, str]


def commands(root: Path, fixtures: Path, recordings: Path, floor_py: Path) -> Commands:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return Commands([sys.executable, str(floor_py), str(fixtures / "cases.jsonl"), str(recordings), str(root / "floor.json")],
                    [sys.executable, "-m", "envelope_ci", "run", str(fixtures), "--replay", str(recordings), "--out", str(root / "out"), "--quiet"],
                    env)


def clear_outputs(root: Path) -> None:
    """No run reads another's files."""
    for earlier in (root / "floor.json", root / "out"):
        shutil.rmtree(earlier) if earlier.is_dir() else earlier.unlink(missing_ok=True)


def run_pair(root: Path, run: Commands) -> tuple[Pair, dict, dict, int, int]:
    """The floor, then envelope-ci: the pair's figures, each one's label counts and exit codes."""
    clear_outputs(root)
    floor_wall, floor_mib, floor_code, floor_cpu = measure(run.floor)
    ci_wall, ci_mib, ci_code, ci_cpu = measure(run.ci, env=run.ci_env)
    floor_counts = json.loads((root / "floor.json").read_text())["counts"] if floor_code == 0 else {}
    report_path = root / "out" / "report.json"
    ci_counts = json.loads(report_path.read_text())["summary"]["counts"] if report_path.exists() else {}
    return Pair(floor_wall, floor_mib, floor_cpu, ci_wall, ci_mib, ci_cpu), floor_counts, ci_counts, floor_code, ci_code


def main() -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--repeat", type=int, default=5, help="floor and envelope-ci pairs, alternating (default: %(default)s)")
    args = parser.parse_args()
    load_before = os.getloadavg()
    pairs: list[Pair] = []
    with generated_suite(args.cases, args.seed) as suite:
        root, fixtures, recordings = suite.root, suite.fixtures, suite.recordings
        floor_py = root / "floor.py"
        floor_py.write_text(FLOOR)
        self_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # before any child starts
        run = commands(root, fixtures, recordings, floor_py)
        for _ in range(max(1, args.repeat)):
            pair, floor_counts, ci_counts, floor_code, ci_code = run_pair(root, run)
            pairs.append(pair)
            if floor_code != 0 or ci_code not in (0, 1):
                break
        clear_outputs(root)
        floor_tree = tree_peak_mib(run.floor)
        ci_tree = tree_peak_mib(run.ci, env=run.ci_env)
    load_after = os.getloadavg()
    print(f"machine            {os.cpu_count()} CPUs (nproc {len(os.sched_getaffinity(0))}), {cpu_model()}, "
          f"Python {platform.python_version()}")
    print(f"load average       {load_before[0]:.2f} before, {load_after[0]:.2f} after (1 min; other work on the machine skews wall times)")
    print(f"cases              {args.cases}")
    print(f"input              {suite.size_mb:.1f} MB (fixtures + recordings), generated in {suite.generated_s:.1f} s")
    print("pair    floor wall   peak RSS    CPU   | envelope-ci wall   peak RSS    CPU   | wall ratio  memory ratio")
    for number, p in enumerate(pairs, 1):
        print(f"{number:>4}   {p.floor_wall:7.2f} s {p.floor_mib:7,.0f} MiB {p.floor_cpu:6.2f} s | {p.ci_wall:11.2f} s {p.ci_mib:7,.0f} MiB "
              f"{p.ci_cpu:6.2f} s | {p.ci_wall / p.floor_wall:8.2f}x  {p.ci_mib / p.floor_mib:8.2f}x")
    wall_ratio = statistics.median(p.ci_wall / p.floor_wall for p in pairs)
    mem_ratio = statistics.median(p.ci_mib / p.floor_mib for p in pairs)
    cpu_ratio = statistics.median(p.ci_cpu / p.floor_cpu for p in pairs)
    print(f"floor counts       {floor_counts}  exit {floor_code}")
    print(f"envelope-ci counts {ci_counts}  exit {ci_code}")
    print(f"this script        {self_mib:,.0f} MiB peak before the children (a spawned child may inherit it)")
    print(f"wall ratio         {wall_ratio:.2f}x median of {len(pairs)} (target <= {WALL_TARGET}x): {'PASS' if wall_ratio <= WALL_TARGET else 'MISS'}")
    print(f"CPU ratio          {cpu_ratio:.2f}x median (info: less sensitive than wall to other load)")
    print(f"largest process    {mem_ratio:.2f}x median of the peak RSS ratios above (info: envelope-ci's children not counted)")
    if floor_tree is None or ci_tree is None:
        print("memory ratio       not measured: no /proc/PID/smaps_rollup or task children here (Linux only), or a run failed")
    else:
        tree_ratio = ci_tree[0] / floor_tree[0]
        print(f"whole tree         floor {floor_tree[0]:,.0f} MiB PSS ({floor_tree[1]} process), envelope-ci {ci_tree[0]:,.0f} MiB PSS "
              f"(up to {ci_tree[1]} processes at once), one untimed run each")
        print(f"memory ratio       {tree_ratio:.2f}x of the whole trees' peak PSS (target <= {MEM_TARGET}x): "
              f"{'PASS' if tree_ratio <= MEM_TARGET else 'MISS'}")
    return 0 if floor_code == 0 and ci_code in (0, 1) else 2


if __name__ == "__main__":
    sys.exit(main())
