"""The token-bucket test server itself: OpenAI's request-limit headers on every answer, a 429 when it is empty."""
from __future__ import annotations

import pytest
import requests

from envelope_ci.transport.retry_after import duration_s
from tests.support.token_bucket import TokenBucket, serve_token_bucket


def post(url: str) -> requests.Response:
    body = {"model": "m", "messages": [{"role": "user", "content": "Say ok"}]}
    return requests.post(f"{url}/chat/completions", json=body, timeout=10)


def test_the_bucket_states_its_limit_and_refuses_when_empty():
    """3 at once refilling one a minute: three answers counting down, then a 429 saying when the next token comes."""
    bucket = TokenBucket(rpm=1, burst=3, minute_s=60.0)
    with serve_token_bucket(bucket) as srv:
        answers = [post(srv.url) for _ in range(4)]
        assert srv.errors == []
    assert [a.status_code for a in answers] == [200, 200, 200, 429]
    assert all(a.json()["choices"][0]["message"]["content"] == "ok" for a in answers[:3])
    assert [a.headers["x-ratelimit-limit-requests"] for a in answers] == ["3"] * 4
    assert [a.headers["x-ratelimit-remaining-requests"] for a in answers] == ["2", "1", "0", "0"]
    # The reset is the time until the bucket is full again (OpenAI's meaning): one, two, then three minutes' refill.
    resets = [duration_s(a.headers["x-ratelimit-reset-requests"]) for a in answers]
    assert resets[:3] == [pytest.approx(60.0 * n, abs=0.5) for n in (1, 2, 3)]
    assert 58 <= int(answers[3].headers["Retry-After"]) <= 60  # whole seconds, rounded up
    assert bucket.counts == {"answered": 3, "refused": 1}


def test_the_bucket_refills_at_its_rate():
    bucket = TokenBucket(rpm=600, burst=1, minute_s=60.0)  # one every 100 ms
    with serve_token_bucket(bucket) as srv:
        assert post(srv.url).status_code == 200
        assert post(srv.url).status_code == 429
        refused = srv.all_requests[-1].t
        answered = next(i for i in range(10_000) if post(srv.url).status_code == 200)
        taken = srv.all_requests[-1].t
    assert answered > 0 and 0.05 <= taken - refused <= 2.0
