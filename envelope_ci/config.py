"""RunConfig: everything one run needs, every default in one place."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .model import Lane, RetryPolicy
from .shard import ShardSpec

# How every report says a run's time was up: the next steps tell such cases from undelivered ones by it.
OUT_OF_TIME = "the run reached --max-run-time"


def out_of_time(limit_s: float) -> str:
    """``the run reached --max-run-time (N s)``: one wording for the live pool, the supervisor and the partial
    reports."""
    return f"{OUT_OF_TIME} ({limit_s:g} s)"


# Live calls in flight when --max-run-time is reached get this long to finish (the pool's grace, the supervisor's wait).
LIVE_GRACE_S = 5.0


@dataclass(frozen=True)
class RunConfig:
    """Everything one run needs, resolved from flags and environment by the CLI."""

    fixtures_dir: Path
    pins_path: Path
    out_dir: Path
    lane: Lane = Lane.SMOKE
    endpoint_class: str = "unspecified"
    temperature: float = 0.0
    base_url: str | None = None
    model: str | None = None
    api_key: str | None = None
    concurrency: int = 4
    repeats: int = 1
    stream: bool = False
    timeout_s: float = 120.0
    max_run_time_s: float | None = None  # --max-run-time: the whole run's deadline (partial reports, exit 3)
    retry: RetryPolicy = RetryPolicy()
    record: Path | None = None
    replay: Path | None = None
    config_path: Path | None = None
    write_pins: bool = False
    move_baseline: bool = False
    in_ci: bool = False
    quiet: bool = False
    formats: tuple[str, ...] = ()  # report formats written besides report.json, report.md and junit.xml
    filters: tuple[str, ...] = ()  # --filter: grade only the cases any of these select (a partial run)
    shard: ShardSpec | None = None  # --shard I/N: grade one part of the suite; envelope-ci merge judges the whole
    # --endpoint NAME=URL: a named endpoint's (a judge's) base URL for this run
    endpoint_urls: tuple[tuple[str, str], ...] = ()
    # --allow-key-env NAME: variables envelope-ci.yaml may send (a judge's api_key_env, ${NAME} in headers)
    allow_key_env: tuple[str, ...] = ()
    # --allow-unverified-recordings: --write-pins may pin recordings without a request record (the re-pinner vouches)
    allow_unverified_recordings: bool = False

    def __repr__(self) -> str:  # never show the key, even by accident
        return f"RunConfig(fixtures_dir={self.fixtures_dir!s}, lane={self.lane.value}, base_url={self.base_url})"
