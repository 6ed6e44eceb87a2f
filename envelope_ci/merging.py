"""``merge``: every shard's report of one run judged as the whole run (``envelope-ci merge``; ``api.merge`` is this).

Apart from ``api`` so that a merge loads none of what only a run needs (fixture loading and
its schemas, the recordings, the transport): that was 0.3 s of a merge's start.
"""
from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path

from .analysis.analyse import conclude
from .formats.builtin import JSON
from .formats.registry import write_reports
from .model import VERDICT_EXIT
from .report.build import merged_report
from .report.merge import read_shards
from .report.model import dump_report
from .report.notes import run_notes
from .result import RunResult, cyclic_gc_paused


def merge(paths: Sequence[Path], out_dir: Path, formats: Sequence[str] = ()) -> RunResult:
    """Every shard's report.json of one run (``run --shard I/N``) judged as the whole run, and its reports written under ``out_dir``."""
    with cyclic_gc_paused():
        whole = read_shards(paths)
        analysis = conclude(whole.results, whole.fingerprint, whole.fixtures, whole.shape, whole.run.thresholds, whole.interrupted, whole.lowered)
        notes = run_notes(whole.run, whole.pinned, whole.base, whole.replayed, len(whole.results), whole.remarks, whole.shape.unverified)
        report = merged_report(analysis, whole.run, notes, whole.base, whole.rows, whole.row_gates)
        # A row whose gate the whole run did not change is the same object, and its shard's text is its text.
        texts = [text if merged is row else None for text, row, merged in zip(whole.row_texts, whole.rows, report.cases, strict=True)]
        made = {JSON.name: partial(dump_report, report, texts)}
        return RunResult(report, VERDICT_EXIT[analysis.verdict], write_reports(report, out_dir, formats, made))
