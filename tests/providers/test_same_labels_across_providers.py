"""The same answers give the same labels through every built-in wire format, live and replayed."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.fake_anthropic import FakeAnthropic
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_responses import FakeResponses
from tests.support.provider_suites import LABELS, STREAM_ONLY, live_labels, replayed_labels

SERVERS = {"openai-chat": FakeOpenAI, "anthropic-messages": FakeAnthropic, "openai-responses": FakeResponses}


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("provider", sorted(SERVERS))
def test_each_provider_labels_the_same_answers_alike_and_its_recording_replays_alike(tmp_path: Path, provider: str,
                                                                                     stream: bool) -> None:
    table = LABELS + (STREAM_ONLY if stream else ())
    with SERVERS[provider]() as fake:
        labels, report = live_labels(tmp_path, fake, provider, *(("--stream",) if stream else ()), table=table)
        assert fake.errors == []
    assert labels == {case_id: label for case_id, _, label in table}
    assert report["fingerprint"].get("provider", "openai-chat") == provider
    assert replayed_labels(tmp_path, table) == labels  # offline, read with the provider named on each line
