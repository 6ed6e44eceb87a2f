"""Choosing a provider: by name, from entry points, an unknown name refused; recordings read by the provider that
made them, older ones as openai-chat; the fingerprint names another provider and omits the default."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import msgspec

from envelope_ci.model import Fingerprint
from envelope_ci.providers.base import Provider
from envelope_ci.providers.registry import BUILTIN, ENTRY_POINT_GROUP
from tests.support.suites import make_suite, run_cli, run_report, write_replay
from tests.test_plugins import _env

ANSWER = {"http_status": 200, "body": {"type": "message", "role": "assistant", "model": "claude-x",
                                       "content": [{"type": "text", "text": "Paris"}], "stop_reason": "max_tokens"}}
CASE = {"id": "c1", "prompt": "Capital of France?", "assert": [{"type": "contains", "value": "Paris"}]}


def test_the_builtins_keep_to_the_protocol_under_their_names() -> None:
    assert [p.name for p in BUILTIN] == ["openai-chat", "anthropic-messages", "openai-responses"]
    assert all(isinstance(p, Provider) for p in BUILTIN) and ENTRY_POINT_GROUP == "envelope_ci.providers"


def test_an_unknown_provider_is_exit_2_with_a_did_you_mean(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, [CASE])
    done = run_cli(["run", suite, "--out", tmp_path / "out", "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                    "--provider", "antropic-messages"])
    assert done.code == 2
    assert ("--provider 'antropic-messages' is not a provider (did you mean 'anthropic-messages'?); "
            "known: anthropic-messages, openai-chat, openai-responses") in done.err


def test_a_recording_is_read_by_the_provider_named_on_it(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, [CASE])
    replay = write_replay(tmp_path / "rec.jsonl", [("c1", {**ANSWER, "provider": "anthropic-messages"})])
    _, report = run_report(suite, tmp_path / "out", "--replay", replay)
    assert report is not None and report["cases"][0]["label"] == "truncated"  # stop_reason max_tokens, read as such
    assert report["fingerprint"]["provider"] == "anthropic-messages"


def test_a_recording_without_a_provider_reads_as_openai_chat(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, [CASE])
    _, report = run_report(suite, tmp_path / "out", "--replay", write_replay(tmp_path / "rec.jsonl", [("c1", ANSWER)]))
    assert report is not None and report["cases"][0]["label"] == "empty"  # no choices: not OpenAI's shape
    assert "provider" not in report["fingerprint"]


def test_a_recording_naming_a_provider_not_installed_is_bad_input(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, [CASE])
    replay = write_replay(tmp_path / "rec.jsonl", [("c1", {**ANSWER, "provider": "gemini-generate"})])
    result, _ = run_report(suite, tmp_path / "out", "--replay", replay)
    assert result.code == 2 and "'gemini-generate' is not a provider" in result.err


def test_a_fingerprint_omits_the_default_provider_and_tells_another_apart() -> None:
    chat = Fingerprint("smoke", "c", "m", 0.0, "1")
    anthropic = Fingerprint("smoke", "c", "m", 0.0, "1", provider="anthropic-messages")
    assert "provider" not in json.loads(msgspec.json.encode(chat))  # pins and reports of openai-chat unchanged
    assert json.loads(msgspec.json.encode(anthropic))["provider"] == "anthropic-messages"
    assert Fingerprint.from_dict({"lane": "smoke", "endpoint_class": "c", "model_id": "m", "temperature": 0,
                                  "grader_version": "1"}) == chat
    assert anthropic.differences(chat) == "provider openai-chat → anthropic-messages"


def test_a_judge_endpoint_with_an_unknown_provider_is_bad_input_on_its_field(tmp_path: Path) -> None:
    config = {"endpoints": {"judge": {"base_url": "http://127.0.0.1:9/v1", "model": "j", "provider": "anthropic"}}}
    suite = make_suite(tmp_path, [CASE], config=config)
    done = run_cli(["run", suite, "--out", tmp_path / "out"])
    assert done.code == 2 and "endpoints.judge.provider" in done.err and "'anthropic-messages'" in done.err


def _provider_plugin(site: Path, name: str, value: str) -> None:
    """A provider registered through a real entry point: a module and its dist-info on sys.path."""
    (site / "clash_provider.py").write_text(
        "from envelope_ci.providers.openai_chat import OpenAIChat\n\n\n"
        "class Clash(OpenAIChat):\n    name = 'openai-chat'\n\n\nPROVIDER = Clash()\nNOT_ONE = object()\n", "utf-8")
    info = site / "clash_provider-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: clash-provider\nVersion: 0.1\n", "utf-8")
    (info / "entry_points.txt").write_text(f"[envelope_ci.providers]\n{name} = clash_provider:{value}\n", "utf-8")


def _plugin_run(site: Path, suite: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "envelope_ci", "run", str(suite), "--out", str(out), "--base-url",
                           "http://127.0.0.1:9/v1", "--model", "m", "--provider", "nope"],
                          capture_output=True, text=True, env=_env(PYTHONPATH=str(site)), timeout=120)


def test_a_plugin_taking_a_builtin_name_or_not_a_provider_is_refused(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, [CASE])
    for value, words in (("PROVIDER", "provider 'openai-chat' is registered twice"),
                         ("NOT_ONE", "is not an envelope_ci Provider")):
        site = tmp_path / value
        site.mkdir()
        _provider_plugin(site, "clash", value)
        done = _plugin_run(site, suite, tmp_path / f"out-{value}")
        assert done.returncode == 2 and words in done.stderr, done.stderr
