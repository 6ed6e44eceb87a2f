"""RunConfig: everything one run needs, every default in one place."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .model import Lane, RetryPolicy
from .shard import ShardSpec


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
    endpoint_urls: tuple[tuple[str, str], ...] = ()  # --endpoint NAME=URL: a named endpoint's (a judge's) base URL for this run

    def __repr__(self) -> str:  # never show the key, even by accident
        return f"RunConfig(fixtures_dir={self.fixtures_dir!s}, lane={self.lane.value}, base_url={self.base_url})"
