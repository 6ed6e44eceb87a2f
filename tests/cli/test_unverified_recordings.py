"""Issue 27 item 5: deleting a recording's ``request`` is no way past the staleness check.

A recording without a request record cannot be pinned on an adjudication run (``--write-pins``)
unless the person re-pinning says so on the command line, ``--allow-unverified-recordings``; the
settings file is pull-request content and cannot grant it (``recordings: lenient`` does not). The
refusal comes before anything is written (exit 2) and names the cases (the first few) and the flag.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from envelope_ci.analysis.promotion import write_refusal
from envelope_ci.model import GRADER_VERSION, Fingerprint, Lane
from tests.support.suites import answer_case, make_suite, run_cli, write_replay

pytestmark = pytest.mark.usefixtures("clean_env")

FLAG = "--allow-unverified-recordings"


def adjudicate(suite: Path, out: Path, *args: str | Path) -> object:
    return run_cli(["run", suite, "--out", out, "--lane", "adjudication", "--write-pins", *args])


def init_suite(tmp_path: Path) -> Path:
    """``envelope-ci init``'s suite: its recordings carry request records (order-status-json, lookup-order-tool)."""
    suite = tmp_path / "evals"
    result = run_cli(["init", suite, "--no-workflow"])
    assert result.code == 0, result.err
    return suite


def drop_requests(path: Path) -> None:
    """What a pull request would do to get past the staleness check: delete the recordings' ``request:`` lines."""
    text = path.read_text("utf-8")
    stripped = re.sub(r"(?m)^[ ]*request: .*\n", "", text)
    assert stripped != text
    path.write_text(stripped, "utf-8")


def test_the_refusal_names_the_cases_and_the_flag() -> None:
    fp = Fingerprint(Lane.ADJUDICATION.value, "unspecified", "m", 0.0, GRADER_VERSION)
    why = write_refusal(Lane.ADJUDICATION, False, fp, None, False, [], (), None, [f"c{i}" for i in range(7)])
    assert why == ("refusing to write pins: 7 case(s) are graded on recordings without a request record, so nothing "
                   "shows they answer the request the case sends now (c0, c1, c2, c3, c4 ...); re-record them (run "
                   f"--record, then import), or, once you have checked their answers are real, pass {FLAG}")
    assert write_refusal(Lane.ADJUDICATION, False, fp, None, False, [], (), None, []) is None
    # The other reasons come first: CI never writes pins, whatever the flag.
    assert "in CI" in (write_refusal(Lane.ADJUDICATION, True, fp, None, False, [], (), None, ["c0"]) or "")


def test_recordings_with_request_records_pin_without_the_flag(tmp_path: Path) -> None:
    suite = init_suite(tmp_path)
    result = adjudicate(suite, tmp_path / "out")
    assert result.code == 0, result.err
    assert (suite / "envelope-pins.json").is_file()


def test_a_deleted_request_record_cannot_be_pinned(tmp_path: Path) -> None:
    """The bypass: change the prompt a recording answered, delete its request record, re-pin."""
    suite = init_suite(tmp_path)
    assert adjudicate(suite, tmp_path / "first").code == 0
    pins = (suite / "envelope-pins.json").read_bytes()
    prompt = suite / "prompts" / "support.md"
    prompt.write_text(prompt.read_text("utf-8") + "\nAlways promise next-day delivery.\n", "utf-8")
    stale = adjudicate(suite, tmp_path / "stale")
    assert stale.code == 2 and "lookup-order-tool: system: prompts/support.md changed" in stale.err
    drop_requests(suite / "tools.yaml")
    result = adjudicate(suite, tmp_path / "out")
    assert result.code == 2
    assert result.err_lines == [
        "error: refusing to write pins: 1 case(s) are graded on recordings without a request record, so nothing shows "
        "they answer the request the case sends now (lookup-order-tool); re-record them (run --record, then import), "
        f"or, once you have checked their answers are real, pass {FLAG}"]
    assert (suite / "envelope-pins.json").read_bytes() == pins  # refused before writing
    assert "wrote pins" not in result.out


@pytest.mark.parametrize("setting", ["recordings: lenient\n", "recordings: strict\n", ""])
def test_the_settings_file_cannot_allow_it(tmp_path: Path, setting: str) -> None:
    suite = init_suite(tmp_path)
    settings = suite / "envelope-ci.yaml"
    settings.write_text(settings.read_text("utf-8") + setting, "utf-8")
    drop_requests(suite / "order-status.yaml")
    result = adjudicate(suite, tmp_path / "out")
    assert result.code == 2 and "(order-status-json)" in result.err and FLAG in result.err
    assert not (suite / "envelope-pins.json").exists()
    # Nor can it grant the flag under a name of its own: an unknown setting is bad input.
    settings.write_text(settings.read_text("utf-8") + "allow_unverified_recordings: true\n", "utf-8")
    refused = adjudicate(suite, tmp_path / "out2")
    assert refused.code == 2 and "allow_unverified_recordings" in refused.err
    assert not (suite / "envelope-pins.json").exists()


def test_the_flag_lets_the_person_re_pinning_vouch_for_them(tmp_path: Path) -> None:
    suite = init_suite(tmp_path)
    drop_requests(suite / "tools.yaml")
    result = adjudicate(suite, tmp_path / "out", FLAG)
    assert result.code == 0, result.err
    assert (suite / "envelope-pins.json").is_file()
    # Pinned, the run passes; the report's note still names the unverified case.
    again = run_cli(["run", suite, "--out", tmp_path / "again"])
    assert again.code == 0 and "lookup-order-tool" in again.out


def test_hand_written_recordings_and_replays_are_unverified_too(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, [answer_case(f"case-{i}") for i in range(6)])
    result = adjudicate(suite, tmp_path / "out")
    assert result.code == 2
    assert "6 case(s) are graded on recordings without a request record" in result.err
    assert "(case-0, case-1, case-2, case-3, case-4 ...)" in result.err and FLAG in result.err
    assert not (suite / "envelope-pins.json").exists()
    replay = write_replay(tmp_path / "replay.jsonl", [("case-0", answer_case("case-0")["recorded"])])
    replayed = adjudicate(suite, tmp_path / "replayed", "--replay", replay)
    assert replayed.code == 2 and "case-0" in replayed.err and FLAG in replayed.err
    vouched = adjudicate(suite, tmp_path / "vouched", FLAG)  # (exit 1: six right stretch cases are stretch_too_easy)
    assert vouched.code != 2 and (suite / "envelope-pins.json").is_file() and "wrote pins" in vouched.out


def test_the_flag_only_goes_with_write_pins(tmp_path: Path) -> None:
    suite = init_suite(tmp_path)
    result = run_cli(["run", suite, "--out", tmp_path / "out", FLAG])
    assert result.code == 2 and f"{FLAG} only makes sense with --write-pins" in result.err
