"""Recordings prove what they answer: an offline gate never grades an answer to an older prompt."""
from __future__ import annotations

import json

import pytest

from envelope_ci.sources.cases import load_cases
from envelope_ci.sources.requests import request_record
from tests.support.suites import chat_body, make_suite, recorded, run_cli, run_report, write_pins, write_replay

pytestmark = pytest.mark.usefixtures("clean_env")

MODEL = "gpt-4o-mini"


def stamped(suite, case_id, body=None, temperature=0.0):
    """A recorded envelope for the case as it is now, carrying its request record (as --record writes it)."""
    case = next(c for c in load_cases(suite, set()) if c.id == case_id)
    env = recorded(body or chat_body("Your refund is on its way.", model=f"{MODEL}-2024-07-18"))
    env["request"] = request_record(case, MODEL, temperature)
    return env


def suite_with(tmp_path, **case_fields):
    """A repository with a prompt file, one templated case, its recording stamped, and pins."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "support.md").write_text("You are Parcel. Answer in {{ language }}.\n", "utf-8")
    fields = {"id": "refund", "system_file": "/prompts/support.md", "prompt": "Where is my refund for {{ order }}?",
              "vars": {"language": "English", "order": "NW-1"}, "must_include": ["refund"], **case_fields}
    suite = make_suite(tmp_path, [fields], name="evals")
    data = [dict(fields, recorded=stamped(suite, "refund"))]
    (suite / "cases.yaml").write_text(json.dumps(data), "utf-8")
    assert write_pins(suite, tmp_path / "pins-out").code == 0
    return suite


def edit_case(suite, **changes):
    data = json.loads((suite / "cases.yaml").read_text("utf-8"))
    data[0].update(changes)
    (suite / "cases.yaml").write_text(json.dumps(data), "utf-8")


def stale_message(report):
    return next(a["message"] for a in report["alert_details"] if a["code"] == "stale_recording")


def test_a_recording_of_the_current_request_passes(tmp_path):
    suite = suite_with(tmp_path)
    result, report = run_report(suite, tmp_path / "out")
    assert result.code == 0 and report["alerts"] == [] and not any("re-record" in n for n in report["notes"])


@pytest.mark.parametrize(("change", "words"), [
    (lambda s, t: edit_case(s, prompt="Where is my money for {{ order }}?"), "messages[1].content"),
    (lambda s, t: (t / "prompts" / "support.md").write_text("You are Parcel, be terse. Answer in {{ language }}.\n", "utf-8"),
     "system: /prompts/support.md changed"),
    (lambda s, t: edit_case(s, vars={"language": "French", "order": "NW-1"}), "system: /prompts/support.md changed"),
    (lambda s, t: edit_case(s, vars={"language": "English", "order": "NW-2"}), "messages[1].content"),
    (lambda s, t: edit_case(s, tools=[{"type": "function", "function": {"name": "lookup_order"}}]), "tools added"),
    (lambda s, t: edit_case(s, temperature=0.7), "temperature 0.0 → 0.7"),
    (lambda s, t: edit_case(s, max_tokens=64), "max_tokens added"),
], ids=["prompt", "system-prompt-file", "variable-in-file", "variable-in-prompt", "tools", "temperature", "max_tokens"])
def test_a_changed_request_makes_the_recording_stale(tmp_path, change, words):
    suite = suite_with(tmp_path)
    change(suite, tmp_path)
    result, report = run_report(suite, tmp_path / "out")
    assert result.code == 1 and "stale_recording" in report["alerts"]
    message = stale_message(report)
    assert message.startswith("1 case(s) are graded on answers recorded for another request") and f"refund: {words}" in message, message
    step = next(step for step in report["next_steps"] if "re-record" in step["why"])
    assert "--filter refund --record rerecorded.jsonl" in step["command"]
    assert any((s["command"] or "").startswith("envelope-ci import rerecorded.jsonl --into") for s in report["next_steps"])


def test_re_recording_clears_it(tmp_path):
    suite = suite_with(tmp_path)
    edit_case(suite, prompt="Where is my money for {{ order }}?")
    assert run_report(suite, tmp_path / "out")[1]["alerts"].count("stale_recording") == 1
    edit_case(suite, recorded=stamped(suite, "refund"))
    result, report = run_report(suite, tmp_path / "out2")
    assert "stale_recording" not in report["alerts"] and report["alerts"] == ["fixtures_changed"]


def test_a_legacy_recording_is_a_note_or_strictly_an_alert(tmp_path):
    suite = make_suite(tmp_path, [{"id": "old", "prompt": "p", "must_include": ["x"], "recorded": recorded(chat_body("x"))}])
    result, report = run_report(suite, tmp_path / "out")
    assert result.code == 0 and any("do not say what request they answered" in n and "old" in n for n in report["notes"])
    (suite / "envelope-ci.yaml").write_text("recordings: strict\n", "utf-8")
    result, report = run_report(suite, tmp_path / "out2")
    assert result.code == 1 and "unverified_recording" in report["alerts"]


def test_adjudication_refuses_to_pin_a_stale_recording(tmp_path):
    suite = suite_with(tmp_path)
    pins = (suite / "envelope-pins.json").read_text("utf-8")
    edit_case(suite, prompt="Where is my money for {{ order }}?")
    result = write_pins(suite, tmp_path / "out")
    assert result.code == 2 and "refusing to write pins" in result.err and "refund: messages[1].content" in result.err
    assert (suite / "envelope-pins.json").read_text("utf-8") == pins


def test_a_replay_made_for_an_older_prompt_is_refused_the_same_way(tmp_path):
    suite = suite_with(tmp_path)
    replay = write_replay(tmp_path / "r.jsonl", [("refund", stamped(suite, "refund"))])
    (tmp_path / "prompts" / "support.md").write_text("New system prompt in {{ language }}.\n", "utf-8")
    result, report = run_report(suite, tmp_path / "out", "--replay", replay)
    assert "stale_recording" in report["alerts"] and "system: /prompts/support.md changed" in stale_message(report)
    assert run_cli(["run", suite, "--out", tmp_path / "o2", "--replay", replay, "--lane", "adjudication", "--write-pins"]).code == 2


def test_the_bundled_examples_carry_request_records(tmp_path):
    from tests.support.suites import EXAMPLES

    for name in ("support-bot", "booking-agent"):
        result, report = run_report(EXAMPLES / name, tmp_path / name)
        assert result.code == 0, name
        assert not [n for n in report["notes"] if "do not say what request" in n], name


def test_record_writes_request_records_and_import_keeps_them(tmp_path):
    from tests.support.fake_openai import Behaviour, FakeOpenAI

    suite = make_suite(tmp_path, [{"id": "greet", "prompt": "[[greet]] say hello", "expect_fragment": "Hello"}], name="evals")
    rec = tmp_path / "run.jsonl"
    with FakeOpenAI() as srv:
        srv.plant("greet", Behaviour.ok("Hello! How can I help?"))
        live, _ = run_report(suite, tmp_path / "live", "--base-url", srv.url, "--model", MODEL, "--record", rec)
    assert live.code in (0, 1), live.err
    (line,) = [json.loads(x) for x in rec.read_text("utf-8").splitlines()]
    assert line["recorded"]["request"]["digest"].startswith("sha256:") and line["recorded"]["request"]["parts"]["model"] == MODEL
    assert run_cli(["import", rec, "--into", suite]).code == 0
    _, offline = run_report(suite, tmp_path / "offline")
    assert "stale_recording" not in offline["alerts"] and not [n for n in offline["notes"] if "do not say what request" in n]
    data = (suite / "cases.yaml").read_text("utf-8").replace("say hello", "say hi")
    (suite / "cases.yaml").write_text(data, "utf-8")
    _, edited = run_report(suite, tmp_path / "edited")
    assert "stale_recording" in edited["alerts"] and "greet: messages[0].content" in stale_message(edited)
