"""The llm-rubric judge, whose own transport failures make a case inconclusive, never wrong.

The model and the judge are both the fake server: the model's answer is planted on the case's
``[[KEY]]`` marker, the judge's JSON verdict on a marker in the rubric (the judge's prompt puts
the rubric first, so its marker wins).
"""
from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from envelope_ci.cli import main
from envelope_ci.model import Fingerprint
from tests.support.fake_openai import Behaviour, FakeOpenAI
from tests.support.suites import to_json

# CI=true must not leak in: an adjudication run here writes pins, which CI refuses.
pytestmark = pytest.mark.usefixtures("clean_env")

ANSWER = "Sorry about that! You can get a refund within 30 days."


def verdict(passed: bool, reason: str) -> Behaviour:
    return Behaviour.ok(json.dumps({"pass": passed, "reason": reason}), model="judge-model-9")


def suite(tmp: Path, rubric_key: str, judge_url: str = "http://127.0.0.1:9/v1", api_key_env: str | None = None, endpoint: str = "judge") -> Path:
    fixtures = tmp / "fixtures"
    fixtures.mkdir(parents=True, exist_ok=True)
    case = {"id": "refund", "prompt": "How do I get a refund? [[model-refund]]",
            "assert": [{"type": "llm-rubric", "value": f"Mentions the refund window and apologises once [[{rubric_key}]]", "endpoint": endpoint}]}
    (fixtures / "cases.json").write_text(json.dumps([case]), "utf-8")
    judge: dict[str, Any] = {"base_url": judge_url, "model": "gpt-judge", "temperature": 0}
    if api_key_env:
        judge["api_key_env"] = api_key_env
    (fixtures / "envelope-ci.yaml").write_text(json.dumps({"endpoints": {"judge": judge}}), "utf-8")
    return fixtures


def run(fixtures: Path, out: Path, *args: str) -> tuple[int, dict[str, Any] | None, str]:
    so, se = io.StringIO(), io.StringIO()
    with redirect_stdout(so), redirect_stderr(se):
        code = main(["run", str(fixtures), "--out", str(out), *args])
    path = out / "report.json"
    return code, json.loads(path.read_text("utf-8")) if path.is_file() else None, se.getvalue()


def only_case(report: dict[str, Any] | None) -> dict[str, Any]:
    assert report is not None
    (case,) = report["cases"]
    return case


@pytest.fixture
def srv(srv: FakeOpenAI) -> FakeOpenAI:
    """The shared fake server (tests/conftest.py), answering the model's question with ANSWER."""
    srv.plant("model-refund", Behaviour.ok(ANSWER))
    return srv


def live(srv: FakeOpenAI, fixtures: Path, out: Path, *args: str) -> tuple[int, dict[str, Any] | None, str]:
    return run(fixtures, out, "--base-url", srv.url, "--model", "m", "--endpoint", f"judge={srv.url}", *args)


def test_judge_pass_and_the_judge_sees_rubric_and_answer(srv: FakeOpenAI, tmp_path: Path) -> None:
    srv.plant("judge-yes", verdict(True, "apologises once, names 30 days"))
    code, report, err = live(srv, suite(tmp_path, "judge-yes"), tmp_path / "out")
    assert code == 0, err
    assert only_case(report)["label"] == "right"
    (asked,) = srv.requests("judge-yes")
    assert asked.body["response_format"] == {"type": "json_object"}
    assert asked.body["model"] == "gpt-judge" and asked.body["temperature"] == 0
    assert ANSWER in asked.body["messages"][-1]["content"]


def test_judge_fail_is_wrong_with_the_judges_reason(srv: FakeOpenAI, tmp_path: Path) -> None:
    srv.plant("judge-no", verdict(False, "apologises twice"))
    code, report, _ = live(srv, suite(tmp_path, "judge-no"), tmp_path / "out")
    case = only_case(report)
    assert code == 1 and case["label"] == "wrong"
    assert any("judge 'judge': apologises twice" in r for r in case["reasons"])


@pytest.mark.parametrize("behaviour", [
    [Behaviour.server_error(503)],  # a judge that never answers: retried, then a drop
    [Behaviour.ok("I think it passes.")],  # a judge that does not answer the asked JSON
    [Behaviour.empty_choices()],
])
def test_judge_without_a_verdict_is_inconclusive_never_wrong(srv: FakeOpenAI, tmp_path: Path, behaviour: list[Behaviour]) -> None:
    srv.plant("judge-down", behaviour)
    code, report, _ = live(srv, suite(tmp_path, "judge-down"), tmp_path / "out", "--max-attempts", "2")
    case = only_case(report)
    assert code == 3, case
    assert case["label"] in ("drop", "empty") and case["label"] != "wrong"
    assert any("judge 'judge'" in r for r in case["reasons"])


def test_judge_503_then_answer_is_retried(srv: FakeOpenAI, tmp_path: Path) -> None:
    srv.plant("judge-flaky", [Behaviour.server_error(503), verdict(True, "fine")])
    code, report, _ = live(srv, suite(tmp_path, "judge-flaky"), tmp_path / "out")
    assert code == 0 and only_case(report)["label"] == "right"
    assert srv.attempts("judge-flaky") == 2


def test_record_then_replay_never_calls_the_judge(srv: FakeOpenAI, tmp_path: Path) -> None:
    srv.plant("judge-rec", verdict(False, "no apology"))
    fixtures = suite(tmp_path, "judge-rec")
    recording = tmp_path / "run.jsonl"
    code, report, _ = live(srv, fixtures, tmp_path / "live", "--record", str(recording))
    assert code == 1
    line = json.loads(recording.read_text("utf-8"))
    (judged,) = line["recorded"]["judgements"].values()
    assert judged["request"]["parts"]["temperature"] == 0
    calls = len(srv.all_requests)
    code, replayed, _ = run(fixtures, tmp_path / "replay", "--replay", str(recording))
    assert len(srv.all_requests) == calls
    assert code == 1
    assert only_case(replayed)["label"] == "wrong" and only_case(replayed)["reasons"] == only_case(report)["reasons"]


def test_offline_without_a_recorded_verdict_is_undelivered(tmp_path: Path) -> None:
    fixtures = suite(tmp_path, "judge-x")
    data = json.loads((fixtures / "cases.json").read_text("utf-8"))
    data[0]["completion"] = ANSWER
    (fixtures / "cases.json").write_text(json.dumps(data), "utf-8")
    code, report, _ = run(fixtures, tmp_path / "out")
    case = only_case(report)
    assert code == 3 and case["label"] == "drop"
    assert any("no recorded judge verdict: record it on a live run" in r for r in case["reasons"])


def test_the_judge_is_part_of_the_fingerprint_and_the_pins(srv: FakeOpenAI, tmp_path: Path) -> None:
    srv.plant("judge-fp", verdict(True, "ok"))
    fixtures = suite(tmp_path, "judge-fp")
    code, _, err = live(srv, fixtures, tmp_path / "out", "--lane", "adjudication", "--write-pins")
    assert code == 0, err
    pins = json.loads((fixtures / "envelope-pins.json").read_text("utf-8"))
    assert pins["cases"]["refund"]["fingerprint"]["judge"] == "judge-model-9@0"
    # the run's own fingerprint names the judge that graded (docs/report.md); suites without one keep their bytes
    assert pins["fingerprint"]["judge"] == "judge-model-9@0"
    report = json.loads((tmp_path / "out" / "report.json").read_text("utf-8"))
    assert report["fingerprint"]["judge"] == "judge-model-9@0"


def test_another_judge_is_another_experiment() -> None:
    mine = Fingerprint("smoke", "x", "m", 0.0, "1", judge="big@0")
    pinned = Fingerprint("smoke", "x", "m", 0.0, "1", judge="small@0")
    assert mine.comparable_key() != pinned.comparable_key()
    assert mine.differences(pinned) == "judge small@0 → big@0"
    assert "judge" not in to_json(Fingerprint("smoke", "x", "m", 0.0, "1"))
    assert Fingerprint.from_dict(to_json(mine)) == mine


def test_unknown_endpoint_is_bad_input_offline_too(tmp_path: Path) -> None:
    fixtures = suite(tmp_path, "judge-x", endpoint="jduge")
    code, _, err = run(fixtures, tmp_path / "out")
    assert code == 2 and "llm-rubric endpoint 'jduge' is not defined under 'endpoints'" in err


def test_unknown_endpoint_override_is_bad_usage(tmp_path: Path) -> None:
    code, _, err = run(suite(tmp_path, "judge-x"), tmp_path / "out", "--endpoint", "other=http://127.0.0.1:1/v1")
    assert code == 2 and "no endpoint 'other'" in err


def test_endpoint_flag_needs_name_and_url(tmp_path: Path) -> None:
    code, _, err = run(suite(tmp_path, "judge-x"), tmp_path / "out", "--endpoint", "judge")
    assert code == 2 and "NAME=URL" in err


def test_missing_key_variable_fails_only_live(srv: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ENVCI_TEST_JUDGE_KEY", raising=False)
    fixtures = suite(tmp_path, "judge-k", api_key_env="ENVCI_TEST_JUDGE_KEY")
    code, _, err = live(srv, fixtures, tmp_path / "live", "--allow-key-env", "ENVCI_TEST_JUDGE_KEY")
    assert code == 2 and "$ENVCI_TEST_JUDGE_KEY is not set" in err
    assert not srv.all_requests  # found before any call
    code, _, err = run(fixtures, tmp_path / "offline")  # offline: no key needed (the case has no recording: exit 2 for that)
    assert "ENVCI_TEST_JUDGE_KEY" not in err


def test_key_is_sent_and_never_recorded(srv: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVCI_TEST_JUDGE_KEY", "sk-judge-secret-81f3")
    srv.plant("judge-key", Behaviour.ok('{"pass": false, "reason": "echoing sk-judge-secret-81f3"}'))
    recording = tmp_path / "run.jsonl"
    code, report, _ = live(srv, suite(tmp_path, "judge-key", api_key_env="ENVCI_TEST_JUDGE_KEY"), tmp_path / "out", "--record", str(recording),
                           "--allow-key-env", "ENVCI_TEST_JUDGE_KEY")
    assert srv.requests("judge-key")[0].headers["authorization"] == "Bearer sk-judge-secret-81f3"
    assert "sk-judge-secret-81f3" not in recording.read_text("utf-8")
    assert "sk-judge-secret-81f3" not in json.dumps(report)


def test_bad_endpoint_config_names_the_file(tmp_path: Path) -> None:
    fixtures = suite(tmp_path, "judge-x")
    (fixtures / "envelope-ci.yaml").write_text("endpoints:\n  judge: {base_url: http://x/v1, model: m, api_key: sk-inline}\n", "utf-8")
    code, _, err = run(fixtures, tmp_path / "out")
    assert code == 2 and "envelope-ci.yaml" in err and "api_key" in err


def test_endpoint_key_on_another_assertion_is_refused(tmp_path: Path) -> None:
    fixtures = suite(tmp_path, "judge-x")
    (fixtures / "cases.json").write_text(json.dumps([{"id": "a", "prompt": "p", "completion": "x",
                                                      "assert": [{"type": "contains", "value": "x", "endpoint": "judge"}]}]), "utf-8")
    code, _, err = run(fixtures, tmp_path / "out")
    assert code == 2 and "endpoint" in err


def test_imported_recording_grades_offline_without_the_judge(srv: FakeOpenAI, tmp_path: Path) -> None:
    srv.plant("judge-imp", verdict(True, "ok"))
    fixtures = suite(tmp_path, "judge-imp")
    recording = tmp_path / "run.jsonl"
    assert live(srv, fixtures, tmp_path / "live", "--record", str(recording))[0] == 0
    with redirect_stdout(io.StringIO()):
        assert main(["import", str(recording), "--into", str(fixtures)]) == 0
    calls = len(srv.all_requests)
    code, report, _ = run(fixtures, tmp_path / "offline")
    assert code == 0 and only_case(report)["label"] == "right" and len(srv.all_requests) == calls


def test_an_anthropic_judge_gets_its_key_as_x_api_key_at_its_own_host_only(srv: FakeOpenAI, tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A judge's ``provider:`` says how its key is sent, never where: the allowed origin, in that format's header."""
    from tests.support.fake_anthropic import FakeAnthropic

    monkeypatch.setenv("ENVCI_TEST_JUDGE_KEY", "sk-judge-anthropic-5c1d")
    fixtures = suite(tmp_path, "judge-anthropic", api_key_env="ENVCI_TEST_JUDGE_KEY")
    settings = json.loads((fixtures / "envelope-ci.yaml").read_text("utf-8"))
    settings["endpoints"]["judge"]["provider"] = "anthropic-messages"
    (fixtures / "envelope-ci.yaml").write_text(json.dumps(settings), "utf-8")
    with FakeAnthropic() as judge:
        judge.plant("judge-anthropic", verdict(True, "apologises once, names 30 days"))
        code, report, err = run(fixtures, tmp_path / "out", "--base-url", srv.url, "--model", "m", "--endpoint",
                                f"judge={judge.url}", "--allow-key-env", "ENVCI_TEST_JUDGE_KEY")
        (asked,) = judge.all_requests
    assert code == 0 and only_case(report)["label"] == "right", err
    assert asked.path == "/v1/messages" and asked.headers["x-api-key"] == "sk-judge-anthropic-5c1d"
    assert "authorization" not in asked.headers
    assert all("sk-judge-anthropic-5c1d" not in json.dumps(dict(r.headers)) for r in srv.all_requests)
