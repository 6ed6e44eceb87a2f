"""``merge``: every shard's report of one run judged as the whole run (``envelope-ci merge``; ``api.merge`` is this).

Apart from ``api`` so that a merge loads none of what only a run needs (fixture loading and
its schemas, the recordings, the transport): that was 0.3 s of a merge's start.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import partial
from pathlib import Path

from .analysis.analyse import conclude
from .formats.builtin import JSON, MARKDOWN
from .formats.markdown import cases_table, render_markdown
from .formats.registry import write_reports
from .model import VERDICT_EXIT, Detail
from .parallel import forks, in_background
from .report.build import merged_report
from .report.merge import ReportText, read_shards, read_texts, rows_in_suite_order
from .report.model import report_parts
from .report.notes import run_notes
from .result import RunResult, cyclic_gc_paused

# Shards' reports at least this big in all (100,000 cases are 59 MB) have report.md's cases table made meanwhile on another core.
CASES_TABLE_EARLY_BYTES = 8_000_000


def merge(paths: Sequence[Path], out_dir: Path, formats: Sequence[str] = ()) -> RunResult:
    """Every shard's report.json of one run (``run --shard I/N``) judged as the whole run, and its reports written under ``out_dir``.

    Reading and judging use one core. For big reports a forked child meanwhile parses them too and
    makes report.md's table of every case, which needs no gate: it comes back as one text, where
    rows would come back pickled at about the cost of reading them. That was the longest render
    of the merge, after the judging (a 4 x 25k merge: 0.7-1.2 s of its 1.5 s of writing).
    """
    reports = read_texts(paths)  # read once: the child parses these, not the files, which --out may be writing over
    early = forks() and sum(len(text) for _, text in reports) >= CASES_TABLE_EARLY_BYTES
    with cyclic_gc_paused(), in_background(partial(_cases_table, reports), wanted=early) as cases_later:
        whole = read_shards(reports)
        analysis = conclude(whole.results, whole.fingerprint, whole.fixtures, whole.shape, whole.run.thresholds, whole.interrupted, whole.lowered)
        notes = run_notes(whole.run, whole.pinned, whole.base, whole.replayed, len(whole.results), whole.remarks, whole.shape.unverified)
        report = merged_report(analysis, whole.run, notes, whole.base, whole.rows, whole.row_gates)
        # A row whose gate the whole run did not change is the same object, and its shard's text is its text.
        texts = [text if merged is row else None for text, row, merged in zip(whole.row_texts, whole.rows, report.cases, strict=True)]
        made: dict[str, Callable[[], Iterable[str]]] = {JSON.name: partial(report_parts, report, texts)}
        if early:  # asked for once report.json is written: the child has had that long too
            made[MARKDOWN.name] = lambda: (render_markdown(report, Detail.FULL, full_table=cases_later()[0]),)
        return RunResult(report, VERDICT_EXIT[analysis.verdict], write_reports(report, out_dir, formats, made))


def _cases_table(texts: Sequence[ReportText]) -> list[str]:
    """report.md's table of every case of the whole run, from the shards' rows (in a list: what ``in_background`` hands back)."""
    return [cases_table(rows_in_suite_order(texts))]
