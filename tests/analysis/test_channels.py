"""Channels: size and time against pins with slack, the max_chars budget, the order of channels."""
from __future__ import annotations

import pytest

from envelope_ci.analysis.channels import Measure, channel_for, size_breaches, time_breaches, time_limit_ms
from envelope_ci.model import Channel, Fingerprint, Label, Pin, Thresholds

pytestmark = pytest.mark.usefixtures("clean_env")

T = Thresholds()
FP = Fingerprint("adjudication", "unspecified", "gpt-4o-mini-2024-07-18", 0.0, "1")


def pin(chars=100, tokens=20, ms=400.0, estimated=False, label="right", channel="stable") -> Pin:
    return Pin("sha256:x", label, channel, chars, tokens, estimated, ms, ms, FP)


def measure(chars=100, tokens=20, ms=400.0, estimated=False) -> Measure:
    return Measure(chars, tokens, estimated, ms, ms)


def test_channel_enum_values():
    assert [c.value for c in Channel] == ["transport", "truncated", "schema", "correctness", "size", "time", "stable"]
    for c in Channel:
        assert Channel(c.value) is c


def test_default_thresholds_are_the_methods():
    assert (T.size_slack, T.time_slack) == (1.10, 1.15)
    assert T.time_floor_ms > 8  # 40 ms -> 48 ms must not be a regression


# -- size ------------------------------------------------------------------------------------

@pytest.mark.parametrize("chars,breached", [(100, False), (110, False), (111, True), (200, True), (50, False)])
def test_size_slack_on_chars(chars, breached):
    found = size_breaches(measure(chars=chars, tokens=20), None, pin(chars=100, tokens=20), T)
    assert bool(found) is breached
    if breached:
        assert found == [f"size: {chars} chars > pin 100 x1.1"]


@pytest.mark.parametrize("tokens,breached", [(20, False), (22, False), (23, True)])
def test_size_slack_on_real_tokens(tokens, breached):
    found = size_breaches(measure(chars=100, tokens=tokens), None, pin(chars=100, tokens=20), T)
    assert bool(found) is breached
    if breached:
        assert found == [f"size: {tokens} tokens > pin 20 x1.1"]


@pytest.mark.parametrize("now_estimated,pin_estimated", [(True, False), (False, True), (True, True)])
def test_estimated_tokens_are_not_compared(now_estimated, pin_estimated):
    found = size_breaches(measure(chars=100, tokens=40, estimated=now_estimated), None, pin(chars=100, tokens=20, estimated=pin_estimated), T)
    assert found == []


def test_max_chars_budget_with_and_without_pin():
    assert size_breaches(measure(chars=161), 160, None, T) == ["size: 161 chars > max_chars 160"]
    assert size_breaches(measure(chars=160), 160, None, T) == []
    both = size_breaches(measure(chars=300, tokens=20), 160, pin(chars=100), T)
    assert both == ["size: 300 chars > max_chars 160", "size: 300 chars > pin 100 x1.1"]


def test_custom_size_slack():
    assert size_breaches(measure(chars=140), None, pin(chars=100), Thresholds(size_slack=1.5)) == []
    assert size_breaches(measure(chars=151), None, pin(chars=100), Thresholds(size_slack=1.5)) != []


def test_size_with_missing_values():
    assert size_breaches(measure(chars=None), 10, pin(chars=1), T) == []
    assert size_breaches(measure(chars=500), None, pin(chars=None, tokens=None), T) == []


# -- time ------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "pinned,now,breached",
    [
        (40.0, 48.0, False),  # the absolute floor: 40 -> 48 ms is noise
        (40.0, 60.0, False),
        (400.0, 460.0, False),  # exactly x1.15 is allowed
        (400.0, 461.0, True),
        (400.0, 500.0, True),
        (1000.0, 1100.0, False),
        (1000.0, 1200.0, True),
    ],
)
def test_time_slack_and_floor(pinned, now, breached):
    found = time_breaches(measure(ms=now), pin(ms=pinned), T)
    assert bool(found) is breached
    if breached:
        assert found[0].startswith(f"time: {now:.1f} ms > ")


def test_time_limit_is_relative_slack_never_tighter_than_the_floor():
    assert time_limit_ms(400.0, T) == pytest.approx(460.0)
    assert time_limit_ms(40.0, T) == pytest.approx(40.0 + T.time_floor_ms)
    assert time_limit_ms(40.0, T) >= 48.0
    assert time_limit_ms(100.0, Thresholds(time_floor_ms=0.0)) == pytest.approx(115.0)


def test_time_needs_both_values():
    assert time_breaches(measure(ms=None), pin(ms=40.0), T) == []
    assert time_breaches(measure(ms=9999.0), pin(ms=None), T) == []
    assert time_breaches(measure(ms=9999.0), None, T) == []


# -- the one channel -------------------------------------------------------------------------

@pytest.mark.parametrize(
    "label,channel",
    [
        (Label.DROP, Channel.TRANSPORT),
        (Label.EMPTY, Channel.TRANSPORT),
        (Label.TRUNCATED, Channel.TRUNCATED),
        (Label.SCHEMA, Channel.SCHEMA),
        (Label.WRONG, Channel.CORRECTNESS),
        (Label.RIGHT, Channel.STABLE),
    ],
)
def test_label_channels(label, channel):
    assert channel_for(label, measure(), None, pin(), True, T)[0] is channel


def test_channel_order_wrong_beats_size_and_time():
    channel, reasons = channel_for(Label.WRONG, measure(chars=500, ms=900.0), 160, pin(), True, T)
    assert channel is Channel.CORRECTNESS
    assert any(r.startswith("size:") for r in reasons) and any(r.startswith("time:") for r in reasons)


def test_channel_order_size_beats_time():
    channel, reasons = channel_for(Label.RIGHT, measure(chars=500, ms=900.0), None, pin(), True, T)
    assert channel is Channel.SIZE
    assert [r.split(":")[0] for r in reasons] == ["size", "time"]
    channel, reasons = channel_for(Label.RIGHT, measure(chars=100, ms=900.0), None, pin(), True, T)
    assert channel is Channel.TIME
    assert len(reasons) == 1


def test_stable_has_no_reasons():
    assert channel_for(Label.RIGHT, measure(chars=105, tokens=21, ms=420.0), 160, pin(), True, T) == (Channel.STABLE, [])
    assert channel_for(Label.RIGHT, measure(), None, None, False, T) == (Channel.STABLE, [])


def test_mismatched_fingerprint_skips_pin_but_keeps_max_chars():
    big_slow = measure(chars=500, tokens=200, ms=5000.0)
    assert channel_for(Label.RIGHT, big_slow, None, pin(), False, T) == (Channel.STABLE, [])
    channel, reasons = channel_for(Label.RIGHT, big_slow, 400, pin(), False, T)
    assert channel is Channel.SIZE
    assert reasons == ["size: 500 chars > max_chars 400"]
