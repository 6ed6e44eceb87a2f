"""Every command a red or inconclusive run prints as a next step is one the tool accepts, and does what its step says.

Each test makes a scenario on disk, reads the next steps of its report.json, and runs every
command in the order printed as ``python -m envelope_ci`` (a live step against the fake
server, ``$EVAL_BASE_URL`` and ``$EVAL_MODEL`` standing for it). None may be refused (exit 2);
after the last one the suite passes again.
"""
from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.fake_openai import Behaviour, FakeOpenAI
from tests.support.suites import (
    MODEL,
    OTHER_MODEL,
    WRONG_JSON,
    CliResult,
    answer_envelope,
    case,
    chat_body,
    make_suite,
    pinned_gate_suite,
    recorded,
    run_cli,
    run_module,
    write_replay,
)

pytestmark = pytest.mark.usefixtures("clean_env")

RIGHT = "Your refund is on its way."
RUBRIC = "Says the refund is on its way [[judge-yes]]"
# Two cases right and one wrong, all stretch: the stratum's rate (2/3) is far from every bar, so the only
# failures are the ones a test makes.
CASES = (case("a", prompt="Where is my refund? [[k-a]]", must_include=["refund"], stratum="stretch"),
         case("b", prompt="Is my refund coming? [[k-b]]", must_include=["refund"], stratum="stretch"),
         case("w", prompt="Say hello. [[k-w]]", must_include=["refund"], stratum="stretch"))


def answering(srv: FakeOpenAI, model: str = MODEL, **answers: str) -> None:
    """The model's answers by case (the right one unless given), and the judge's yes."""
    for cid in ("a", "b", "w"):
        srv.plant(f"k-{cid}", Behaviour.ok(answers.get(cid, RIGHT if cid != "w" else "Hello!"), model=model))
    srv.plant("judge-yes", Behaviour.ok(json.dumps({"pass": True, "reason": "says so"}), model="judge-model-9"))


def record(srv: FakeOpenAI, suite: Path, tmp_path: Path, *filters: str) -> None:
    """What a team does to make recorded fixtures: a live run with --record, then import."""
    recording = tmp_path / "setup.jsonl"
    selected = [w for f in filters for w in ("--filter", f)]
    done = run_cli(["run", suite, "--base-url", srv.url, "--model", "gpt-4o-mini", *selected, "--record", recording,
                    "--out", tmp_path / "setup-out"])
    assert done.code != 2, done.err
    imported = run_cli(["import", recording, "--into", suite])
    assert imported.code == 0, imported.err


def recorded_suite(srv: FakeOpenAI, tmp_path: Path, cases: Any = CASES, config: Any = None) -> Path:
    """A suite whose answers were recorded live and imported (request records and all), then pinned."""
    answering(srv)
    suite = make_suite(tmp_path, cases, config=config)
    record(srv, suite, tmp_path)
    pinned = run_cli(["run", suite, "--out", tmp_path / "pin-out", "--lane", "adjudication", "--write-pins"])
    assert pinned.code == 0, pinned.err + pinned.out
    return suite


def run_and_report(suite: Path, out: Path, *args: str | Path) -> tuple[CliResult, dict[str, Any]]:
    done = run_cli(["run", suite, "--out", out, *args])
    return done, json.loads((out / "report.json").read_text("utf-8"))


def commands(report: dict[str, Any]) -> list[str]:
    return [step["command"] for step in report["next_steps"] if step["command"]]


def take(command: str, srv: FakeOpenAI | None, cwd: Path) -> CliResult:
    """One printed command, as a shell would run it: ``$EVAL_BASE_URL`` is the fake server, ``$EVAL_MODEL`` a model."""
    words = shlex.split(command)
    assert words[0] == "envelope-ci", command
    live = {"$EVAL_BASE_URL": srv.url if srv else "", "$EVAL_MODEL": "gpt-4o-mini"}
    assert srv is not None or not any(w in live for w in words), f"a live step where none was expected: {command}"
    cwd.mkdir(exist_ok=True)
    return run_module([live.get(w, w) for w in words[1:]], cwd=cwd)


def take_all(report: dict[str, Any], srv: FakeOpenAI | None, cwd: Path) -> list[CliResult]:
    """Every printed command in order: each accepted (never exit 2)."""
    done = []
    for command in commands(report):
        result = take(command, srv, cwd)
        assert result.code != 2, f"refused: {command}\n{result.err}"
        done.append(result)
    return done


def last_report(cwd: Path) -> dict[str, Any]:
    """The report a printed command wrote (they keep the default --out)."""
    return json.loads((cwd / "envelope-ci-out" / "report.json").read_text("utf-8"))


def passes(suite: Path, out: Path, *args: str | Path) -> None:
    done, report = run_and_report(suite, out, *args)
    assert done.code == 0, (report["alerts"], report["blockers"], report["next_steps"])


def test_a_prompt_edit_re_records_the_changed_case_imports_it_then_re_pins(srv: FakeOpenAI, tmp_path: Path) -> None:
    suite = recorded_suite(srv, tmp_path)
    cases = suite / "cases.yaml"
    cases.write_text(cases.read_text("utf-8").replace("Where is my refund?", "Where is my money?"), "utf-8")
    done, report = run_and_report(suite, tmp_path / "out")
    assert done.code == 1 and set(report["alerts"]) == {"fixtures_changed", "stale_recording"}
    rerecord, imports, repin = commands(report)
    assert '--base-url "$EVAL_BASE_URL"' in rerecord and "--filter a --record rerecorded.jsonl" in rerecord
    assert imports == f"envelope-ci import rerecorded.jsonl --into {suite.as_posix()}"
    assert repin.endswith("--lane adjudication --write-pins") and "--allow-unverified" not in repin
    pins = (suite / "envelope-pins.json").read_text("utf-8")
    work = tmp_path / "work"
    take_all(report, srv, work)
    assert [json.loads(line)["id"] for line in (work / "rerecorded.jsonl").read_text("utf-8").splitlines()] == ["a"]
    assert (suite / "envelope-pins.json").read_text("utf-8") != pins
    passes(suite, tmp_path / "after")


@pytest.mark.parametrize("mode", ["imported", "live"])
def test_a_model_change_is_re_pinned_with_move_baseline(srv: FakeOpenAI, tmp_path: Path, mode: str) -> None:
    suite = recorded_suite(srv, tmp_path)
    answering(srv, model=OTHER_MODEL)
    if mode == "imported":  # the team re-recorded the suite on the new model
        record(srv, suite, tmp_path)
        done, report = run_and_report(suite, tmp_path / "out")
        assert set(report["alerts"]) == {"fixtures_changed", "fingerprint_changed"}
    else:
        done, report = run_and_report(suite, tmp_path / "out", "--base-url", srv.url, "--model", "gpt-4.1-nano")
        assert report["alerts"] == ["fingerprint_changed"]
    assert done.code == 1
    (repin,) = commands(report)
    assert "--move-baseline" in repin and ("--model gpt-4.1-nano" in repin) == (mode == "live")
    work = tmp_path / "work"
    # Without the flag the re-pin would be refused: this run is another experiment than the pins.
    refused = take(repin.replace(" --move-baseline", ""), srv, work)
    assert refused.code == 2 and "--move-baseline" in refused.err
    take_all(report, srv, work)
    assert json.loads((suite / "envelope-pins.json").read_text("utf-8"))["fingerprint"]["model_id"] == OTHER_MODEL
    passes(suite, tmp_path / "after", *(("--base-url", srv.url, "--model", "gpt-4.1-nano") if mode == "live" else ()))


def test_an_edited_rubric_is_re_recorded_live_not_blamed_on_the_network(srv: FakeOpenAI, tmp_path: Path) -> None:
    rubric = [{"type": "llm-rubric", "value": RUBRIC, "endpoint": "judge"}]
    judged = [{**{k: v for k, v in CASES[0].items() if k != "must_include"}, "assert": rubric}, *CASES[1:]]
    suite = recorded_suite(srv, tmp_path, judged, config={"endpoints": {"judge": {"base_url": srv.url,
                                                                                  "model": "gpt-judge"}}})
    cases = suite / "cases.yaml"
    cases.write_text(cases.read_text("utf-8").replace("Says the refund", "Says that the refund"), "utf-8")
    done, report = run_and_report(suite, tmp_path / "out")
    assert done.code == 1 and report["undelivered"] == ["a"] and report["alerts"] == ["fixtures_changed"]
    assert not any("check the endpoint" in step["why"] for step in report["next_steps"])
    rerecord, _, repin = commands(report)
    assert "--move-baseline" not in repin  # the re-recorded verdict comes from the same judge
    assert '--base-url "$EVAL_BASE_URL"' in rerecord and "--filter a " in rerecord and "--write-pins" in repin
    take_all(report, srv, tmp_path / "work")
    passes(suite, tmp_path / "after")


@pytest.mark.parametrize("then", ["fix", "accept"])
def test_a_regression_with_a_fixture_change_is_never_accepted_silently(srv: FakeOpenAI, tmp_path: Path,
                                                                        then: str) -> None:
    suite = recorded_suite(srv, tmp_path)
    cases = suite / "cases.yaml"
    cases.write_text(cases.read_text("utf-8").replace("id: a\n", "id: a\n  description: the refund case\n"), "utf-8")
    answering(srv, b="No idea.")
    record(srv, suite, tmp_path, "b")
    done, report = run_and_report(suite, tmp_path / "out")
    assert done.code == 1 and report["regressions"] == ["b"] and "fixtures_changed" in report["alerts"]
    fix, repin = report["next_steps"]
    assert fix["command"] != repin["command"]
    assert "--write-pins" not in fix["command"] and "fix" in fix["why"]
    assert "also accepts the 1 regressed case(s) (b)" in repin["why"] and "fix them first" in repin["why"]
    work = tmp_path / "work"
    assert take(fix["command"], None, work).code == 1  # not fixed yet: the same regression
    if then == "fix":
        answering(srv)
        record(srv, suite, tmp_path, "b")
        again = take(fix["command"], None, work)
        assert again.code == 1 and last_report(work)["regressions"] == []  # only the fixtures changed now
    assert take(repin["command"], None, work).code == 0
    accepted = last_report(work)["pins_update"]["accepted_regressions"]
    assert accepted == ([] if then == "fix" else ["b"])
    passes(suite, tmp_path / "after")


def test_an_unanswered_live_case_is_run_again_with_the_same_flags(srv: FakeOpenAI, tmp_path: Path,
                                                                  clean_env: pytest.MonkeyPatch) -> None:
    """The settings send a header from a variable: every live step needs it allowed again (--allow-key-env)."""
    clean_env.setenv("TEAM_TOKEN", "team-token-1")
    answering(srv)
    suite = make_suite(tmp_path, CASES, config={"headers": {"x-team": "${TEAM_TOKEN}"}})
    live = ["--base-url", srv.url, "--model", "gpt-4o-mini", "--allow-key-env", "TEAM_TOKEN"]
    pinned, _ = run_and_report(suite, tmp_path / "pin-out", *live, "--lane", "adjudication", "--write-pins")
    assert pinned.code == 0, pinned.err
    srv.plant("k-b", Behaviour.bad_request_context_length())
    done, report = run_and_report(suite, tmp_path / "out", *live)
    assert done.code == 3 and report["undelivered"] == ["b"]
    (step,) = report["next_steps"]
    assert "check the endpoint and the network" in step["why"] and "--allow-key-env TEAM_TOKEN" in step["command"]
    answering(srv)  # the endpoint is back
    (rerun,) = take_all(report, srv, tmp_path / "work")
    assert rerun.code == 0


def test_an_undelivered_recording_is_re_recorded_not_run_again_offline(srv: FakeOpenAI, tmp_path: Path) -> None:
    answering(srv)
    srv.plant("k-b", Behaviour.bad_request_context_length())
    suite = make_suite(tmp_path, CASES)
    record(srv, suite, tmp_path)  # b was recorded as a 400: no pins can be written from it
    done, report = run_and_report(suite, tmp_path / "out")
    assert done.code == 3 and report["undelivered"] == ["b"]
    assert not any("check the endpoint" in step["why"] for step in report["next_steps"])
    rerecord, _, rerun = commands(report)
    assert "--filter b --record" in rerecord and "--write-pins" not in rerun
    answering(srv)
    *_, last = take_all(report, srv, tmp_path / "work")
    assert last.code == 0


@pytest.mark.parametrize("then", ["fix", "accept"])
def test_a_plain_regression_says_fix_or_accept_and_the_accepting_re_pin_vouches(tmp_path: Path, then: str) -> None:
    """The gate suite's recordings are hand-written (no request record): a re-pin must vouch for them on purpose."""
    suite = pinned_gate_suite(tmp_path)
    replay = write_replay(tmp_path / "pr.jsonl", [("s-right", answer_envelope(WRONG_JSON))])
    done, report = run_and_report(suite, tmp_path / "out", "--replay", replay)
    assert done.code == 1 and report["regressions"] == ["s-right"]
    fix, accept = report["next_steps"]
    assert fix["command"] != accept["command"] and f"--replay {replay.as_posix()}" in fix["command"]
    assert "--allow-unverified-recordings --write-pins" in accept["command"] and "check those answers" in accept["why"]
    work = tmp_path / "work"
    if then == "fix":
        write_replay(replay, [("s-right", answer_envelope())])
        assert take(fix["command"], None, work).code == 0
        return
    assert take(accept["command"], None, work).code == 0
    assert last_report(work)["pins_update"]["accepted_regressions"] == ["s-right"]
    assert take(fix["command"], None, work).code == 0


def test_a_stale_replay_is_recorded_afresh_and_replayed(srv: FakeOpenAI, tmp_path: Path) -> None:
    suite = recorded_suite(srv, tmp_path)
    replay = tmp_path / "pr.jsonl"
    made = run_cli(["run", suite, "--base-url", srv.url, "--model", "gpt-4o-mini", "--record", replay,
                    "--out", tmp_path / "pr-out"])
    assert made.code == 0, made.err
    cases = suite / "cases.yaml"
    cases.write_text(cases.read_text("utf-8").replace("Is my refund coming?", "Is my refund coming soon?"), "utf-8")
    done, report = run_and_report(suite, tmp_path / "out", "--replay", replay)
    assert done.code == 1 and "stale_recording" in report["alerts"]
    rerecord, repin = commands(report)
    assert "--filter" not in rerecord and "--replay rerecorded.jsonl" in repin
    work = tmp_path / "work"
    take_all(report, srv, work)
    passes(suite, tmp_path / "after", "--replay", work / "rerecorded.jsonl")


def test_strict_unverified_answers_are_re_recorded_once_their_hand_written_ones_go(srv: FakeOpenAI,
                                                                                  tmp_path: Path) -> None:
    """Answers typed into the fixture file carry no request record: under ``recordings: strict`` they fail the run."""
    answering(srv)
    typed = [dict(c, recorded=recorded(chat_body(RIGHT if c["id"] != "w" else "Hello!"))) for c in CASES]
    suite = make_suite(tmp_path, typed, config={"recordings": "strict"})
    done, report = run_and_report(suite, tmp_path / "out")
    assert done.code == 1 and report["alerts"] == ["unverified_recording"]
    rerecord, imports, rerun = commands(report)
    assert "--filter a --filter b --filter w --record rerecorded.jsonl" in rerecord and "--write-pins" not in rerun
    assert "recorded: or completion:, needs that deleted first" in report["next_steps"][1]["why"]
    work = tmp_path / "work"
    assert take(rerecord, srv, work).code == 3  # a partial run: never a verdict
    refused = take(imports, srv, work)
    assert refused.code == 2 and "delete its 'recorded'" in refused.err  # what the step says to do first
    cases = suite / "cases.yaml"
    kept = [{k: v for k, v in c.items() if k != "recorded"} for c in yaml.safe_load(cases.read_text("utf-8"))]
    cases.write_text(yaml.safe_dump(kept, sort_keys=False), "utf-8")
    assert take(imports, srv, work).code == 0
    assert take(rerun, srv, work).code == 0
