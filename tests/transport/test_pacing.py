"""Pacing to a request limit's refill rate: the x-ratelimit-*-requests headers read as OpenAI means them.

The pacer is tested alone with a fake clock; the live tests run ``run_live`` against a token bucket
on 127.0.0.1 (``tests/support/token_bucket.py``) small and fast enough for a unit test, and assert
what the server saw (its 429s, the gaps between the requests it took), never a run's wall time.
"""
from __future__ import annotations

import itertools
import threading
from typing import Any

import pytest

from envelope_ci.model import Case, RetryPolicy
from envelope_ci.providers.anthropic_messages import ANTHROPIC_MESSAGES
from envelope_ci.providers.openai_chat import OPENAI_CHAT
from envelope_ci.providers.openai_responses import OPENAI_RESPONSES
from envelope_ci.transport.adaptive import Pacer
from envelope_ci.transport.http import ClientSettings, tokens_charged
from envelope_ci.transport.pool import LiveOutcome, run_live
from envelope_ci.transport.retry import Throttle
from envelope_ci.transport.retry_after import (
    RateLimit,
    rate_limit,
    rate_limit_reset_s,
    spent_limit_reset_s,
    unpaced_kinds,
)
from tests.support.token_bucket import TokenBucket, serve_token_bucket


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def pacer(max_wait_s: float = 60.0) -> tuple[Pacer, Clock]:
    clock = Clock()
    return Pacer(max_wait_s, clock), clock


# --------------------------------------------------------------------------- the headers
@pytest.mark.parametrize("headers, expected", [
    ({"x-ratelimit-limit-requests": "120", "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1m0s"},
     RateLimit(120, 0, 60.0)),
    ({"X-RateLimit-Limit-Requests": "60", "X-RateLimit-Remaining-Requests": "59", "X-RateLimit-Reset-Requests": "1s"},
     RateLimit(60, 59, 1.0)),
    ({"x-ratelimit-limit-requests": "10", "x-ratelimit-remaining-requests": "3", "x-ratelimit-reset-requests": "500ms"},
     RateLimit(10, 3, 0.5)),
    ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1s"}, None),  # no size: no rate
    ({"x-ratelimit-limit-requests": "0", "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1s"},
     None),
    ({"x-ratelimit-limit-requests": "inf", "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1s"},
     None),
    ({"x-ratelimit-limit-requests": "10", "x-ratelimit-remaining-requests": "5", "x-ratelimit-reset-requests": "soon"},
     None),
])
def test_a_request_limit_is_read_from_its_three_headers(headers, expected):
    assert rate_limit(headers) == expected


def test_the_refill_rate_is_what_the_limit_lacks_over_its_time_to_full():
    assert RateLimit(120, 0, 60.0).refill_per_s == 2.0
    assert RateLimit(100, 40, 30.0).refill_per_s == 2.0
    assert RateLimit(100, 100, 0.0).refill_per_s is None  # full: says nothing of its rate
    assert RateLimit(120, 0, 60.0).next_in_s == 0.5  # one request's refill, not the minute until full
    assert RateLimit(120, 7, 56.5).next_in_s == 0.0


def test_a_429_without_retry_after_waits_for_one_request_to_refill_not_for_the_limit_to_fill():
    spent = {"x-ratelimit-limit-requests": "120", "x-ratelimit-remaining-requests": "0",
             "x-ratelimit-reset-requests": "1m0s"}
    assert rate_limit_reset_s(spent) == 0.5
    del spent["x-ratelimit-limit-requests"]  # without the size, the reset is all there is
    assert rate_limit_reset_s(spent) == 60.0


def test_an_answer_holds_only_for_the_limits_the_pacer_cannot_space_to():
    headers = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "30s",
               "x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "2s"}
    assert spent_limit_reset_s(headers) == 30.0
    assert spent_limit_reset_s(headers, ("tokens",)) == 2.0


# --------------------------------------------------------------------------- the pacer, on a fake clock
def test_nothing_is_held_until_an_answer_states_the_limit():
    pace, _ = pacer()
    assert [pace.admit()[1] for _ in range(50)] == [0.0] * 50
    assert pace.held == 0


def test_a_spent_limit_spaces_the_starts_at_its_refill_rate():
    pace, _ = pacer()
    start, _ = pace.admit()
    pace.observe(start, RateLimit(120, 0, 60.0))  # 2 a second
    assert [pace.admit()[1] for _ in range(4)] == [1.0, 1.5, 2.0, 2.5]  # one kept in hand: a refill later, then 0.5 s apart
    assert pace.held == 4 and pace.held_s == 2.5  # the waits overlap: the run was held 2.5 s, not 7


def test_the_starts_the_server_had_not_counted_are_taken_from_what_it_says_is_left():
    pace, _ = pacer()
    first, _ = pace.admit()
    for _ in range(3):  # three more sent before the first one's answer came
        pace.admit()
    pace.observe(first, RateLimit(120, 5, 57.5))  # 5 left as the server counted the first: 2 after the three
    assert pace.admit()[1] == 0.0
    assert pace.admit()[1] == 0.5  # the last one is kept in hand


def test_time_refills_the_mirror_up_to_the_limit():
    pace, clock = pacer()
    start, _ = pace.admit()
    pace.observe(start, RateLimit(10, 0, 5.0))  # 2 a second, 10 at most
    clock.now += 1.75
    assert [pace.admit()[1] for _ in range(3)] == [0.0, 0.0, 0.25]  # 3.5 refilled: two at once and one in hand
    clock.now += 3600
    assert [pace.admit()[1] for _ in range(9)] == [0.0] * 9
    assert pace.admit()[1] == 0.5  # never more than the limit's size at once


def test_an_answer_older_than_the_last_does_not_set_the_mirror():
    pace, _ = pacer()
    old, _ = pace.admit()
    new, _ = pace.admit()
    pace.observe(new, RateLimit(120, 0, 60.0))
    pace.observe(old, RateLimit(120, 100, 10.0))  # stale: it says there was room before the newer answer
    assert pace.admit()[1] > 0


def test_a_wait_longer_than_max_retry_after_is_not_taken():
    pace, _ = pacer(max_wait_s=3.0)
    start, _ = pace.admit()
    pace.observe(start, RateLimit(100, 0, 1000.0))  # one request every 10 s
    assert pace.admit()[1] == 0.0  # sent at once: the server refuses it, and the 429's Retry-After decides
    assert pace.held == 0


def test_a_spent_token_limit_spaces_the_starts_by_their_tokens():
    pace, _ = pacer()
    start, _ = pace.admit(20.0)
    pace.observe(start, None, RateLimit(600, 0, 60.0))  # 10 tokens a second
    waits = [pace.admit(20.0)[1] for _ in range(3)]
    assert waits == [4.0, 6.0, 8.0]  # one such start kept in hand, then 20 tokens' refill (2 s) apart
    assert [pace.admit(5.0)[1] for _ in range(2)] == [7.0, 7.5]  # a smaller one: its own 5 and 5 in hand, 0.5 s apart


def test_the_slower_of_the_request_and_token_limits_sets_the_wait():
    pace, _ = pacer()
    start, _ = pace.admit(100.0)
    pace.observe(start, RateLimit(120, 0, 60.0), RateLimit(100_000, 99_000, 0.6))  # 2 requests a second; tokens plenty
    assert pace.admit(100.0)[1] == 1.0  # the request limit's wait
    start, _ = pace.admit(100.0)
    pace.observe(start, RateLimit(120, 100, 10.0), RateLimit(1000, 0, 1.0))  # requests plenty; 1000 tokens a second
    assert pace.admit(300.0)[1] == 0.7  # the token limit's: its 300, 300 in hand and the open start's 100, at 1000/s


def test_a_start_larger_than_the_token_limit_is_not_paced_to_it_nor_counted():
    pace, _ = pacer()
    start, _ = pace.admit(50.0)
    pace.observe(start, None, RateLimit(100, 0, 10.0))  # 10 tokens a second, 100 at most
    assert [pace.admit(500.0)[1] for _ in range(8)] == [0.0] * 8  # it goes: the server's answer decides
    assert pace.admit(20.0)[1] == 4.0  # and the eight open ones took nothing from the mirror: 40 tokens' refill


def test_starts_larger_than_the_limit_sent_before_it_was_known_are_not_counted_once_it_is():
    pace, _ = pacer()
    first, _ = pace.admit(50.0)
    for _ in range(4):
        pace.admit(500.0)  # sent before any answer stated the limit
    pace.observe(first, None, RateLimit(100, 0, 10.0))  # 100 at most: those four cannot be paced to it
    assert pace.admit(20.0)[1] == 4.0  # 40 tokens' refill, as if they were not open


def test_without_a_token_estimate_or_a_stated_token_limit_tokens_hold_nothing():
    pace, _ = pacer()
    start, _ = pace.admit()
    pace.observe(start, None, RateLimit(600, 0, 60.0))
    assert pace.admit()[1] == 0.0  # a start that says no tokens
    fresh, _ = pacer()
    assert [fresh.admit(1e6)[1] for _ in range(3)] == [0.0] * 3  # no answer stated a token limit yet


def test_a_limit_stated_whole_is_paced_and_only_the_others_hold_the_run():
    tokens = {"x-ratelimit-limit-tokens": "1000", "x-ratelimit-remaining-tokens": "0",
              "x-ratelimit-reset-tokens": "1s"}
    requests = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "30s"}
    assert unpaced_kinds({**tokens, **requests}) == ("requests",)  # no size: its reset is all there is
    assert spent_limit_reset_s({**tokens, **requests}, unpaced_kinds({**tokens, **requests})) == 30.0
    assert unpaced_kinds(tokens) == ("requests",) and spent_limit_reset_s(tokens, unpaced_kinds(tokens)) is None


def test_each_endpoint_is_paced_to_its_own_limit():
    throttle = Throttle(threading.Event())
    model, start = throttle.turn(("http://model", "m"), 0.0)
    model.observe(start, RateLimit(100, 0, 20.0))  # spent: one request every 0.2 s, one kept in hand
    judge, _ = throttle.turn(("http://judge", "j"), 0.0)
    assert judge is not model and throttle.spaced()[0] == 0  # the judge's server has its own limit
    assert throttle.turn(("http://model", "m"), 0.0)[0] is model and throttle.spaced()[0] == 1


# --------------------------------------------------------------------------- live, against a token bucket
def cases(n: int, **request: Any) -> list[Case]:
    return [Case(id=f"b{i}", stratum=None, messages=({"role": "user", "content": f"Say ok [[b{i:02d}]]"},), file="t",
                 line=None, digest="", request=request) for i in range(n)]


def bucket_run(bucket: TokenBucket, n: int, concurrency: int, policy: RetryPolicy | None = None, **request: Any
               ) -> tuple[LiveOutcome, list[float]]:
    """The run's outcome and the arrival times of the requests the bucket let through."""
    with serve_token_bucket(bucket) as srv:
        out = run_live(cases(n, **request), ClientSettings(base_url=srv.url, model="m"), concurrency=concurrency,
                       policy=policy or RetryPolicy())
    taken = [r.t for r in srv.all_requests if r.behaviour is not None and r.behaviour.status_code == 200]
    assert srv.errors == []
    return out, sorted(taken)


def test_a_run_past_the_bucket_is_paced_to_its_refill_not_held_until_it_is_full():
    """20 at once refilling 5 a second, 40 cases: the 20 past the burst are spaced to the refill, not held 4 s.

    A rare 429 (the pacer keeps one request in hand, the bucket counts on arrival) holds the run for its
    ``Retry-After`` of 1 s, after which the refilled starts go together: so what is asserted is what the
    server refused, how many starts the pacer spaced, and that no gap came near holding until full.
    """
    bucket = TokenBucket(rpm=300, burst=20, minute_s=60.0)
    out, taken = bucket_run(bucket, 40, 8)
    assert [g.label.value for c in out.grades.values() for g in c] == ["right"] * 40
    assert bucket.counts["refused"] <= 4, bucket.counts  # unpaced, 8 workers meet a bucket refilling one a 200 ms
    gaps = [b - a for a, b in itertools.pairwise(taken)]
    assert max(gaps) < 2.5, max(gaps)  # no hold until the bucket is full again (4 s)
    assert out.spaced >= 10 and any("paced to the server's rate limits" in r for r in out.remarks())


def test_a_request_is_charged_its_prompt_and_the_most_its_provider_asks_for():
    """Characters / 4 of the messages, and max_tokens as the wire format spells it: Anthropic's default when the case
    sets none, the Responses API's max_output_tokens; a float counts, nothing asked adds nothing."""
    asked, bare = cases(1, max_tokens=100)[0], cases(1)[0]  # "Say ok [[b00]]": 14 characters, 4 tokens
    assert tokens_charged(asked, OPENAI_CHAT.request_body(asked, "m", 0.0, False)) == 104.0
    assert tokens_charged(bare, OPENAI_CHAT.request_body(bare, "m", 0.0, False)) == 4.0
    assert tokens_charged(bare, ANTHROPIC_MESSAGES.request_body(bare, "m", 0.0, False)) == 4.0 + 4096
    assert tokens_charged(asked, OPENAI_RESPONSES.request_body(asked, "m", 0.0, False)) == 104.0
    assert tokens_charged(bare, {"max_tokens": 512.0}) == 516.0 and tokens_charged(bare, {"max_tokens": True}) == 4.0


def test_a_run_past_a_token_limit_is_paced_to_its_token_refill():
    """Requests plenty, tokens not: 1000 at once refilling 1000 a second, each request charged its prompt and its
    max_tokens as the run reckons it (104): the 21 past the burst are spaced, not sent into 429s."""
    sample = cases(1, max_tokens=100)[0]
    charged = tokens_charged(sample, OPENAI_CHAT.request_body(sample, "m", 0.0, False))
    bucket = TokenBucket(rpm=6000, minute_s=60.0, tpm=60_000, token_burst=1000, token_cost=int(charged))
    out, taken = bucket_run(bucket, 30, 8, max_tokens=100)
    assert [g.label.value for c in out.grades.values() for g in c] == ["right"] * 30
    assert bucket.counts["refused"] <= 4, bucket.counts  # unpaced: 13 of 30 refused
    assert out.spaced >= 10 and any("paced to the server's rate limits" in r for r in out.remarks())
    assert max(b - a for a, b in itertools.pairwise(taken)) < 1.0  # no hold until the limit is full again


def test_pacing_to_the_refill_is_not_waiting_on_rate_limits():
    """--max-rate-limit-wait bounds waiting on refusals; a run going as fast as the bucket refills is not refused."""
    bucket = TokenBucket(rpm=600, burst=10, minute_s=60.0)
    out, _ = bucket_run(bucket, 40, 4, RetryPolicy(max_rate_limit_wait_s=2.0))
    assert [g.label.value for c in out.grades.values() for g in c] == ["right"] * 40
    assert not out.rate_limit_spent and out.rate_limit_wait_s <= 2.0
    assert out.spaced_s > 2.0  # 30 past the burst at 10 a second: had it counted, the run would have stopped

