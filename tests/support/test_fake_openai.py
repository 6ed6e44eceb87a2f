"""Tests of tests/support/fake_openai.py itself, over real sockets (requests + raw sockets)."""

from __future__ import annotations

import email.utils
import json
import re
import socket
import statistics
import subprocess
import sys
import threading
import time

import pytest
import requests

from tests.support.fake_openai import Behaviour, Chaos, FakeOpenAI, refused_url, serve_fixed_delay
from tests.support.suites import REPO_ROOT

TIMEOUT = 5


def chat(srv, key=None, *, stream=False, include_usage=False, session=None, timeout=TIMEOUT, extra=None,
         headers=None):
    body = {"model": "gpt-x", "messages": [{"role": "system", "content": "be brief"},
                                           {"role": "user", "content": f"question [[{key}]]" if key else "hi"}]}
    if stream:
        body["stream"] = True
        if include_usage:
            body["stream_options"] = {"include_usage": True}
    body.update(extra or {})
    return (session or requests).post(srv.url + "/chat/completions", json=body, stream=stream, timeout=timeout,
                                      headers=headers)


def sse(resp):
    """data payloads of an SSE response (comments and blank lines dropped)."""
    out = []
    for line in resp.iter_lines(decode_unicode=True):
        if line.startswith("data: "):
            out.append(line[len("data: "):])
    return out


def chunks(resp):
    """Parsed JSON chunks, plus whether the stream ended with [DONE]."""
    data = sse(resp)
    done = bool(data) and data[-1] == "[DONE]"
    return [json.loads(d) for d in data if d != "[DONE]"], done


def check_completion(body, *, model="fake-model-1", usage=True):
    assert body["id"].startswith("chatcmpl-")
    assert body["object"] == "chat.completion"
    assert isinstance(body["created"], int)
    assert body["model"] == model
    assert body["system_fingerprint"].startswith("fp_")
    for ch in body["choices"]:
        assert {"index", "message", "logprobs", "finish_reason"} <= set(ch)
        assert ch["message"]["role"] == "assistant"
    if usage:
        u = body["usage"]
        assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
    else:
        assert "usage" not in body


def check_chunk(c, model="fake-model-1"):
    assert c["id"].startswith("chatcmpl-")
    assert c["object"] == "chat.completion.chunk"
    assert c["model"] == model and isinstance(c["created"], int)


# --------------------------------------------------------------------------- successes
def test_url_and_ok_non_stream(srv):
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1", srv.url)
    srv.plant("a", Behaviour.ok("hello world"))
    r = chat(srv, "a")
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "application/json"
    assert int(r.headers["Content-Length"]) == len(r.content)
    body = r.json()
    check_completion(body)
    ch = body["choices"][0]
    assert ch["message"] == {"role": "assistant", "content": "hello world", "refusal": None}
    assert ch["finish_reason"] == "stop" and ch["logprobs"] is None and ch["index"] == 0
    assert body["usage"]["completion_tokens_details"] == {"reasoning_tokens": 0}


def test_ok_model_and_no_usage(srv):
    srv.plant("a", Behaviour.ok("x", usage=False, model="llama-3"))
    check_completion(chat(srv, "a").json(), model="llama-3", usage=False)


def test_ok_stream_with_usage(srv):
    srv.plant("a", Behaviour.ok("Hello there, friend."))
    r = chat(srv, "a", stream=True, include_usage=True)
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("text/event-stream")
    cs, done = chunks(r)
    assert done
    for c in cs:
        check_chunk(c)
    assert len({c["id"] for c in cs}) == 1
    assert cs[0]["choices"][0]["delta"] == {"role": "assistant", "content": "", "refusal": None}
    assert cs[0]["choices"][0]["finish_reason"] is None
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in cs[1:-2])
    assert text == "Hello there, friend."
    assert cs[-2]["choices"][0] == {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}
    assert cs[-1]["choices"] == [] and cs[-1]["usage"]["completion_tokens"] >= 1


def test_ok_stream_without_usage_chunk(srv):
    srv.plant("a", Behaviour.ok("one two"))
    cs, done = chunks(chat(srv, "a", stream=True))
    assert done
    assert cs[-1]["choices"][0]["finish_reason"] == "stop"
    assert all(c["choices"] for c in cs) and not any("usage" in c for c in cs)


def test_stream_pings_ttft_and_gaps(srv):
    srv.plant("a", Behaviour.ok("a b c", ttft_ms=100, chunk_gap_ms=30, pings=True))
    t0 = time.monotonic()
    r = chat(srv, "a", stream=True)
    lines = []
    for line in r.iter_lines(decode_unicode=True):
        if line:
            lines.append((time.monotonic() - t0, line))
    assert any(l == ": ping" for _, l in lines)
    assert lines[0][1] == ": ping" and lines[0][0] < 0.09  # ping right after the headers
    data = [(t, l) for t, l in lines if l.startswith("data: ")]
    assert data[0][0] >= 0.095                                # TTFT
    assert data[-1][1] == "data: [DONE]"
    assert data[-1][0] >= 0.095 + 4 * 0.03 * 0.9              # 3 content deltas + finish, gapped


def test_length_non_stream_and_stream(srv):
    srv.plant("a", Behaviour.length('{"'))
    body = chat(srv, "a", extra={"max_tokens": 7}).json()
    check_completion(body)
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["choices"][0]["message"]["content"] == '{"'
    assert body["usage"]["completion_tokens"] == 7
    cs, done = chunks(chat(srv, "a", stream=True, include_usage=True))
    assert done and cs[-2]["choices"][0]["finish_reason"] == "length"
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in cs[:-1]) == '{"'


def test_tool_call_non_stream(srv):
    args = '{"city":"Edinburgh","country":"UK","units":"c"}'
    srv.plant("a", Behaviour.tool_call("GetWeatherArgs", args))
    body = chat(srv, "a").json()
    check_completion(body)
    ch = body["choices"][0]
    assert ch["finish_reason"] == "tool_calls"
    assert ch["message"]["content"] is None and ch["message"]["refusal"] is None
    (tc,) = ch["message"]["tool_calls"]
    assert tc["id"].startswith("call_") and tc["type"] == "function"
    assert tc["function"] == {"name": "GetWeatherArgs", "arguments": args}


def test_tool_call_variants(srv):
    srv.plant("a", Behaviour.tool_call("f", {"x": 1}, content="", finish_reason="stop"))
    ch = chat(srv, "a").json()["choices"][0]
    assert ch["message"]["content"] == "" and ch["finish_reason"] == "stop"
    assert json.loads(ch["message"]["tool_calls"][0]["function"]["arguments"]) == {"x": 1}


def test_tool_call_stream(srv):
    args = '{"city":"Edinburgh","country":"UK"}'
    srv.plant("a", Behaviour.tool_call("get_weather", args))
    cs, done = chunks(chat(srv, "a", stream=True))
    assert done
    first = cs[0]["choices"][0]["delta"]
    assert first["role"] == "assistant" and first["content"] is None and first["refusal"] is None
    assert first["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": ""}
    assert first["tool_calls"][0]["id"].startswith("call_")
    rest = "".join(c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"] for c in cs[1:-1])
    assert rest == args
    assert cs[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_refusal_non_stream_and_stream(srv):
    srv.plant("a", Behaviour.refusal("I can't help with that."))
    ch = chat(srv, "a").json()["choices"][0]
    assert ch["message"] == {"role": "assistant", "content": None, "refusal": "I can't help with that."}
    assert ch["finish_reason"] == "stop"
    cs, done = chunks(chat(srv, "a", stream=True))
    assert done
    assert cs[0]["choices"][0]["delta"] == {"role": "assistant", "content": None, "refusal": ""}
    assert "".join(c["choices"][0]["delta"].get("refusal", "") for c in cs[1:-1]) == "I can't help with that."
    assert cs[-1]["choices"][0]["finish_reason"] == "stop"


def test_content_filter(srv):
    srv.plant("a", Behaviour.content_filter())
    body = chat(srv, "a").json()
    check_completion(body)
    ch = body["choices"][0]
    assert ch["finish_reason"] == "content_filter" and ch["message"]["content"] is None
    assert ch["message"]["tool_calls"] is None
    assert ch["content_filter_results"]["violence"] == {"filtered": True, "severity": "medium"}
    assert body["prompt_filter_results"][0]["prompt_index"] == 0
    cs, done = chunks(chat(srv, "a", stream=True))
    assert done and cs[-1]["choices"][0]["finish_reason"] == "content_filter"


def test_empty_choices(srv):
    srv.plant("a", Behaviour.empty_choices())
    r = chat(srv, "a")
    assert r.status_code == 200
    body = r.json()
    check_completion(body)
    assert body["choices"] == []
    cs, done = chunks(chat(srv, "a", stream=True, include_usage=True))
    assert done and all(c["choices"] == [] for c in cs)


def test_null_content(srv):
    srv.plant("a", Behaviour.null_content())
    ch = chat(srv, "a").json()["choices"][0]
    assert ch["message"] == {"role": "assistant", "content": None, "refusal": None}
    assert "tool_calls" not in ch["message"] and ch["finish_reason"] == "stop"
    cs, done = chunks(chat(srv, "a", stream=True))
    assert done and cs[0]["choices"][0]["delta"]["content"] is None
    assert cs[-1]["choices"][0]["finish_reason"] == "stop"


def test_malformed_json(srv):
    srv.plant("a", Behaviour.malformed_json())
    r = chat(srv, "a")
    assert r.status_code == 200 and r.headers["Content-Type"] == "application/json"
    assert r.text.startswith('{"id":"chatcmpl-')
    with pytest.raises(ValueError):
        r.json()
    data = sse(chat(srv, "a", stream=True))
    assert data[-1] == "[DONE]"
    with pytest.raises(ValueError):
        json.loads(data[1])


def test_html_200(srv):
    srv.plant("a", Behaviour.html_200())
    for stream in (False, True):
        r = chat(srv, "a", stream=stream)
        assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/html")
        assert r.text.lstrip().lower().startswith("<!doctype html>")


def test_forced_stream_flag(srv):
    srv.plant("json", Behaviour.ok("x", stream=False))
    srv.plant("sse", Behaviour.ok("x", stream=True))
    assert chat(srv, "json", stream=True).json()["choices"][0]["message"]["content"] == "x"
    r = chat(srv, "sse")
    assert r.headers["Content-Type"].startswith("text/event-stream") and sse(r)[-1] == "[DONE]"


# --------------------------------------------------------------------------- HTTP errors
ERROR_CASES = [
    (Behaviour.quota_exhausted(), 429, lambda b: b["error"]["type"] == "insufficient_quota"
     and b["error"]["code"] is None),
    (Behaviour.server_error(), 500, lambda b: b["error"]["type"] == "server_error"),
    (Behaviour.server_error(503), 503, lambda b: b == {"error": {"code": 503, "message": "Loading model",
                                                                 "type": "unavailable_error"}}),
    (Behaviour.bad_request_context_length(), 400, lambda b: b["error"]["code"] == "context_length_exceeded"
     and b["error"]["param"] == "messages"),
    (Behaviour.unauthorized(), 401, lambda b: b == {"error": "Unauthorized"}),
    (Behaviour.flat_error(), 400, lambda b: b["object"] == "error" and b["code"] == 400
     and b["type"] == "BadRequestError" and "error" not in b),
    (Behaviour.status(418), 418, lambda b: isinstance(b["error"]["message"], str)),
    (Behaviour.status(404, {"error": {"message": "The model `X` does not exist.", "type": "NotFoundError",
                                      "param": "model", "code": 404}}), 404, lambda b: b["error"]["code"] == 404),
]


@pytest.mark.parametrize("beh,code,check", ERROR_CASES, ids=lambda v: str(v) if isinstance(v, int) else None)
@pytest.mark.parametrize("stream", [False, True])
def test_json_errors(srv, beh, code, check, stream):
    srv.plant("a", beh)
    r = chat(srv, "a", stream=stream)
    assert r.status_code == code
    assert r.headers["Content-Type"] == "application/json"
    assert check(r.json())


def test_server_error_502_is_nginx_html(srv):
    srv.plant("a", Behaviour.server_error(502))
    r = chat(srv, "a")
    assert r.status_code == 502 and r.headers["Content-Type"].startswith("text/html")
    assert "502 Bad Gateway" in r.text and "nginx" in r.text
    with pytest.raises(ValueError):
        r.json()


def test_status_generic_bodies_and_headers(srv):
    srv.plant("t", Behaviour.status(400, "plain words"))
    r = chat(srv, "t")
    assert r.status_code == 400 and r.headers["Content-Type"].startswith("text/plain") and r.text == "plain words"
    srv.plant("h", Behaviour.status(200, {"hello": 1}, {"X-Custom": "yes", "Content-Type": "application/x-json"}))
    r = chat(srv, "h")
    assert r.headers["x-custom"] == "yes" and r.headers["Content-Type"] == "application/x-json"
    assert r.json() == {"hello": 1}


def test_rate_limited_header_forms(srv):
    srv.plant("s", Behaviour.rate_limited(retry_after=2))
    srv.plant("ms", Behaviour.rate_limited(retry_after_ms=1500))
    srv.plant("d", Behaviour.rate_limited(retry_after_date=3))
    srv.plant("dv", Behaviour.rate_limited(retry_after_date="Wed, 21 Oct 2015 07:28:00 GMT"))
    srv.plant("none", Behaviour.rate_limited())
    r = chat(srv, "s")
    assert r.status_code == 429 and r.headers["Retry-After"] == "2" and "retry-after-ms" not in r.headers
    err = r.json()["error"]
    assert err["code"] == "rate_limit_exceeded" and err["type"] == "tokens" and err["param"] is None
    assert r.headers["x-ratelimit-remaining-tokens"] == "0"
    r = chat(srv, "ms")
    assert r.headers["retry-after-ms"] == "1500" and "Retry-After" not in r.headers
    now = time.time()
    r = chat(srv, "d")
    when = email.utils.parsedate_to_datetime(r.headers["Retry-After"]).timestamp()
    assert now + 2 <= when <= now + 5
    assert chat(srv, "dv").headers["Retry-After"] == "Wed, 21 Oct 2015 07:28:00 GMT"
    r = chat(srv, "none")
    assert r.status_code == 429 and "Retry-After" not in r.headers and "retry-after-ms" not in r.headers
    with pytest.raises(ValueError):
        Behaviour.rate_limited(retry_after=1, retry_after_date=2)


# --------------------------------------------------------------------------- transport faults
def test_reset_mid_body(srv):
    srv.plant("a", Behaviour.reset())
    with pytest.raises((requests.exceptions.ChunkedEncodingError, requests.exceptions.ConnectionError)):
        chat(srv, "a")
    with pytest.raises((requests.exceptions.ChunkedEncodingError, requests.exceptions.ConnectionError)):
        sse(chat(srv, "a", stream=True))
    # server still healthy afterwards
    assert chat(srv, "other").status_code == 200


def test_reset_mid_body_raw_socket_sees_partial_body_then_rst(srv):
    srv.plant("a", Behaviour.reset())
    body = json.dumps({"messages": [{"role": "user", "content": "[[a]]"}]}).encode()
    with socket.create_connection(("127.0.0.1", srv.port), timeout=TIMEOUT) as s:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        got = b""
        with pytest.raises(ConnectionResetError):
            while True:
                d = s.recv(65536)
                if not d:
                    break
                got += d
    head, _, partial = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    length = int(re.search(rb"Content-Length: (\d+)", head).group(1))
    assert 0 < len(partial) < length


def test_reset_before_response(srv):
    srv.plant("a", Behaviour.reset(partial=False))
    with pytest.raises(requests.exceptions.ConnectionError):
        chat(srv, "a")


def test_hang_triggers_client_read_timeout(srv):
    srv.plant("a", Behaviour.hang(2))
    t0 = time.monotonic()
    with pytest.raises(requests.exceptions.ReadTimeout):
        chat(srv, "a", timeout=0.3)
    assert time.monotonic() - t0 < 1.0
    assert chat(srv, "b", timeout=1).status_code == 200  # other requests unaffected


def test_hang_then_late_answer(srv):
    srv.plant("a", Behaviour.hang(0.2, content="late"))
    t0 = time.monotonic()
    r = chat(srv, "a")
    assert time.monotonic() - t0 >= 0.19
    assert r.json()["choices"][0]["message"]["content"] == "late"


def test_close_aborts_hang_promptly():
    srv = FakeOpenAI(Behaviour.hang(30)).start()
    errors = []

    def client():
        try:
            chat(srv, "a", timeout=10)
        except requests.RequestException as e:
            errors.append(e)

    t = threading.Thread(target=client)
    t.start()
    deadline = time.monotonic() + 2
    while srv.attempts("a") == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    t0 = time.monotonic()
    srv.close()
    assert time.monotonic() - t0 < 1.0
    t.join(2)
    assert not t.is_alive() and errors


def test_slow_body(srv):
    srv.plant("a", Behaviour.slow_body(chunks=3, gap_ms=60))
    t0 = time.monotonic()
    body = {"messages": [{"role": "user", "content": "[[a]]"}]}  # non-streaming request ...
    r = requests.post(srv.url + "/chat/completions", json=body, stream=True, timeout=TIMEOUT)  # ... read lazily
    t_head = time.monotonic() - t0
    body = r.content
    t_all = time.monotonic() - t0
    assert t_head < 0.05 and t_all >= 3 * 0.06 * 0.9
    assert len(body) == int(r.headers["Content-Length"])
    check_completion(json.loads(body))
    # per-read timeout longer than the gap never fires: a client needs its own total deadline
    assert chat(srv, "a", timeout=0.15).status_code == 200


def test_slow_body_stream(srv):
    srv.plant("a", Behaviour.slow_body(chunks=3, gap_ms=40, content="abcdefghi"))
    t0 = time.monotonic()
    cs, done = chunks(chat(srv, "a", stream=True))
    assert done and time.monotonic() - t0 >= 3 * 0.04 * 0.9
    assert [c["choices"][0]["delta"].get("content") for c in cs[1:4]] == ["abc", "def", "ghi"]


def test_huge_exact_size(srv):
    srv.plant("a", Behaviour.huge(200_000))
    r = chat(srv, "a")
    assert len(r.content) == 200_000 == int(r.headers["Content-Length"])
    check_completion(r.json())


def test_huge_too_small_is_reported(srv):
    srv.plant("a", Behaviour.huge(10))
    r = chat(srv, "a")
    assert r.status_code == 500 and r.headers["x-fake-openai-error"] == "1"
    assert len(srv.errors) == 1
    srv.clear()


def test_huge_endless_non_stream_and_stream(srv):
    srv.plant("a", Behaviour.huge())
    for stream in (False, True):
        body = {"messages": [{"role": "user", "content": "[[a]]"}], "stream": stream}
        with requests.post(srv.url + "/chat/completions", json=body, stream=True, timeout=TIMEOUT) as r:
            assert r.status_code == 200
            n = 0
            for piece in r.iter_content(65536):
                n += len(piece)
                if n > 1_000_000:
                    break
            assert n > 1_000_000


def test_huge_stream_bounded(srv):
    srv.plant("a", Behaviour.huge(50_000))
    cs, done = chunks(chat(srv, "a", stream=True))
    assert done and cs[-1]["choices"][0]["finish_reason"] == "stop"
    assert sum(len(c["choices"][0]["delta"].get("content", "")) for c in cs) >= 50_000


# --------------------------------------------------------------------------- special streams
def test_stream_cut(srv):
    srv.plant("a", Behaviour.stream_cut("The answer is"))
    r = chat(srv, "a", stream=True, include_usage=True)
    cs, done = chunks(r)  # ends cleanly: no exception
    assert not done
    assert all(c["choices"][0]["finish_reason"] is None for c in cs)
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in cs) == "The answer is"


def test_stream_cut_with_a_bare_done(srv):
    """llama-cpp-python's interrupted stream: [DONE], but no chunk with a finish_reason."""
    srv.plant("a", Behaviour.stream_cut("The answer is", done=True))
    cs, done = chunks(chat(srv, "a", stream=True, include_usage=True))
    assert done
    assert all(c["choices"][0]["finish_reason"] is None for c in cs)


def test_stream_error(srv):
    srv.plant("a", Behaviour.stream_error(message="boom"))
    r = chat(srv, "a", stream=True)
    assert r.status_code == 200
    data = sse(r)
    assert data[-1] == "[DONE]"
    err = json.loads(data[-2])
    assert err == {"error": {"message": "boom", "type": "InternalServerError", "param": None, "code": 500}}
    assert all(json.loads(d)["choices"][0]["finish_reason"] is None for d in data[:-2])


def test_stream_azure_prefilter(srv):
    srv.plant("a", Behaviour.stream_azure_prefilter("hi there"))
    cs, done = chunks(chat(srv, "a", stream=True))
    assert done
    first = cs[0]
    assert first["choices"] == [] and first["id"] == "" and first["object"] == ""
    assert first["prompt_filter_results"][0]["content_filter_results"]["jailbreak"] == {"filtered": False,
                                                                                        "detected": False}
    assert cs[1]["choices"][0]["delta"]["role"] == "assistant"
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in cs[1:]) == "hi there"
    assert cs[-1]["choices"][0]["finish_reason"] == "stop"
    body = chat(srv, "a").json()  # non-streaming: Azure-shaped ok body
    assert "prompt_filter_results" in body and "content_filter_results" in body["choices"][0]


# --------------------------------------------------------------------------- matching, records
# --------------------------------------------------------------------------- chaos (rule 11)
def test_chaos_token_bucket_answers_429_with_when_to_come_back():
    chaos = Chaos(rpm=120, burst=2, minute_s=120.0, share_429=0.0, share_503=0.0)  # a token a second
    with FakeOpenAI(chaos=chaos) as srv:
        assert [chat(srv, "k").status_code for _ in range(2)] == [200, 200]
        limited = chat(srv, "k")
        assert limited.status_code == 429
        assert 0 < int(limited.headers["retry-after-ms"]) <= 1000
        assert limited.headers["Retry-After"] == "1"  # whole seconds, rounded up
        assert limited.headers["x-ratelimit-remaining-requests"] == "0"
        assert limited.headers["x-ratelimit-reset-requests"].endswith("ms")
        time.sleep(int(limited.headers["retry-after-ms"]) / 1000 + 0.01)
        assert chat(srv, "k").status_code == 200
        assert chaos.counts["bucket_429"] >= 1 and srv.errors == []


def test_chaos_draws_are_per_case_and_seeded():
    """The same seed gives each key the same statuses, whatever other keys do in between; plants are not advanced."""
    def statuses(seed, keys):
        chaos = Chaos(rpm=10**6, share_429=0.3, share_503=0.3, seed=seed)
        with FakeOpenAI(chaos=chaos) as srv:
            srv.plant("a", [Behaviour.ok("first"), Behaviour.ok("second")])
            seen = {k: [] for k in set(keys)}
            for k in keys:
                seen[k].append(chat(srv, k).status_code)
            assert sum(chaos.counts.values()) == sum(code != 200 for codes in seen.values() for code in codes)
            first_ok = next(r for r in srv.requests("a") if r.behaviour and r.behaviour.kind == "ok")
            assert first_ok.behaviour.content == "first"  # the chaos answers did not use up the plant
            return seen
    alone = statuses(5, ["a"] * 12)
    mixed = statuses(5, ["b", "a"] * 12)
    assert mixed["a"] == alone["a"]
    assert {429, 503, 200} <= set(alone["a"] + mixed["b"])
    assert statuses(6, ["a"] * 12)["a"] != alone["a"]


def test_chaos_random_429_names_only_the_spent_limit():
    with FakeOpenAI(chaos=Chaos(rpm=10**6, share_429=1.0, share_503=0.0, minute_s=3.0)) as srv:
        r = chat(srv, "k")
    assert r.status_code == 429 and "Retry-After" not in r.headers and "retry-after-ms" not in r.headers
    assert r.headers["x-ratelimit-remaining-requests"] == "0"
    assert r.headers["x-ratelimit-reset-tokens"] == "6m0s" and r.headers["x-ratelimit-remaining-tokens"] != "0"


def test_refused_url():
    url = refused_url()
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1", url)
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.post(url + "/chat/completions", json={"messages": []}, timeout=2)


def test_attempts_with_behaviour_list(srv):
    srv.plant("k", [Behaviour.server_error(503), Behaviour.ok("fine")])
    codes = [chat(srv, "k").status_code for _ in range(3)]
    assert codes == [503, 200, 200]  # the last behaviour repeats
    assert srv.attempts("k") == 3 and srv.attempts("nope") == 0
    recs = srv.requests("k")
    assert [r.attempt for r in recs] == [1, 2, 3]
    assert recs[0].t < recs[1].t < recs[2].t
    assert [r.behaviour.status_code for r in recs] == [503, 200, 200]
    srv.plant("k", [Behaviour.server_error(500), Behaviour.ok()])  # re-plant restarts the list
    assert chat(srv, "k").status_code == 500
    assert srv.attempts("k") == 4


def test_retry_after_timing_is_observable(srv):
    srv.plant("k", [Behaviour.rate_limited(retry_after_ms=150), Behaviour.ok()])
    r = chat(srv, "k")
    time.sleep(int(r.headers["retry-after-ms"]) / 1000)
    chat(srv, "k")
    a, b = srv.requests("k")
    assert b.t - a.t >= 0.15


def test_default_and_matching_rules(srv):
    srv.default = Behaviour.ok("dflt")
    srv.plant("p", Behaviour.ok("planted"))
    assert chat(srv).json()["choices"][0]["message"]["content"] == "dflt"
    assert chat(srv, "unplanted").json()["choices"][0]["message"]["content"] == "dflt"
    assert srv.attempts("unplanted") == 1  # marker counted even without a plant
    # list-of-parts content, marker anywhere
    body = {"messages": [{"role": "user", "content": [{"type": "text", "text": "see ...[[p]]... here"}]}]}
    r = requests.post(srv.url + "/chat/completions", json=body, timeout=TIMEOUT)
    assert r.json()["choices"][0]["message"]["content"] == "planted"
    # several planted keys: first occurrence wins
    srv.plant("q", Behaviour.ok("q!"))
    body = {"messages": [{"role": "system", "content": "[[q]]"}, {"role": "user", "content": "[[p]]"}]}
    assert requests.post(srv.url + "/chat/completions", json=body).json()["choices"][0]["message"]["content"] == "q!"
    assert [r.key for r in srv.all_requests] == [None, "unplanted", "p", "q"]


def test_default_list(srv):
    srv.default = [Behaviour.server_error(503), Behaviour.ok()]
    assert [chat(srv, "x").status_code for _ in range(3)] == [503, 200, 200]
    assert chat(srv, "y").status_code == 503  # indexed per key


def test_recorded_request_fields(srv):
    before = time.monotonic()
    chat(srv, "k", stream=True, include_usage=True, headers={"Authorization": "Bearer sk-test"}).close()
    (rec,) = srv.requests("k")
    assert before <= rec.t <= time.monotonic()
    assert rec.method == "POST" and rec.path == "/v1/chat/completions" and rec.stream
    assert rec.headers["authorization"] == "Bearer sk-test" == rec.headers.get("AUTHORIZATION")
    assert "Content-Type" in rec.headers
    assert rec.body["stream_options"] == {"include_usage": True}
    assert rec.body["messages"][1]["content"] == "question [[k]]"
    assert json.loads(rec.raw) == rec.body


def test_other_endpoints_and_bad_json(srv):
    r = requests.get(srv.url + "/models", timeout=TIMEOUT)
    assert r.status_code == 200 and r.json()["data"][0]["id"] == "fake-model-1"
    assert requests.get(srv.base_url + "/health", timeout=TIMEOUT).json() == {"status": "ok"}
    assert requests.post(srv.url + "/embeddings", json={}, timeout=TIMEOUT).status_code == 404
    r = requests.post(srv.url + "/chat/completions", data=b"{not json", timeout=TIMEOUT,
                      headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
    assert len(srv.all_requests) == 4


# --------------------------------------------------------------------------- timing, sockets
def test_delay_ms_measured_by_client(srv):
    srv.default = Behaviour.ok("x", delay_ms=50)
    with requests.Session() as s:
        chat(srv, session=s)  # warm the connection
        samples = []
        for _ in range(5):
            t0 = time.perf_counter()
            r = chat(srv, session=s)
            samples.append(time.perf_counter() - t0)
            assert r.status_code == 200
    assert min(samples) >= 0.049
    assert statistics.median(samples) <= 0.070


def test_keep_alive_has_no_nagle_stall(srv):
    with requests.Session() as s:
        chat(srv, session=s)
        t0 = time.perf_counter()
        for _ in range(30):
            assert chat(srv, session=s).status_code == 200
        elapsed = time.perf_counter() - t0
    assert elapsed < 0.6  # a 40 ms delayed-ACK stall per request would take >1.2 s
    assert len({r.client for r in srv.all_requests}) == 1  # one keep-alive connection


def _raw_request(key="a", extra_headers=b""):
    body = json.dumps({"messages": [{"role": "user", "content": f"[[{key}]]"}]}).encode()
    return (b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            + extra_headers + b"Content-Length: %d\r\n\r\n" % len(body) + body)


def _read_response(s):
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += s.recv(65536)
    head, _, rest = buf.partition(b"\r\n\r\n")
    n = int(re.search(rb"(?i)content-length: (\d+)", head).group(1))
    while len(rest) < n:
        rest += s.recv(65536)
    return head, rest


def test_raw_socket_keep_alive_and_single_write(srv):
    with socket.create_connection(("127.0.0.1", srv.port), timeout=TIMEOUT) as s:
        for _ in range(3):
            s.sendall(_raw_request())
            first = s.recv(65536)  # a single sendall arrives as a single segment on loopback
            head, _, body = first.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200 OK\r\n")
            assert b"Connection: close" not in head
            n = int(re.search(rb"Content-Length: (\d+)", head).group(1))
            assert len(body) == n
            assert json.loads(body)["object"] == "chat.completion"
    assert srv.attempts("a") == 3


def test_raw_socket_connection_close(srv):
    with socket.create_connection(("127.0.0.1", srv.port), timeout=TIMEOUT) as s:
        s.sendall(_raw_request(extra_headers=b"Connection: close\r\n"))
        head, body = _read_response(s)
        assert b"Connection: close" in head
        assert s.recv(100) == b""  # server closed


def test_no_thread_leak_with_idle_keep_alive_connection():
    before = {t for t in threading.enumerate() if t.name.startswith("fake-openai")}
    s = requests.Session()
    with FakeOpenAI() as srv:
        chat(srv, session=s)  # leaves an idle keep-alive connection open
        assert any(t.name == "fake-openai-conn" for t in threading.enumerate())
    t0 = time.monotonic()
    while time.monotonic() - t0 < 2:
        now = {t for t in threading.enumerate() if t.name.startswith("fake-openai")}
        if now <= before:
            break
        time.sleep(0.01)
    assert now <= before
    s.close()


def test_serve_fixed_delay():
    srv = serve_fixed_delay(30, "pong")
    try:
        t0 = time.perf_counter()
        r = chat(srv)
        assert time.perf_counter() - t0 >= 0.029
        assert r.json()["choices"][0]["message"]["content"] == "pong"
    finally:
        srv.close()
    srv.close()  # idempotent


def test_cli_serves_with_delay():
    p = subprocess.Popen([sys.executable, "-m", "tests.support.fake_openai", "--port", "0", "--delay-ms", "50"],
                         cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = p.stdout.readline().strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1", url), url
        t0 = time.perf_counter()
        r = requests.post(url + "/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]},
                          timeout=TIMEOUT)
        assert time.perf_counter() - t0 >= 0.049
        assert r.status_code == 200 and r.json()["object"] == "chat.completion"
    finally:
        p.terminate()
        try:
            rc = p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait()
    assert rc == 0
    assert p.stderr.read() == ""
