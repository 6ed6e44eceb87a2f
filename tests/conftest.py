"""The fixtures every test module may ask for, and the one Hypothesis profile.

Plain helpers (response bodies, suites on disk, the CLI in-process and as a subprocess) are in
``tests/support/suites.py``; the servers the fixtures start are in ``tests/support/``.
"""
from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from tests.support.fake_openai import FakeOpenAI
from tests.support.github_stub import GitHubStub
from tests.support.suites import ENV_VARS

# Every property test sees the same examples on every run, CI's included, and none is kept between runs
# (no example database). A test sets only what differs, most often ``@settings(max_examples=N)``.
settings.register_profile(
    "envelope-ci",
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("envelope-ci")


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No CI/GITHUB_ACTIONS/EVAL_* in the environment, whatever the ambient values."""
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.fixture
def srv(request: pytest.FixtureRequest) -> Iterator[FakeOpenAI]:
    """The fake OpenAI-compatible server on 127.0.0.1, answering "Hello!" unless a test plants otherwise.

    It must end without an internal error. Another configuration goes through indirect parametrization,
    as ``FakeOpenAI``'s keyword arguments::

        @pytest.mark.parametrize("srv", [{"chaos": Chaos(rpm=60)}], indirect=True)
    """
    with FakeOpenAI(**getattr(request, "param", {})) as server:
        yield server
    assert server.errors == []


@pytest.fixture
def stub() -> Iterator[GitHubStub]:
    """The GitHub API stand-in on 127.0.0.1, for the repository ``octo-org/widgets``."""
    with GitHubStub() as server:
        yield server


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A local port that nothing should connect to: anything that does has tried to fetch (``suites.connected``)."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.setblocking(False)
        yield server
