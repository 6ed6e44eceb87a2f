"""A report's notes (what a reader should know that is not an alert), worded from what the report records.

A run and a merge of its shards word them alike (``run_notes``), so the merged report is the unsharded run's.
"""
from __future__ import annotations

from collections.abc import Sequence

from ..findings import LatencyShift
from ..model import Thresholds
from .model import BaseDiff, RunInfo


def latency_note(shift: LatencyShift | None) -> list[str]:
    """The run's latency level against the pins': said on every run that has both, failing or not."""
    if shift is None:
        return []
    subset = (" (the level comes from a subset: the cases this --filter run selected, which judges each case "
              "against its pin's own time, not against it)" if shift.subset else "")
    return [f"endpoint latency x{shift.factor:.2f} vs pins: median {shift.pins_ms:.0f} → {shift.run_ms:.0f} ms "
            f"over {shift.cases} case(s){subset}; each case's time is judged against its own batch's level "
            "(docs/gate.md)"]


def _unverified_note(unverified: Sequence[str], thresholds: Thresholds) -> list[str]:
    """Older recordings cannot prove what they answered: said once (an alert with ``recordings: strict``)."""
    if not unverified or thresholds.recordings == "strict":
        return []
    ids = ", ".join(unverified[:10]) + (" ..." if len(unverified) > 10 else "")
    return [f"{len(unverified)} case(s) are graded on recordings that do not say what request they answered "
            f"(made before envelope-ci recorded it): {ids}; re-record them to have them checked"]


def run_notes(run: RunInfo, pinned: bool, base: BaseDiff | None, replayed: int, total: int, remarks: Sequence[str],
              unverified: Sequence[str]) -> list[str]:
    """The report's notes, from what the report records: a merge of shards words them as the whole run would."""
    notes = []
    partial = run.partial
    if partial is not None:
        notes.append(f"partial run: --filter {' '.join(partial.filters)} selected {partial.selected} of "
                     f"{partial.total} case(s); the others were not graded, the fixtures were still checked in full, "
                     "and no pins can be written from it")
    if not pinned:
        notes.append(f"no pins at {run.pins}: size and time are not judged against a baseline yet; "
                     f"create them with: envelope-ci run {run.fixtures_dir} --lane adjudication --write-pins "
                     "(locally, then commit)")
    if run.replay:
        notes.append(f"offline: graded {replayed} case(s) from the recordings in {run.replay} and "
                     f"{total - replayed} from the fixtures' own recordings; no endpoint was called")
    elif run.mode != "live":
        notes.append("offline: graded the envelopes recorded in the fixtures, no endpoint was called")
    if base is not None and base.error:
        notes.append(f"base branch pins unavailable: {base.error}")
    return [*notes, *remarks, *_unverified_note(unverified, run.thresholds)]
