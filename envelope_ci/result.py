"""What a run or a merge of shards produced (``api.run``, ``merging.merge``)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .model import ExitCode
from .report.model import Report


@dataclass(frozen=True)
class RunResult:
    """What a run (or a merge) produced: the typed report, the exit code, and the files written."""

    report: Report
    exit_code: ExitCode
    written: tuple[Path, ...] = ()
    pins_written: Path | None = None
