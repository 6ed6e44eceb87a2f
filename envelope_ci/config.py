"""RunConfig: everything one run needs, every default in one place."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .model import CONFIG_NAMES, DEFAULT_PROVIDER, PINS_NAME, Lane, RetryPolicy
from .shard import ShardSpec
from .sources.files import is_hidden, is_read

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
    provider: str = DEFAULT_PROVIDER  # --provider: the endpoint's wire format (providers.registry)
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


def pins_read_next_time(config: RunConfig) -> str | None:
    """Why ``--write-pins`` may not write ``--pins`` where it points: into the fixtures directory, under a name a run
    without this ``--pins`` (or ``envelope-ci hash``) would read as a fixture, or as the settings it would replace."""
    root, pins = config.fixtures_dir.resolve(), config.pins_path.resolve()
    if not config.write_pins or not pins.is_relative_to(root) or is_hidden(pins.relative_to(root)):
        return None
    read_as = "the settings" if pins.name in CONFIG_NAMES and pins.parent == root else "a fixture"
    if read_as == "a fixture" and not is_read(pins.name):
        return None
    return (f"--pins {config.pins_path.as_posix()} is inside the fixtures directory {config.fixtures_dir.as_posix()}: "
            f"a run without this --pins would read the pins written there as {read_as}; "
            f"name them {PINS_NAME}, or write them outside the fixtures directory")
