"""The next steps' commands, piece by piece: what each selects, where it writes, which flags it carries.

That every printed command is accepted end to end is tests/report/test_next_steps_accepted.py.
"""
from __future__ import annotations

import shlex

import pytest
from msgspec.structs import replace

from envelope_ci.model import Thresholds
from envelope_ci.report.model import RunInfo
from envelope_ci.report.next_steps import import_command, pin_command, recording_path, rerecord_command, rerun_command
from envelope_ci.sources.select import filter_problem, select_cases
from tests.support.suites import make_case

RUN = RunInfo(mode="offline", lane="smoke", fixtures_dir="evals", pins="evals/envelope-pins.json", repeats=1,
              replay=None, model_requested=None, endpoint_class="unspecified", temperature=0.0,
              thresholds=Thresholds(), config_file=None)


@pytest.mark.parametrize("case_id", ["refund", "a*b", "what?", "[x]", "x]", "tag:billing", "stratum:easy", "id:7",
                                     "café-ü"])
def test_a_re_record_selects_exactly_the_case_it_names(case_id: str) -> None:
    words = shlex.split(rerecord_command(RUN, [case_id]))
    spec = words[words.index("--filter") + 1]
    assert filter_problem(spec) is None
    cases = [make_case(id=case_id), make_case(id=case_id + "x"), make_case(id="x" + case_id), make_case(id="ab")]
    assert [c.id for c in select_cases(cases, [spec])] == [case_id]


def test_a_plain_id_is_its_own_filter() -> None:
    assert "--filter refund --filter late-parcel --record rerecorded.jsonl" in rerecord_command(RUN, ["refund",
                                                                                                       "late-parcel"])


@pytest.mark.parametrize(("fixtures_dir", "written"), [
    ("evals", "rerecorded.jsonl"),
    ("./evals", "rerecorded.jsonl"),
    ("/srv/repo/evals", "rerecorded.jsonl"),
    (".", "../rerecorded.jsonl"),  # the working directory is the fixtures: --record would refuse to write in it
    ("..", "../../rerecorded.jsonl"),
    ("./", "../rerecorded.jsonl"),
])
def test_a_re_record_writes_outside_the_fixtures(fixtures_dir: str, written: str) -> None:
    run = replace(RUN, fixtures_dir=fixtures_dir)
    assert recording_path(run) == written
    assert rerecord_command(run, ["a"]).endswith(f"--record {written}")
    assert import_command(run) == f"envelope-ci import {written} --into {fixtures_dir}"


def test_live_steps_take_the_endpoint_from_the_environment_and_allow_the_same_variables() -> None:
    live = replace(RUN, mode="live", model_requested="gpt-x", allow_key_env=("JUDGE_API_KEY", "TEAM_TOKEN"))
    allowed = "--allow-key-env JUDGE_API_KEY --allow-key-env TEAM_TOKEN"
    for command in (pin_command(live), rerun_command(live), rerecord_command(live, ["a"])):
        assert f'--base-url "$EVAL_BASE_URL" --model gpt-x {allowed}' in command, command
    # An offline run's live step (the re-record) asks for the model from the environment too.
    assert '--base-url "$EVAL_BASE_URL" --model "$EVAL_MODEL" --filter a' in rerecord_command(RUN, ["a"])
    assert "$EVAL" not in pin_command(RUN) + rerun_command(RUN)


def test_the_re_pin_carries_every_flag_it_needs_and_ends_with_write_pins() -> None:
    replayed = replace(RUN, mode="replay", replay="recordings/pr.jsonl", temperature=0.7, repeats=3,
                       endpoint_class="azure", config_file="ci/strict.yaml")
    command = pin_command(replayed, move_baseline=True, vouch=True)
    assert command == ("envelope-ci run evals --pins evals/envelope-pins.json --config ci/strict.yaml "
                       "--endpoint-class azure --temperature 0.7 --replay recordings/pr.jsonl --repeats 3 "
                       "--lane adjudication --move-baseline --allow-unverified-recordings --write-pins")
    assert "--replay rerecorded.jsonl" in pin_command(replayed, replay="rerecorded.jsonl")
    # A re-record asks afresh: it replays nothing.
    assert "--replay" not in rerecord_command(replayed, None) and "--filter" not in rerecord_command(replayed, None)
