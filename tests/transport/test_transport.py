"""Pure unit tests of the envelope_ci.transport package's helpers: no sockets (test_live.py has those)."""
from __future__ import annotations

import email.utils
import io
import random
import threading
import time

import pytest

from envelope_ci.grading.envelope import transport_label
from envelope_ci.model import Envelope, RetryPolicy
from envelope_ci.providers.openai_chat import OPENAI_CHAT
from envelope_ci.secrets import Secrets
from envelope_ci.sources.recordings import envelope_to_raw
from envelope_ci.transport.http import ClientSettings
from envelope_ci.transport.pool import LiveOutcome
from envelope_ci.transport.progress import Progress
from envelope_ci.transport.reading import safe_headers
from envelope_ci.transport.retry import Budget, Throttle, backoff_s, is_quota_exhausted, retry_verdict
from envelope_ci.transport.retry_after import duration_s, rate_limit_reset_s, retry_after_s

NOW = 1_800_000_000.0


def http_date(ts: float) -> str:
    return email.utils.formatdate(ts, usegmt=True)


# --------------------------------------------------------------------------- retry_after_s
@pytest.mark.parametrize("headers, expected", [
    ({"Retry-After": "1"}, 1.0),
    ({"retry-after": "2.5"}, 2.5),
    ({"RETRY-AFTER": " 3 "}, 3.0),
    ({"retry-after-ms": "250"}, 0.25),
    ({"Retry-After-Ms": "1500"}, 1.5),
    ({"retry-after-ms": "400", "retry-after": "9"}, 0.4),  # ms wins, as openai-python does
    ({"retry-after-ms": "soon", "retry-after": "2"}, 2.0),  # garbage ms falls back to seconds
    ({"retry-after": "-1"}, 0.0),  # Azure sends -1: never a negative wait
    ({}, None),
    ({"x-ratelimit-reset-requests": "12ms"}, None),
    ({"retry-after": "later, please"}, None),
    ({"retry-after": ""}, None),
])
def test_retry_after_values(headers, expected):
    assert retry_after_s(headers, now=NOW) == expected


def test_retry_after_http_date():
    assert retry_after_s({"Retry-After": http_date(NOW + 30)}, now=NOW) == pytest.approx(30.0)
    assert retry_after_s({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, now=NOW) == 0.0  # in the past


def test_retry_after_http_date_with_minus_zero_zone_is_gmt():
    value = email.utils.formatdate(NOW + 12, usegmt=False).rsplit(" ", 1)[0] + " -0000"
    assert retry_after_s({"Retry-After": value}, now=NOW) == pytest.approx(12.0)


def test_retry_after_http_date_uses_the_clock_by_default():
    wait = retry_after_s({"Retry-After": http_date(time.time() + 60)})
    assert wait is not None and 58.0 <= wait <= 60.5


# --------------------------------------------------------------------------- rule 11: x-ratelimit-reset-*
@pytest.mark.parametrize("value, expected", [
    ("1s", 1.0), ("6m0s", 360.0), ("20ms", 0.02), ("1h2m3.5s", 3723.5), ("7.66s", 7.66), ("2m59.56s", 179.56),
    ("500us", 0.0005), ("0.5", 0.5), (" 3 ", 3.0), ("-1", 0.0),
    ("", None), ("soon", None), ("1x", None), ("1s2", None), ("1m-1s", None), (None, None),
])
def test_duration_s_reads_go_durations(value, expected):
    assert duration_s(value) == (pytest.approx(expected) if expected is not None else None)


@pytest.mark.parametrize("headers, expected", [
    # OpenAI's 429 on tokens: the requests limit is far from spent, its reset is not the one to wait for
    ({"x-ratelimit-remaining-requests": "199", "x-ratelimit-remaining-tokens": "0",
      "x-ratelimit-reset-requests": "300ms", "x-ratelimit-reset-tokens": "6ms"}, 0.006),
    ({"X-RateLimit-Remaining-Requests": "0", "X-RateLimit-Reset-Requests": "6m0s", "x-ratelimit-reset-tokens": "1s"}, 360.0),
    ({"x-ratelimit-reset-requests": "1s", "x-ratelimit-reset-tokens": "20ms"}, 1.0),  # which is spent unknown: the later
    ({"x-ratelimit-reset-tokens": "20ms"}, 0.02),
    ({"x-ratelimit-reset-requests": "whenever"}, None),
    ({"retry-after": "3"}, None),  # Retry-After is retry_after_s's business
    ({}, None),
])
def test_rate_limit_reset_s_waits_for_the_spent_limit(headers, expected):
    assert rate_limit_reset_s(headers) == (pytest.approx(expected) if expected is not None else None)


def test_throttle_bounds_the_runs_total_pause():
    throttle = Throttle(threading.Event(), max_wait_s=1.0)
    assert throttle.pause(0.4) and throttle.pause(0.2)  # overlapping: the run waits 0.4 s, not 0.6
    assert throttle.waited_s == pytest.approx(0.4, abs=0.01)
    assert throttle.pause(0.9)  # 0.5 s more than the pause already set
    assert throttle.waited_s == pytest.approx(0.9, abs=0.01)
    assert throttle.pause(1.5) is False and throttle.spent  # would pass the cap: refused, nothing added
    assert throttle.waited_s == pytest.approx(0.9, abs=0.01)
    assert throttle.pause(0.0) is False  # once spent, the run waits no more


def test_remarks_say_what_the_server_did():
    assert LiveOutcome({}).remarks() == []
    assert LiveOutcome({}, cut_streams=1).remarks() == []  # one cut is a hiccup
    (cut,) = LiveOutcome({}, cut_streams=3, concurrency=4).remarks()
    assert "cut 3 streamed response(s)" in cut and "try --concurrency 1" in cut
    (alone,) = LiveOutcome({}, cut_streams=3, concurrency=1).remarks()
    assert "--concurrency 1" not in alone and "proxy's timeout" in alone
    (waited,) = LiveOutcome({}, rate_limit_wait_s=12.34).remarks()
    assert "waited 12.3 s on 429s" in waited
    (spent,) = LiveOutcome({}, rate_limit_wait_s=600.0, rate_limit_spent=True).remarks()
    assert "--max-rate-limit-wait" in spent and "undelivered" in spent


# --------------------------------------------------------------------------- retry_verdict
def verdict(env: Envelope) -> tuple[bool, str]:
    return retry_verdict(env, transport_label(env))


def ok_body(content: str | None = "Hello", finish: str = "stop", **message) -> dict:
    return {"model": "m", "choices": [{"index": 0, "message": {"role": "assistant", "content": content, **message},
                                        "finish_reason": finish}]}


@pytest.mark.parametrize("env", [
    Envelope(error="ConnectionRefusedError: [Errno 111] Connection refused"),
    Envelope(error="ReadTimeout: no data within 1 s"),
    Envelope(http_status=429, body={"error": {"code": "rate_limit_exceeded"}}),
    Envelope(http_status=500, body={"error": {"message": "boom"}}),
    Envelope(http_status=502, body="<html>bad gateway</html>"),
    Envelope(http_status=503, body={"error": {"code": 503, "message": "Loading model"}}),
    Envelope(http_status=504, body=""),
    Envelope(http_status=408, body=""),
    Envelope(http_status=200, body={"model": "m", "choices": []}),  # empty
    Envelope(http_status=200, body=ok_body(None)),  # null content: empty
    Envelope(http_status=200, body="<html>sign in</html>"),  # not JSON: empty
    Envelope(http_status=200, body={"error": {"message": "mid-stream failure"}}),  # error in a 200
], ids=["refused", "timeout", "429", "500", "502", "503", "504", "408", "choices-empty", "null-content", "html-200",
        "error-200"])
def test_transport_failures_are_retried(env):
    assert verdict(env) == (True, "")


@pytest.mark.parametrize("env, why", [
    (Envelope(http_status=200, body=ok_body("Hello")), "never retried"),  # right
    (Envelope(http_status=200, body=ok_body("Goodbye")), "never retried"),  # wrong
    (Envelope(http_status=200, body=ok_body("Hel", "length")), "never retried"),  # truncated
    (Envelope(http_status=200, body=ok_body(None, tool_calls=[{"type": "function", "function": {"name": "f", "arguments": "{}"}}])), "never retried"),
    (Envelope(http_status=200, body=ok_body(None, refusal="I can't")), "never retried"),
    (Envelope(http_status=400, body={"error": {"code": "context_length_exceeded"}}), "HTTP 400"),
    (Envelope(http_status=401, body={"error": "Unauthorized"}), "HTTP 401"),
    (Envelope(http_status=403, body=""), "HTTP 403"),
    (Envelope(http_status=404, body=""), "HTTP 404"),
    (Envelope(http_status=422, body=""), "HTTP 422"),
    (Envelope(http_status=429, body={"error": {"type": "insufficient_quota", "code": None}}), "insufficient_quota"),
    (Envelope(http_status=503, headers={"x-should-retry": "false"}, body=""), "x-should-retry"),
    (Envelope(error="response larger than the cap of 1024 bytes: cut off"), "will not shrink"),
], ids=["right", "wrong", "truncated", "tool-call", "refusal", "400", "401", "403", "404", "422", "quota",
        "should-retry-false", "over-cap"])
def test_answers_and_permanent_failures_are_not_retried(env, why):
    retry, reason = verdict(env)
    assert retry is False
    assert why in reason


def test_is_quota_exhausted():
    assert is_quota_exhausted({"error": {"type": "insufficient_quota"}})
    assert is_quota_exhausted('{"error": "insufficient_quota"}')
    assert not is_quota_exhausted({"error": {"code": "rate_limit_exceeded"}})


# --------------------------------------------------------------------------- backoff_s
def test_backoff_bounds_grow_and_cap():
    policy = RetryPolicy(base_delay_s=0.5, max_delay_s=8.0)
    rng = random.Random(7)
    for attempt, ceiling in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (5, 8.0), (6, 8.0), (20, 8.0)]:
        waits = [backoff_s(attempt, policy, rng) for _ in range(300)]
        assert min(waits) >= 0.75 * ceiling - 1e-9
        assert max(waits) <= ceiling + 1e-9
        assert max(waits) - min(waits) > 0.1 * ceiling  # jittered, not constant


def test_backoff_is_reproducible_with_a_seed():
    policy = RetryPolicy()
    assert [backoff_s(2, policy, random.Random(3)) for _ in range(3)] == [backoff_s(2, policy, random.Random(3))] * 3


# --------------------------------------------------------------------------- Secrets, headers
def test_secrets_mask_every_occurrence_longest_first():
    s = Secrets(["sk-abcdef", "sk-abcdef-longer", None, "", "abc"])  # short values are not masked (too common)
    assert s.mask("key sk-abcdef-longer and sk-abcdef.") == "key *** and ***."
    assert s.mask("abc stays") == "abc stays"


def test_secrets_scrub_masks_nested_bodies_and_headers():
    s = Secrets(["sk-SECRET-1234"])
    body = {"error": {"message": "Incorrect API key provided: sk-SECRET-1234", "code": 401, "list": ["x sk-SECRET-1234"]}}
    assert s.scrub(body) == {"error": {"message": "Incorrect API key provided: ***", "code": 401, "list": ["x ***"]}}
    assert s.scrub("plain sk-SECRET-1234") == "plain ***"
    assert s.scrub(None) is None
    untouched = {"a": 1}
    assert Secrets([]).scrub(untouched) is untouched


def test_settings_repr_hides_the_key():
    settings = ClientSettings(base_url="http://h/v1", model="m", api_key="sk-SECRET-1234", extra_headers={"api-key": "hdr-SECRET"})
    assert "SECRET" not in repr(settings)


def test_safe_headers_lowercases_and_drops_secrets():
    got = safe_headers({"Content-Type": "application/json", "Set-Cookie": "s=1", "Authorization": "Bearer x",
                        "api-key": "k", "X-Request-Id": "r"})
    assert got == {"content-type": "application/json", "x-request-id": "r"}


# --------------------------------------------------------------------------- Budget, Throttle, Progress
def test_budget_is_shared_and_bounded():
    budget = Budget(3, "--retry-budget 3")
    assert [budget.take() for _ in range(5)] == [True, True, True, False, False]
    assert budget.refused == 2 and budget.spent() == "the run's retry budget of 3 is spent (--retry-budget 3)"
    assert Budget(0, "--retry-budget 0").take() is False


def test_the_default_retry_budget_scales_with_the_calls():
    assert Budget.for_run(RetryPolicy(), 40).total == 100  # never below the old fixed default
    sized = Budget.for_run(RetryPolicy(), 5000)
    assert sized.total == 2500 and "0.5 per call for 5000 call(s)" in sized.spent()
    assert Budget.for_run(RetryPolicy(run_budget=7), 5000).total == 7  # --retry-budget overrides


def test_remarks_say_the_budget_not_the_server_ended_retries():
    (note,) = LiveOutcome({}, budget_spent="the run's retry budget of 100 is spent (--retry-budget 100), and 9 failed attempt(s) got no retry").remarks()
    assert note.startswith("retries ended by the budget, not the server") and "9 failed attempt(s)" in note


def test_throttle_pauses_everyone_until_the_latest_deadline():
    stop = threading.Event()
    throttle = Throttle(stop)
    throttle.pause(0.15)
    throttle.pause(0.05)  # a shorter pause does not shorten the longer one
    t0 = time.monotonic()
    throttle.wait()
    assert 0.14 <= time.monotonic() - t0 < 0.6


def test_throttle_wait_returns_at_once_when_stopped():
    stop = threading.Event()
    throttle = Throttle(stop)
    throttle.pause(30)
    stop.set()
    t0 = time.monotonic()
    throttle.wait()
    assert time.monotonic() - t0 < 0.2


def test_progress_without_a_tty_prints_about_one_line_per_tenth():
    stream = io.StringIO()
    progress = Progress(200, stream=stream)
    for i in range(200):
        progress.tick("right" if i % 3 else "wrong")
    lines = stream.getvalue().splitlines()
    assert len(lines) == 10
    assert lines[-1].startswith("[200/200] right=133 wrong=67")
    assert "\r" not in stream.getvalue()


def test_progress_quiet_prints_nothing():
    stream = io.StringIO()
    progress = Progress(5, stream=stream, quiet=True)
    for _ in range(5):
        progress.tick("right")
    assert stream.getvalue() == "" and progress.done == 5


# --------------------------------------------------------------------------- recordings shape
def test_recorded_envelope_shape():
    env = Envelope(http_status=200, elapsed_ms=12.5, ttft_ms=3.0, headers={"x": "1"}, body={"a": 1}, attempts=2,
                   stream_complete=True)
    assert envelope_to_raw(env) == {"http_status": 200, "headers": {"x": "1"}, "body": {"a": 1}, "elapsed_ms": 12.5,
                                    "ttft_ms": 3.0, "stream_complete": True, "attempts": 2, "provider": "openai-chat"}
    assert envelope_to_raw(Envelope(error="refused", elapsed_ms=1.0)) == {"error": "refused", "elapsed_ms": 1.0, "attempts": 1,
                                                                           "provider": "openai-chat"}



def test_a_client_reads_the_proxy_environment_once_and_keeps_it(monkeypatch):
    """requests would read the environment again for every request; the client reads it at the start, to the same effect."""
    from envelope_ci.transport.http import Client
    from envelope_ci.transport.watchdog import Watchdog

    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "internal.example")
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/etc/ssl/custom.pem")
    watchdog = Watchdog()
    try:
        proxied = Client(OPENAI_CHAT, ClientSettings(base_url="https://api.example/v1", model="m"), Secrets([]), watchdog)
        direct = Client(OPENAI_CHAT, ClientSettings(base_url="https://internal.example/v1", model="m"), Secrets([]), watchdog)
        assert proxied.session.proxies.get("https") == "http://proxy.example:3128" and not direct.session.proxies
        assert proxied.session.verify == "/etc/ssl/custom.pem" and not proxied.session.trust_env
        monkeypatch.setenv("HTTPS_PROXY", "http://elsewhere.example:3128")  # read once: a run's requests all go the same way
        assert proxied.session.proxies.get("https") == "http://proxy.example:3128"
    finally:
        watchdog.close()


class _Elsewhere(type(OPENAI_CHAT)):  # type: ignore[misc]
    """A plug-in-like provider whose URL leaves the base URL's host."""

    name = "elsewhere"

    def url(self, base_url: str) -> str:
        return "https://collector.example/v1/chat/completions"


def test_a_provider_that_posts_away_from_the_base_url_host_is_refused_before_any_request(srv) -> None:
    from envelope_ci.errors import UsageError
    from envelope_ci.transport.pool import run_live
    from tests.support.suites import make_case

    settings = ClientSettings(base_url=srv.url, model="m", api_key="sk-elsewhere-key")
    with pytest.raises(UsageError, match="collector.example") as refused:
        run_live([make_case(id="a", must_include=["hi"])], settings, provider=_Elsewhere())
    assert "127.0.0.1" in str(refused.value) and srv.all_requests == []
