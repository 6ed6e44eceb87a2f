"""Command line: flags and environment -> RunConfig; errors -> exit codes. No logic here."""
from __future__ import annotations

import argparse
import gc
import json
import os
import re
import shlex
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from . import __version__
from .config import RunConfig
from .errors import UsageError, one_line
from .model import DEFAULT_PROVIDER, PINS_NAME, ExitCode, Lane, RetryPolicy
from .shard import SHARD_HELP, ShardSpec, parse_shard
from .sources.endpoints import parse_key_env, parse_override
from .sources.select import FILTER_HELP
from .transport.interrupts import STOP, Interrupts

if TYPE_CHECKING:
    from .result import RunResult

EPILOG = """\
exit codes: 0 pass · 1 regression or alert · 2 bad input or usage · 3 inconclusive
(cases or repeats undelivered after retries, an alarm waiting for undelivered cases, an interrupted
or partial run, or an adjudication run whose responses named no model)

examples:
  envelope-ci run evals/                       grade recorded completions offline (no key, no network)
  envelope-ci run evals/ --replay new.jsonl    grade a recordings file against the same pins
  EVAL_API_KEY=... envelope-ci run evals/ --base-url https://host/v1 --model gpt-4o-mini
  envelope-ci run evals/ --lane adjudication --write-pins    (locally, then commit the pins)
  envelope-ci run evals/ --filter 'refund-*' --filter tag:billing   a partial run: never a pass, never pins
  envelope-ci run evals/ --shard 2/4 --out shard-2    one of 4 parts of the suite; merge them for the verdict
  envelope-ci merge shard-*/report.json --out merged   the whole run's reports and verdict from every shard's
  envelope-ci hash evals/                      print the fixtures hash the pins must match
"""

INIT_DESCRIPTION = """\
Write a fixtures directory to start from: four cases across the easy and medium strata (a
JSON answer checked against a schema, a tool call, two text answers; three of them send the
product's own prompt file, filled from variables), each with a recorded answer so that they
pass offline as written; envelope-ci.yaml with every setting at its default, commented out;
and, under the current directory (your repository's root), .github/workflows/envelope-ci.yml.
Nothing is overwritten: if any of these files exists, init names it and writes nothing."""

INIT_EPILOG = """\
examples:
  envelope-ci init                      evals/ and the workflow, from the repository root
  envelope-ci init tests/llm-evals      another directory
  envelope-ci init billing-evals --no-workflow    a second suite; add it to your workflow yourself
"""

MERGE_DESCRIPTION = """\
Merge the report.json of every shard of one run (run --shard I/N) into the reports of the whole
run: report.json, report.md and junit.xml, the same as one unsharded run over the same envelopes
would have written (live runs: apart from how each shard's endpoint behaved). Each case was
judged by its shard; strata, alerts, the gate and the verdict are judged here, on every case at
once, never averaged, and the exit code is the whole run's. Nothing is merged (exit 2, every
reason named) unless the reports are every shard 1..N exactly once, each case in one of them,
with one tool version, fixtures hash, pins, base branch pins, fingerprint and run settings."""

MERGE_EPILOG = """\
exit codes: as run: 0 pass · 1 regression or alert · 2 the reports cannot be merged · 3 inconclusive

examples:
  for i in 1 2 3 4; do envelope-ci run evals/ --shard $i/4 --out shards/$i --quiet & done; wait
  envelope-ci merge shards/*/report.json --out envelope-ci-out
"""

IMPORT_DESCRIPTION = """\
Give each case the envelopes a live run recorded for it, so offline runs (and CI without a
key) grade real answers instead of hand-typed ones. Your fixture files are not edited: each
file's envelopes go beside it, in FILE.recorded.jsonl (cases.yaml -> cases.yaml.recorded.jsonl),
which is read with it. Several lines for one case are its repeats. A line whose id matches no
case is an error, and then nothing is written. The recorded answers are part of the fixtures
(and of the fixtures hash): review them, then re-pin.

Given a promptfoo config (promptfooconfig.yaml, .yml or .json) instead, import converts it into
the directory: fixtures, envelope-ci.yaml, and IMPORT.md with the run commands and every item
it could not convert, and why (docs/promptfoo.md). Nothing the config names is run."""

IMPORT_EPILOG = """\
examples:
  EVAL_API_KEY=... envelope-ci run evals/ --base-url https://host/v1 --model gpt-4o-mini --record run.jsonl
  envelope-ci import run.jsonl --into evals/
  envelope-ci run evals/ --lane adjudication --write-pins    then commit evals/ (sidecars and pins)
  envelope-ci import promptfooconfig.yaml --into evals/ --dry-run   what a promptfoo config would lose
"""
HISTORY_DESCRIPTION = """\
Read the pins file's history with git: one point per commit that changed it on the first-parent
history of --ref (a merged pull request is one point), the last --last of them, oldest first.
Each point has the commit's date, id and pull request (from GitHub's merge message or a squash
title ending "(#N)"), each stratum's pass rate (the strata read from the fixtures at that commit,
as data: nothing in them is run), yield, median time and size, and each case's pinned label.
Writes history.json (its schema: envelope-ci schema history) and history.md, with a Mermaid line
chart per measure. A shallow clone that stops early gives a note, not an error."""

HISTORY_EPILOG = """\
exit codes: 0 history written (a shallow clone's short history too) · 2 bad usage (not a git
repository, a --ref that names no commit, git missing)

examples:
  envelope-ci history evals/                       the last 30 changes of evals/envelope-pins.json here
  envelope-ci history evals/ --ref main --last 10  the last 10 on main
  envelope-ci history evals/ --ref origin/main --out trend   into trend/history.json, trend/history.md
  jq '.points[] | [.date, .strata.easy.pass_rate]' envelope-ci-out/history.json
"""
# What `envelope-ci schema` prints: the first is the default, a whole fixture file, for editors.
SCHEMAS = ("file", "case", "report", "history")


def truthy(value: str | None) -> bool:
    """How CI systems spell yes: GitHub and GitLab say ``true``, others ``1`` or ``yes``."""
    return (value or "").strip().lower() in ("true", "1", "yes")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="envelope-ci",
        description="Gate changes on LLM prompt evals: label every envelope "
        "(drop, empty, truncated, schema, wrong, right), "
        "judge four channels (correctness, schema, size, time) against pinned last-good values, keep difficulty strata "
        "as separate instruments, and fail only on a real regression.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"envelope-ci {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="grade a fixtures directory and write report.json, report.md, junit.xml",
                         epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("fixtures", metavar="FIXTURES_DIR", type=Path,
                     help="directory of .yaml/.yml/.json/.jsonl cases (searched recursively)")
    run.add_argument("--pins", type=Path, help=f"pins file (default: FIXTURES_DIR/{PINS_NAME}); --write-pins refuses "
                     "one inside FIXTURES_DIR that a run without this --pins would read as a fixture")
    run.add_argument("--out", type=Path, default=Path("envelope-ci-out"), metavar="DIR",
                     help="output directory (default: %(default)s)")
    run.add_argument("--config", type=Path, help="thresholds file (default: FIXTURES_DIR/envelope-ci.yaml if present)")
    live = run.add_argument_group("live runs (without --base-url, recorded envelopes are graded offline)")
    live.add_argument("--base-url", default=os.environ.get("EVAL_BASE_URL") or None,
                      help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1 (env EVAL_BASE_URL); "
                      "the key comes from EVAL_API_KEY only")
    live.add_argument("--model", default=os.environ.get("EVAL_MODEL") or None,
                      help="model name to request (env EVAL_MODEL)")
    live.add_argument("--concurrency", type=int, default=4,
                      help="the most requests in flight at once; 429s lower it for a while, answers raise it back "
                      "(default: %(default)s)")
    live.add_argument("--repeats", type=int, default=1,
                      help="calls per case; median and p95 come from them (default: %(default)s)")
    live.add_argument("--stream", action="store_true", help="stream responses (SSE) and record time to first token")
    live.add_argument("--provider", default=DEFAULT_PROVIDER, metavar="NAME",
                      help="the endpoint's wire format: openai-chat (POST BASE_URL/chat/completions), "
                      "anthropic-messages (POST BASE_URL/v1/messages, key as x-api-key), openai-responses "
                      "(POST BASE_URL/responses), or a plug-in's; part of the fingerprint (default: %(default)s)")
    live.add_argument("--temperature", type=float, default=0.0,
                      help="sampling temperature, part of the fingerprint (default: %(default)s)")
    live.add_argument("--timeout", type=float, default=120.0,
                      help="per-attempt deadline in seconds, connect to last byte, unless the case sets timeout_s "
                      "(default: %(default)s)")
    live.add_argument("--max-run-time", type=float, metavar="SECONDS",
                      help="bound the whole run (loading, calls, grading, reports): live calls stop this many seconds "
                      "after they begin (calls in flight get 5 s more); a run still going 2 s past its time "
                      "(a fixture's regex that never ends, say) is stopped. Either way the reports say what finished, "
                      "no pins are written, and the exit code is 3 (inconclusive)")
    live.add_argument("--max-attempts", type=int, default=3,
                      help="attempts per call for drops and empties (a 503 counts half, a 429 none); "
                      "answers are never retried (default: %(default)s)")
    live.add_argument("--retry-budget", type=int, default=None,
                      help="retries allowed across the whole run "
                      "(default: half a retry per call, cases x repeats, at least 100)")
    live.add_argument("--max-retry-after", type=float, default=60.0,
                      help="longest Retry-After wait honoured, seconds (default: %(default)s)")
    live.add_argument("--max-rate-limit-wait", type=float, default=600.0,
                      help="total seconds the run may wait on rate limits (429); such waits do not use up attempts "
                      "(default: %(default)s)")
    live.add_argument("--record", type=Path, help="save every envelope of a live run as JSONL, flushed per case")
    live.add_argument("--endpoint", dest="endpoint_urls", action="append", default=[], type=_endpoint_arg,
                      metavar="NAME=URL",
                      help="base URL of an endpoint named in envelope-ci.yaml (an llm-rubric judge), for this run "
                      "(repeatable); the settings file's own URL is called only at the --base-url host")
    live.add_argument("--allow-key-env", dest="allow_key_env", action="append", default=[], type=_key_env_arg,
                      metavar="NAME", help="let envelope-ci.yaml send this environment variable: a judge's "
                      "api_key_env, ${NAME} in headers (repeatable); nothing else is read, and EVAL_API_KEY "
                      "goes only to the --base-url host")
    run.add_argument("--replay", type=Path,
                     help="grade a recordings JSONL (from --record) instead of what the fixtures embed; "
                     "cases it lacks fall back to their own recordings, and the report says how many came from each")
    lanes = run.add_argument_group("lanes and pins")
    lanes.add_argument("--lane", choices=[lane.value for lane in Lane], default=Lane.SMOKE.value,
                       help="smoke explores; only adjudication may write pins (default: %(default)s)")
    lanes.add_argument("--endpoint-class", default="unspecified",
                       help="names the serving setup, part of the fingerprint (default: %(default)s)")
    lanes.add_argument("--write-pins", action="store_true",
                       help="write this run's results as the pins (adjudication, outside CI)")
    lanes.add_argument("--move-baseline", action="store_true",
                       help="with --write-pins: accept a new fingerprint (model, endpoint class, temperature)")
    lanes.add_argument("--base-pins", type=Path,
                       help="the base branch's pins file, for the per-case diff in the report")
    lanes.add_argument("--allow-unverified-recordings", action="store_true",
                       help="with --write-pins: pin recordings that carry no request record (you checked their answers "
                       "are real); envelope-ci.yaml cannot allow it")
    run.add_argument("--format", dest="formats", action="append", default=[], metavar="NAME",
                     help="also write this report format (repeatable); built-ins: console (summary.txt), "
                     "html (report.html); json, markdown and junit are always written; "
                     "plug-ins register more (docs/plugins.md)")
    run.add_argument("--filter", dest="filters", action="append", default=[], metavar="PATTERN",
                     help="grade only the cases a filter selects (repeatable: a case is in when it matches any): "
                     f"{FILTER_HELP}. "
                     "A partial run checks the fixtures in full but never passes (at best inconclusive, exit 3) "
                     "and never writes pins")
    run.add_argument("--shard", type=_shard_arg, metavar="I/N", help=SHARD_HELP)
    run.add_argument("--quiet", action="store_true", help="print only the verdict line")

    merge = sub.add_parser("merge",
                           help="merge every shard's report.json (run --shard I/N) into the whole run's reports "
                           "and verdict",
                           description=MERGE_DESCRIPTION, epilog=MERGE_EPILOG,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    merge.add_argument("reports", metavar="REPORT", type=Path, nargs="+",
                       help="the report.json of each shard, in any order")
    merge.add_argument("--out", type=Path, required=True, metavar="DIR",
                       help="where the merged report.json, report.md and junit.xml go")
    merge.add_argument("--format", dest="formats", action="append", default=[], metavar="NAME",
                       help="also write this report format, as run --format")
    merge.add_argument("--quiet", action="store_true", help="print only the verdict line")

    hash_cmd = sub.add_parser("hash", help="print the fixtures hash (what the pins file records)",
                              description="Validate FIXTURES_DIR and print its hash: one digest over every file in it "
                              "(hidden files, the pins file and a --replay file left out). "
                              "A run fails with fixtures_changed while this differs from the pins' fixtures_hash.")
    hash_cmd.add_argument("fixtures", metavar="FIXTURES_DIR", type=Path, help="directory of fixture files")
    hash_cmd.add_argument("--pins", type=Path,
                          help=f"pins file to leave out of the hash (default: FIXTURES_DIR/{PINS_NAME})")
    hash_cmd.add_argument("--replay", type=Path,
                          help="a recordings file inside FIXTURES_DIR to leave out, as run --replay does")

    history = sub.add_parser("history", help="the pins file's history from git: pass rates, yield, time and size per "
                             "change, as history.json and history.md", description=HISTORY_DESCRIPTION,
                             epilog=HISTORY_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    history.add_argument("fixtures", metavar="FIXTURES_DIR", type=Path,
                         help="the fixtures directory, inside a git repository")
    history.add_argument("--pins", type=Path, help=f"pins file (default: FIXTURES_DIR/{PINS_NAME})")
    history.add_argument("--ref", default="HEAD",
                         help="the branch, tag or commit whose history is read (default: HEAD, the current branch)")
    history.add_argument("--last", type=_count_arg, default=30, metavar="N",
                         help="how many changes of the pins, the most recent (default: %(default)s)")
    history.add_argument("--out", type=Path, default=Path("envelope-ci-out"), metavar="DIR",
                         help="where history.json and history.md go (default: %(default)s)")

    schema = sub.add_parser("schema", help="print the JSON Schema of a fixture file (for editors) or of report.json",
                            description="Print the JSON Schema of a whole fixture file: one case, a list of cases, "
                            "{cases: [...]} or {defaults: {...}, cases: [...]} (the default; point your editor's "
                            "YAML/JSON language server at it to get completion and typo checks while writing cases); "
                            "with 'case' the schema of one case, which every case is validated against; with "
                            "'report' the schema of report.json, for tools that read it; with 'history' the schema "
                            "of history.json (envelope-ci history).")
    schema.add_argument("which", nargs="?", choices=SCHEMAS, default=SCHEMAS[0],
                        help="file (default): a fixture file; case: one case; report: report.json; "
                        "history: history.json")

    init = sub.add_parser("init",
                          help="start a fixtures directory: example cases that pass offline, settings, a workflow",
                          description=INIT_DESCRIPTION, epilog=INIT_EPILOG,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    init.add_argument("directory", metavar="DIR", nargs="?", type=Path, default=Path("evals"),
                      help="the fixtures directory to create (default: %(default)s)")
    init.add_argument("--no-workflow", action="store_true",
                      help="do not write .github/workflows/envelope-ci.yml (you have one already)")

    imp = sub.add_parser("import",
                         help="write a live run's recordings (run --record) into the fixtures, for offline runs",
                         description=IMPORT_DESCRIPTION, epilog=IMPORT_EPILOG,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    imp.add_argument("recordings", metavar="FILE", type=Path,
                     help="a JSONL file written by run --record (outside the fixtures directory), or a promptfoo "
                     "config (promptfooconfig.yaml, .yml or .json) to convert into fixtures")
    imp.add_argument("--into", metavar="FIXTURES_DIR", type=Path, required=True,
                     help="the fixtures directory whose cases get the envelopes, or that a promptfoo config's cases, "
                     "envelope-ci.yaml and IMPORT.md are written into")
    imp.add_argument("--dry-run", action="store_true",
                     help="promptfoo config: print what would not be converted, and write nothing")
    imp.add_argument("--force", action="store_true",
                     help="promptfoo config: overwrite files that exist already (else nothing is written)")
    return parser


def _endpoint_arg(text: str) -> tuple[str, str]:
    try:
        return parse_override(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _key_env_arg(text: str) -> str:
    try:
        return parse_key_env(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _shard_arg(text: str) -> ShardSpec:
    try:
        return parse_shard(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _count_arg(text: str) -> int:
    """A whole number from 1 to 999999: ``--last 0`` would ask git for no history at all."""
    if not re.fullmatch(r"[1-9][0-9]{0,5}", text):
        raise argparse.ArgumentTypeError(f"expected a whole number from 1 to 999999, got {text!r}")
    return int(text)


def config_from_args(args: argparse.Namespace) -> RunConfig:
    """The run's configuration from flags and the environment (checked by ``api.run``)."""
    return RunConfig(
        fixtures_dir=args.fixtures,
        pins_path=args.pins or args.fixtures / PINS_NAME,
        out_dir=args.out,
        lane=Lane(args.lane),
        endpoint_class=args.endpoint_class,
        temperature=args.temperature,
        base_url=args.base_url,
        model=args.model,
        api_key=os.environ.get("EVAL_API_KEY") or None,
        concurrency=args.concurrency,
        repeats=args.repeats,
        stream=args.stream,
        provider=args.provider,
        timeout_s=args.timeout,
        max_run_time_s=args.max_run_time,
        retry=RetryPolicy(max_attempts=args.max_attempts, run_budget=args.retry_budget,
                          max_retry_after_s=args.max_retry_after, max_rate_limit_wait_s=args.max_rate_limit_wait),
        record=args.record,
        replay=args.replay,
        config_path=args.config,
        write_pins=args.write_pins,
        move_baseline=args.move_baseline,
        in_ci=truthy(os.environ.get("CI")) or truthy(os.environ.get("GITHUB_ACTIONS")),
        quiet=args.quiet,
        formats=tuple(args.formats),
        filters=tuple(args.filters),
        shard=args.shard,
        endpoint_urls=tuple(args.endpoint_urls),
        allow_key_env=tuple(args.allow_key_env),
        allow_unverified_recordings=args.allow_unverified_recordings,
    )


def cmd_run(args: argparse.Namespace) -> int:
    from .api import read_base_pins
    from .supervise import RanOutOfTime, run

    config = config_from_args(args)
    try:
        with collector_paused(not config.base_url):
            result = run(config, read_base_pins(args.base_pins) if args.base_pins else None)
    except RanOutOfTime as exc:
        print(one_line(f"envelope-ci: {exc}"), file=sys.stderr)
        return int(ExitCode.INCONCLUSIVE)
    _print_result(result, config.quiet)
    if result.pins_written:
        print(f"wrote pins: {result.pins_written.as_posix()} — review the diff and commit it with the fixtures")
    return int(result.exit_code)


def cmd_merge(args: argparse.Namespace) -> int:
    from .merging import merge

    with collector_paused(True):
        result = merge(args.reports, args.out, tuple(args.formats))
    _print_result(result, args.quiet)
    return int(result.exit_code)


@contextmanager
def collector_paused(wanted: bool) -> Iterator[None]:
    """The cyclic garbage collector off while an offline run or a merge is made (``wanted``), the one speed measure
    kept.

    Why: their records are trees that reference counting frees, and the collector re-walking them is
    the largest single cost of a big run (measured in bench/README.md, "The collector"). A live run
    keeps it: its transport's errors make cycles.
    """
    was_enabled = gc.isenabled()
    if wanted:
        gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _print_result(result: RunResult, quiet: bool) -> None:
    from .formats.console import render_console

    if quiet:
        print(f"envelope-ci: {result.report.verdict.value}")
    else:
        print(render_console(result.report, [p.as_posix() for p in result.written]))


def cmd_hash(args: argparse.Namespace) -> int:
    from .sources.cases import load_cases
    from .sources.files import hash_of_digests, suite_digests

    excluded = {(args.pins or args.fixtures / PINS_NAME).resolve()}
    if args.replay:
        excluded.add(args.replay.resolve())
    cases = load_cases(args.fixtures, excluded)  # a hash of a broken suite is no use: validate first
    print(hash_of_digests(suite_digests(args.fixtures, excluded, cases)))
    return int(ExitCode.PASS)


def cmd_init(args: argparse.Namespace) -> int:
    from .scaffold import plan, write

    scaffold = plan(args.directory, not args.no_workflow, Path())
    write(scaffold)
    print(f"wrote {len(scaffold.files)} files:")
    for path in scaffold.files:
        print(f"  {path.as_posix()}")
    print("next:")
    for command, why in scaffold.next_commands:
        print(f"  # {why}\n  {command}")
    return int(ExitCode.PASS)


def cmd_import(args: argparse.Namespace) -> int:
    from .sources.importer import import_recordings
    from .sources.promptfoo import looks_like_promptfoo

    if looks_like_promptfoo(args.recordings):
        return _import_promptfoo(args)
    if args.dry_run or args.force:
        raise UsageError("--dry-run and --force are for a promptfoo config; recordings are checked whole before "
                         "anything is written")
    done = import_recordings(args.recordings, args.into)
    cases = sum(n for _, n in done.sidecars)
    print(f"imported {done.envelopes} envelope(s) for {cases} case(s) from {args.recordings.as_posix()}:")
    for sidecar, count in done.sidecars:
        print(f"  {sidecar.as_posix()}  ({count} case(s))")
    if done.undelivered:
        print(f"warning: {len(done.undelivered)} case(s) were recorded without a gradeable answer (drop or empty): "
              f"{', '.join(done.undelivered[:10])}; offline runs stay inconclusive until they are recorded again")
    into = shlex.quote(args.into.as_posix())
    print(f"next: the recorded answers are fixtures now; review them, then re-pin and commit\n"
          f"  envelope-ci run {into}\n  envelope-ci run {into} --lane adjudication --write-pins")
    return int(ExitCode.PASS)


def _import_promptfoo(args: argparse.Namespace) -> int:
    """Convert a promptfoo config: with --dry-run, print only what would not be converted."""
    from .sources.promptfoo import plan, write

    done, files = plan(args.recordings, args.into)
    if args.dry_run:
        print(f"not converted ({len(done.skipped)}):")
        for item in done.skipped:
            print(f"  {one_line(item.line())}")
        return int(ExitCode.PASS)
    write(files, args.force)
    print(f"converted {done.cases} case(s) from {args.recordings.as_posix()}; wrote {len(files)} files:")
    for path in files:
        print(f"  {path.as_posix()}")
    print(f"{len(done.skipped)} item(s) not converted: listed with why in "
          f"{(args.into / 'IMPORT.md').as_posix()}, with the commands to run the suite")
    return int(ExitCode.PASS)


def cmd_history(args: argparse.Namespace) -> int:
    from .pins_history import load_history, write_history

    history = load_history(args.fixtures, args.pins or args.fixtures / PINS_NAME, args.ref, args.last)
    written = write_history(history, args.out)
    print(one_line(f"envelope-ci history: {len(history.points)} change(s) of {history.pins} on {args.ref}"))
    for note in history.notes:
        print(one_line(f"note: {note}"))
    for path in written:
        print(f"wrote {path.as_posix()}")
    return int(ExitCode.PASS)


def cmd_schema(args: argparse.Namespace) -> int:
    if args.which == "report":
        from .report.model import report_schema

        print(json.dumps(report_schema(), indent=2))
    elif args.which == "history":
        from .report.history_model import history_schema

        print(json.dumps(history_schema(), indent=2))
    else:
        from .sources.cases import case_schema, fixture_schema

        print(json.dumps(fixture_schema() if args.which == "file" else case_schema(), indent=2))
    return int(ExitCode.PASS)


def console() -> NoReturn:
    """The ``envelope-ci`` command (and ``python -m envelope_ci``): ``main``, then exit with its code."""
    sys.exit(main())


def main(argv: Sequence[str] | None = None) -> int:
    """The command line in-process (``console`` is the console script's entry); returns the exit code.

    The signal handlers go in first, before argument parsing and the heavy imports: a SIGTERM
    then (a cancelled CI job) stops the run politely, with reports, instead of killing it.
    """
    STOP.clear()  # one process may run several commands (tests, the Action)
    with Interrupts(STOP):
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on bad usage already; keep its code
        return int(exc.code) if isinstance(exc.code, int) else int(ExitCode.USAGE)
    handlers = {"run": cmd_run, "merge": cmd_merge, "hash": cmd_hash, "schema": cmd_schema, "init": cmd_init,
                "import": cmd_import, "history": cmd_history}
    try:
        return handlers[args.command](args)
    except UsageError as exc:
        for problem in exc.problems:
            print(f"error: {problem}", file=sys.stderr)
        return int(ExitCode.USAGE)
    except BrokenPipeError:  # `envelope-ci schema | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # and the exit-time flush must not fail either
        return int(ExitCode.PASS)
    except OSError as exc:  # an unwritable --out, a --pins that is a directory, ...
        where = f"{exc.filename}: " if exc.filename else ""
        print(one_line(f"error: {where}{exc.strerror or exc}"), file=sys.stderr)
        return int(ExitCode.USAGE)
    except KeyboardInterrupt:  # a second Ctrl-C: leave at once
        print("envelope-ci: interrupted", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    except Exception as exc:  # a bug of ours must not exit 1, which CI reads as a regression
        print(one_line(f"error: internal error in envelope-ci (please report it): {type(exc).__name__}: {exc}"),
              file=sys.stderr)
        return int(ExitCode.USAGE)
