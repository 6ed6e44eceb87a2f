"""Against a real llama.cpp server: llama-cpp-python's, serving a tiny random-weight model the test writes itself.

Only 127.0.0.1 is reached and nothing is downloaded (HF_HUB_OFFLINE=1). A random model says
noise, so each case steers it with ``response_format`` (llama-cpp-python turns the JSON schema
into a grammar): an enum of one string makes it answer exactly that string, as JSON.
llama-cpp-python sends no usage in streams, so only plain runs report the server's tokens.
"""
from __future__ import annotations

import json
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest

from envelope_ci.model import RetryPolicy
from envelope_ci.transport.http import ClientSettings
from envelope_ci.transport.pool import run_live
from tests.support.llama_tiny import ALIAS, LlamaServer, write_tiny_llama
from tests.support.suites import make_case, make_suite, run_report

pytestmark = [
    pytest.mark.llama,
    pytest.mark.skipif(find_spec("llama_cpp") is None or find_spec("gguf") is None,
                       reason="llama-cpp-python[server] and gguf are not installed: .ci/run installs them "
                              "(pip install \".[llama]\", a compile of several minutes)"),
    pytest.mark.usefixtures("clean_env"),
]

ANSWER_SCHEMA = {"type": "object", "required": ["answer"], "properties": {"answer": {"type": "integer"}}}
CUT_AT = 4  # max_tokens of the case the server cuts


def says(text: str) -> dict[str, Any]:
    """A response_format that leaves the model one answer: ``text`` as a JSON string."""
    return {"type": "json_object", "schema": {"enum": [text]}}


# id -> (case fields, the label both runs must give)
CASES: dict[str, tuple[dict[str, Any], str]] = {
    "ll-right": ({"expect_fragment": "Hello", "response_format": says("Hello world")}, "right"),
    "ll-wrong": ({"expect_fragment": "Hello", "response_format": says("Goodbye")}, "wrong"),
    "ll-json": ({"schema": ANSWER_SCHEMA, "expect_json": {"answer": 42}, "response_format": {"type": "json_object", "schema": {
        "type": "object", "properties": {"answer": {"const": 42}}, "required": ["answer"], "additionalProperties": False}}}, "right"),
    "ll-schema": ({"schema": ANSWER_SCHEMA, "response_format": says("no object here")}, "schema"),
    "ll-cut": ({"expect_fragment": "Hello", "response_format": says("Hello world, how are you today?"), "max_tokens": CUT_AT}, "truncated"),
}


def fixture_cases() -> list[dict[str, Any]]:
    return [{"id": cid, "prompt": "Answer as the format says.", **fields} for cid, (fields, _) in CASES.items()]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_llama(tmp_path_factory.mktemp("model") / "tiny-llama.gguf")


def live_args(url: str, *more: str) -> list[str]:
    return ["--base-url", url, "--model", ALIAS, "--concurrency", "4", *more]


def labels(report: dict[str, Any]) -> dict[str, str]:
    return {c["id"]: c["label"] for c in report["cases"]}


def test_llama_cpp_plain_and_stream_give_every_case_the_same_label(tmp_path: Path, model: Path) -> None:
    """--concurrency 4, plain then --stream: the same label for every case, and the max_tokens cut is truncated.

    The server runs with --interrupt_requests False, as a server shared by concurrent clients must:
    by default it cuts a running stream whenever another request waits (the next test).
    """
    suite = make_suite(tmp_path, fixture_cases())
    record = tmp_path / "plain.jsonl"
    with LlamaServer(model, tmp_path / "server.log", interrupt_requests=False) as server:
        plain, plain_report = run_report(suite, tmp_path / "plain", *live_args(server.url, "--record", str(record)))
        stream, stream_report = run_report(suite, tmp_path / "stream", *live_args(server.url, "--stream"))
    assert plain_report is not None and stream_report is not None, plain.err + stream.err
    expected = {cid: label for cid, (_, label) in CASES.items()}
    assert labels(plain_report) == expected
    assert labels(stream_report) == expected, [c["reasons"] for c in stream_report["cases"]]
    cut = next(c for c in plain_report["cases"] if c["id"] == "ll-cut")
    (line,) = [json.loads(row) for row in record.read_text("utf-8").splitlines() if json.loads(row)["id"] == "ll-cut"]
    assert cut["finish_reason"] == "length"
    assert cut["tokens"] == line["recorded"]["body"]["usage"]["completion_tokens"] == CUT_AT
    assert cut["tokens_estimated"] is False
    streamed_cut = next(c for c in stream_report["cases"] if c["id"] == "ll-cut")
    assert streamed_cut["finish_reason"] == "length" and streamed_cut["tokens_estimated"] is True  # no usage in its streams


def test_llama_cpp_cuts_a_stream_when_the_next_request_arrives(tmp_path: Path, model: Path) -> None:
    """The server's default interrupt_requests: a cut stream is a drop (never truncated), counted, and --concurrency 1 is the cure."""
    cases = [make_case(id=cid, **fields) for cid, (fields, _) in CASES.items()]
    with LlamaServer(model, tmp_path / "server.log") as server:
        settings = ClientSettings(base_url=server.url, model=ALIAS, stream=True)
        busy = run_live(cases, settings, concurrency=4, policy=RetryPolicy(max_attempts=1))
        alone = run_live(cases, settings, concurrency=1, policy=RetryPolicy(max_attempts=1))
    busy_labels = {cid: grades[0].label.value for cid, grades in busy.grades.items()}
    assert busy.cut_streams >= 2, busy_labels
    assert any("--concurrency 1" in note for note in busy.remarks())
    for cid, label in busy_labels.items():
        assert label in (CASES[cid][1], "drop"), (cid, label)  # cut: a drop, never truncated
    assert alone.cut_streams == 0
    assert {cid: grades[0].label.value for cid, grades in alone.grades.items()} == {cid: label for cid, (_, label) in CASES.items()}
