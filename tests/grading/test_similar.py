"""``similar``: the cosine similarity of the answer's embedding and an expected text's must reach ``threshold``.

Offline, the embeddings are read from the recording (``embeddings`` inside the envelope); live, they
come from the ``embeddings`` endpoint (tests/support/fake_embeddings.py on 127.0.0.1) and are
recorded with the answer. An embedding that did not arrive makes the case undelivered, never wrong.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from envelope_ci.grading.assertions.similar import cosine
from envelope_ci.model import Label
from tests.support.fake_embeddings import FakeEmbeddings
from tests.support.fake_openai import Behaviour, FakeOpenAI
from tests.support.suites import case, chat_body, grade, make_case, make_suite, recorded, run_report

pytestmark = pytest.mark.usefixtures("clean_env")

ANSWER = "Refunds reach your card within 5 business days."
EXPECTED = "A refund takes about five working days."
OTHER = "We cannot refund this order."
ENDPOINT = {"base_url": "http://127.0.0.1:9/v1", "model": "fake-embed-1"}


def embedding(vector: list[float], model: str = "fake-embed-1") -> dict[str, Any]:
    """An embeddings call's envelope as a recording holds it (OpenAI's /v1/embeddings shape)."""
    body = {"object": "list", "data": [{"object": "embedding", "index": 0, "embedding": vector}], "model": model,
            "usage": {"prompt_tokens": 9, "total_tokens": 9}}
    return recorded(body, elapsed_ms=80.0)


def answered(embeddings: dict[str, Any], content: str = ANSWER) -> dict[str, Any]:
    return recorded(chat_body(content), embeddings=embeddings)


# cos([1, 0], [0.6, 0.8]) = 0.6; cos([1, 0], [0, 1]) = 0
EMBEDDED = {ANSWER: embedding([1.0, 0.0]), EXPECTED: embedding([0.6, 0.8]), OTHER: embedding([0.0, 1.0])}


def entry(value: Any = EXPECTED, threshold: float = 0.5, kind: str = "similar") -> dict[str, Any]:
    return {"type": kind, "value": value, "threshold": threshold}


def offline(tmp_path: Path, entries: list[dict[str, Any]], recordings: Any,
            config: dict[str, Any] | None = None) -> tuple[int, Any, str]:
    suite = make_suite(tmp_path, [case("refund", **{"assert": entries, "recorded": recordings})],
                       config={"endpoints": {"embeddings": ENDPOINT}} if config is None else config)
    result, report = run_report(suite, tmp_path / "out")
    return result.code, report, result.err


def only(report: Any) -> dict[str, Any]:
    (row,) = report["cases"]
    return row


def test_cosine_is_the_angle_not_the_length() -> None:
    assert cosine((1.0, 0.0), (0.6, 0.8)) == pytest.approx(0.6)
    assert cosine((2.0, 0.0), (0.3, 0.4)) == pytest.approx(0.6)
    assert cosine((1.0, 1.0), (-1.0, -1.0)) == pytest.approx(-1.0)


def test_an_answer_similar_enough_is_right(tmp_path: Path) -> None:
    code, report, err = offline(tmp_path, [entry(threshold=0.5)], answered(EMBEDDED))
    assert (code, only(report)["label"]) == (0, "right"), err


def test_an_answer_not_similar_enough_is_wrong_with_its_score(tmp_path: Path) -> None:
    code, report, _ = offline(tmp_path, [entry(threshold=0.8)], answered(EMBEDDED))
    row = only(report)
    assert (row["label"], row["channel"]) == ("wrong", "correctness")
    assert f"similar: 0.600 < 0.8 to {EXPECTED!r}" in row["reasons"]


def test_the_threshold_itself_passes(tmp_path: Path) -> None:
    code, report, _ = offline(tmp_path, [entry(threshold=0.6)], answered(EMBEDDED))
    assert only(report)["label"] == "right"


def test_one_similar_expected_text_of_a_list_is_enough(tmp_path: Path) -> None:
    code, report, _ = offline(tmp_path, [entry([OTHER, EXPECTED], threshold=0.5)], answered(EMBEDDED))
    assert only(report)["label"] == "right"
    code, report, _ = offline(tmp_path / "b", [entry([OTHER, EXPECTED], threshold=0.7)], answered(EMBEDDED))
    assert f"similar: 0.600 < 0.7 to {EXPECTED!r}" in only(report)["reasons"]


def test_not_similar_fails_on_each_forbidden_text_at_or_over_the_threshold(tmp_path: Path) -> None:
    code, report, _ = offline(tmp_path, [entry([OTHER, EXPECTED], 0.6, "not-similar")], answered(EMBEDDED))
    row = only(report)
    assert row["label"] == "wrong"
    assert [r for r in row["reasons"] if r.startswith("similar")] == [f"similar: 0.600 >= 0.6 to the forbidden {EXPECTED!r}"]
    code, report, _ = offline(tmp_path / "b", [entry([OTHER, EXPECTED], 0.7, "not-similar")], answered(EMBEDDED))
    assert only(report)["label"] == "right"


def test_a_reply_with_no_text_is_not_similar_to_anything() -> None:
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    body = chat_body(None, finish_reason="tool_calls",
                     tool_calls=[{"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}])
    env = recorded(body, embeddings={EXPECTED: embedding([0.6, 0.8])})
    graded = grade(env, make_case(tools=tools, **{"assert": [entry()]}))
    assert (graded.label, graded.reasons) == (Label.WRONG, ("similar: the answer has no text to compare",))
    assert grade(env, make_case(tools=tools, **{"assert": [entry(kind="not-similar")]})).label is Label.RIGHT


def test_the_embeddings_model_joins_the_cases_fingerprint() -> None:
    graded = grade(answered(EMBEDDED), make_case(**{"assert": [entry()]}))
    assert graded.judge == "embeddings:fake-embed-1"


@pytest.mark.parametrize(("embeddings", "words"), [
    ({ANSWER: embedding([1.0, 0.0])}, "no recorded embedding: record it on a live run"),
    ({ANSWER: embedding([1.0, 0.0]), EXPECTED: recorded({"error": {"message": "overloaded"}}, status=503)}, "HTTP 503"),
    ({ANSWER: embedding([1.0, 0.0]), EXPECTED: {"error": "ConnectionResetError: reset", "elapsed_ms": 3.0}}, "no response"),
    ({ANSWER: embedding([1.0, 0.0]), EXPECTED: recorded({"data": []})}, "not OpenAI's embeddings shape"),
    ({ANSWER: embedding([0.0, 0.0]), EXPECTED: embedding([0.6, 0.8])}, "all zeros"),
    ({ANSWER: embedding([1.0, 0.0, 0.0]), EXPECTED: embedding([0.6, 0.8])}, "different lengths"),
])
def test_an_embedding_that_did_not_arrive_makes_the_case_undelivered_never_wrong(
        tmp_path: Path, embeddings: dict[str, Any], words: str) -> None:
    code, report, _ = offline(tmp_path, [entry(threshold=0.99)], answered(embeddings))
    row = only(report)
    assert code == 3
    assert (row["label"], row["channel"]) == ("drop", "transport")
    assert any(r.startswith("similar: the 'embeddings' endpoint gave") and words in r for r in row["reasons"]), row


def test_a_shape_failure_is_still_judged_before_a_missing_embedding(tmp_path: Path) -> None:
    entries = [{"type": "is-json"}, entry()]
    code, report, _ = offline(tmp_path, entries, answered({}))
    assert only(report)["label"] == "schema"


def test_a_changed_expected_text_needs_a_new_recording(tmp_path: Path) -> None:
    code, report, _ = offline(tmp_path, [entry("A refund takes a week.")], answered(EMBEDDED))
    assert code == 3 and only(report)["label"] == "drop"


@pytest.mark.parametrize(("entries", "config", "words"), [
    ([entry()], {}, "similar endpoint 'embeddings' is not defined under 'endpoints'"),
    ([{"type": "similar", "value": EXPECTED}], None, "'threshold' is a required property"),
    ([entry(threshold=1.5)], None, "greater than the maximum of 1"),
    ([entry(value="")], None, "assert.0.value: '' should be non-empty"),
    ([entry(value=[])], None, "assert.0.value:"),
    ([{"type": "contains", "value": "x", "threshold": 0.5}], None, "does not allow 0.5"),  # only some types take it
])
def test_a_bad_similar_is_bad_input(tmp_path: Path, entries: list[dict[str, Any]], config: dict[str, Any] | None,
                                    words: str) -> None:
    code, report, err = offline(tmp_path, entries, answered(EMBEDDED), config)
    assert code == 2 and report is None
    assert words in err, err


def test_a_malformed_recorded_embedding_is_bad_input_naming_where(tmp_path: Path) -> None:
    broken = {ANSWER: embedding([1.0, 0.0]), EXPECTED: {**embedding([0.6, 0.8]), "elapsed": 3}}
    code, report, err = offline(tmp_path, [entry()], answered(broken))
    assert code == 2 and report is None
    assert f"recorded.embeddings[{EXPECTED[:40]!r}].elapsed: unknown key" in err, err


# Live: the model is the fake chat server (srv), the embeddings the fake embeddings server.

def live_suite(tmp_path: Path, emb: FakeEmbeddings, entries: list[dict[str, Any]],
               endpoint: dict[str, Any] | None = None) -> Path:
    settings = {"endpoints": {"embeddings": endpoint or {"base_url": emb.url, "model": "text-embedding-3-small"}}}
    return make_suite(tmp_path, [case("refund", prompt="How long does a refund take? [[refund]]",
                                      **{"assert": entries})], config=settings, name="suite-live")


def live(srv: FakeOpenAI, emb: FakeEmbeddings, suite: Path, out: Path, *args: str,
         env: dict[str, str] | None = None) -> tuple[int, Any, str]:
    result, report = run_report(suite, out, "--base-url", srv.url, "--model", "m", "--concurrency", "1", *args, env=env)
    return result.code, report, result.err


@pytest.fixture
def emb() -> Any:
    with FakeEmbeddings() as server:
        server.plant(ANSWER, [1.0, 0.0])
        server.plant(EXPECTED, [0.6, 0.8])
        server.plant(OTHER, [0.0, 1.0])
        yield server


def test_a_live_run_embeds_answer_and_expected_and_a_replay_grades_the_recording_without_calling(
        srv: FakeOpenAI, emb: FakeEmbeddings, tmp_path: Path) -> None:
    srv.plant("refund", Behaviour.ok(ANSWER))
    suite = live_suite(tmp_path, emb, [entry(threshold=0.8)])
    recording = tmp_path / "run.jsonl"
    code, report, err = live(srv, emb, suite, tmp_path / "live", "--endpoint", f"embeddings={emb.url}",
                             "--record", str(recording))
    assert (code, only(report)["label"]) == (1, "wrong"), err
    assert emb.inputs == [ANSWER, EXPECTED]
    assert {r["model"] for r in emb.requests} == {"text-embedding-3-small"}
    line = json.loads(recording.read_text("utf-8"))
    assert set(line["recorded"]["embeddings"]) == {ANSWER, EXPECTED}
    assert line["recorded"]["embeddings"][EXPECTED]["request"]["parts"] == {"model": "text-embedding-3-small"}
    result, replayed = run_report(suite, tmp_path / "replay", "--replay", recording)
    assert only(replayed)["label"] == "wrong" and only(replayed)["reasons"] == only(report)["reasons"]
    assert emb.inputs == [ANSWER, EXPECTED]  # the replay called nothing


@pytest.mark.parametrize("concurrency", ["1", "4"])
def test_each_text_is_embedded_once_per_run(srv: FakeOpenAI, emb: FakeEmbeddings, tmp_path: Path,
                                            concurrency: str) -> None:
    srv.plant("refund", Behaviour.ok(ANSWER))
    suite = live_suite(tmp_path, emb, [entry(threshold=0.5), entry([OTHER, EXPECTED], 0.9, "not-similar")])
    code, report, err = live(srv, emb, suite, tmp_path / "out", "--endpoint", f"embeddings={emb.url}",
                             "--repeats", "4", "--concurrency", concurrency)
    assert (code, only(report)["label"]) == (0, "right"), err
    assert sorted(emb.inputs) == sorted([ANSWER, EXPECTED, OTHER])


def test_an_embeddings_call_that_fails_then_answers_is_retried(srv: FakeOpenAI, emb: FakeEmbeddings,
                                                              tmp_path: Path) -> None:
    srv.plant("refund", Behaviour.ok(ANSWER))
    emb.fail("five working days", [503])
    code, report, err = live(srv, emb, live_suite(tmp_path, emb, [entry(threshold=0.5)]), tmp_path / "out",
                             "--endpoint", f"embeddings={emb.url}")
    assert (code, only(report)["label"]) == (0, "right"), err
    assert emb.inputs.count(EXPECTED) == 2


def test_an_embeddings_endpoint_that_never_answers_makes_the_case_undelivered(srv: FakeOpenAI, emb: FakeEmbeddings,
                                                                             tmp_path: Path) -> None:
    srv.plant("refund", Behaviour.ok(ANSWER))
    emb.fail("five working days", [503, 503, 503])
    code, report, _ = live(srv, emb, live_suite(tmp_path, emb, [entry(threshold=0.99)]), tmp_path / "out",
                           "--endpoint", f"embeddings={emb.url}", "--max-attempts", "2")
    row = only(report)
    assert code == 3 and row["label"] == "drop"
    assert any("similar: the 'embeddings' endpoint gave no embedding of" in r and "HTTP 503" in r for r in row["reasons"])
    assert emb.inputs.count(EXPECTED) == 2


def test_the_settings_file_cannot_send_embeddings_to_a_host_the_operator_did_not_allow(
        srv: FakeOpenAI, emb: FakeEmbeddings, tmp_path: Path) -> None:
    srv.plant("refund", Behaviour.ok(ANSWER))
    code, report, err = live(srv, emb, live_suite(tmp_path, emb, [entry()]), tmp_path / "out")
    assert code == 2 and report is None
    assert "endpoints.embeddings: the settings file names host" in err
    assert emb.inputs == [] and srv.all_requests == []


def test_the_embeddings_key_is_read_only_from_a_variable_the_operator_allowed(
        srv: FakeOpenAI, emb: FakeEmbeddings, tmp_path: Path) -> None:
    srv.plant("refund", Behaviour.ok(ANSWER))
    suite = live_suite(tmp_path, emb, [entry()], {"base_url": emb.url, "model": "e", "api_key_env": "EMBED_KEY"})
    args = ("--endpoint", f"embeddings={emb.url}")
    code, _, err = live(srv, emb, suite, tmp_path / "refused", *args, env={"EMBED_KEY": "sk-embed"})
    assert code == 2 and "endpoints.embeddings.api_key_env" in err and emb.inputs == []
    code, report, err = live(srv, emb, suite, tmp_path / "allowed", *args, "--allow-key-env", "EMBED_KEY",
                             env={"EMBED_KEY": "sk-embed"})
    assert code == 0, err
    assert {r["_auth"] for r in emb.requests} == {"Bearer sk-embed"}
    assert "sk-embed" not in json.dumps(report)


def test_an_embeddings_endpoint_of_another_wire_format_is_bad_input(tmp_path: Path) -> None:
    config = {"endpoints": {"embeddings": {**ENDPOINT, "provider": "anthropic-messages"}}}
    code, report, err = offline(tmp_path, [entry()], answered(EMBEDDED), config)
    assert code == 2 and report is None
    assert "endpoints.embeddings.provider: 'anthropic-messages': similar's embeddings are asked in OpenAI's" in err, err
