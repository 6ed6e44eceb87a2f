"""``envelope-ci history`` and the Action's trend: the pins file's history read with git, measured, and written.

It lives apart from ``api.py`` as ``merging.py`` does: it loads none of what a run needs, and it
runs nothing from the fixtures (they are read as data at each commit).
"""
from __future__ import annotations

from pathlib import Path

from . import atomic
from .analysis.trend import measure
from .formats.history_md import render_history
from .report.history_model import HISTORY_VERSION, History, dump_history, point_of
from .sources.history import read_history

HISTORY_FILES = ("history.json", "history.md")


def load_history(fixtures: Path, pins: Path, ref: str, last: int) -> History:
    """The last ``last`` changes of the pins on ``ref``'s first-parent history, oldest first, with their measures."""
    found = read_history(fixtures, pins, ref, last)
    points = tuple(point_of(s.commit, s.date, s.pr, s.subject, measure(s.pins, s.strata)) for s in found.snapshots)
    return History(history_version=HISTORY_VERSION, ref=found.ref, commit=found.commit, pins=found.pins,
                   fixtures_dir=found.fixtures, last=found.last, shallow=found.shallow, notes=found.notes,
                   points=points)


def write_history(history: History, out: Path) -> tuple[Path, ...]:
    """history.json and history.md in ``out``, each written whole or not at all."""
    paths = tuple(out / name for name in HISTORY_FILES)
    atomic.write_text(paths[0], dump_history(history))
    atomic.write_text(paths[1], render_history(history))
    return paths
