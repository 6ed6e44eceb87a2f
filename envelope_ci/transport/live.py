"""The entry point the runner plugs in: a live run with signals handled and progress shown."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from ..model import Case, RetryPolicy
from ..providers.base import Provider
from ..providers.openai_chat import OPENAI_CHAT
from .http import ClientSettings
from .interrupts import STOP, Interrupts
from .pool import LiveOutcome, run_live
from .progress import Progress


def fetch_envelopes(
    cases: Sequence[Case],
    settings: ClientSettings,
    *,
    concurrency: int,
    repeats: int,
    policy: RetryPolicy,
    record: Path | None,
    quiet: bool,
    provider: Provider = OPENAI_CHAT,
    max_run_s: float | None = None,
    started_at: float | None = None,
    judges: Mapping[str, ClientSettings] | None = None,
    record_headers: Sequence[str] = (),
) -> LiveOutcome:
    """Every case's grades from the endpoint, as the CLI wants them: Ctrl-C or --max-run-time ends the run politely,
    progress goes to stderr."""
    stop = STOP  # set already if a signal came while the fixtures were loading: nothing is sent then
    progress = Progress(len(cases) * repeats, quiet=quiet)
    with Interrupts(stop):
        return run_live(cases, settings, provider=provider, concurrency=concurrency, repeats=repeats, policy=policy,
                        record=record, progress=progress, stop=stop, max_run_s=max_run_s, started_at=started_at,
                        judges=judges, record_headers=record_headers)
