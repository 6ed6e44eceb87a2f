"""``merge``: every shard's report of one run judged as the whole run (``envelope-ci merge``; ``api.merge`` is this).

Apart from ``api`` so that a merge loads none of what only a run needs (fixture loading and
its schemas, the recordings, the transport).
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .analysis.analyse import conclude
from .formats.registry import write_reports
from .model import VERDICT_EXIT
from .report.build import merged_report
from .report.notes import run_notes
from .report.read_shards import read_shards, read_texts
from .result import RunResult


def merge(paths: Sequence[Path], out_dir: Path, formats: Sequence[str] = ()) -> RunResult:
    """Every shard's report.json of one run (``run --shard I/N``) judged as the whole run, and its reports written
    under ``out_dir``."""
    whole = read_shards(read_texts(paths))
    analysis = conclude(whole.results, whole.fingerprint, whole.fixtures, whole.shape, whole.run.thresholds,
                        whole.interrupted, whole.lowered)
    notes = run_notes(whole.run, whole.pinned, whole.base, whole.replayed, len(whole.results), whole.remarks,
                      whole.shape.unverified)
    report = merged_report(analysis, whole.run, notes, whole.base, whole.rows, whole.row_gates)
    return RunResult(report, VERDICT_EXIT[analysis.verdict], write_reports(report, out_dir, formats))
