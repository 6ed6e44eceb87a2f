"""Every report format by name (built-ins, then ``envelope_ci.formats`` entry points), and writing them.

A run always writes json, markdown and junit; ``--format NAME`` adds more. Adding a
built-in is one module and one line in ``BUILTIN``.
"""
from __future__ import annotations

import glob
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path

from .. import atomic
from ..errors import UsageError
from ..model import Detail
from ..plugins import load_plugins
from ..report.model import Report
from . import builtin, html
from .base import ReportFormat

ENTRY_POINT_GROUP = "envelope_ci.formats"
BUILTIN: tuple[ReportFormat, ...] = (builtin.JSON, builtin.MARKDOWN, builtin.JUNIT, builtin.CONSOLE, html.HTML)
ALWAYS = ("json", "markdown", "junit")


@lru_cache(maxsize=1)
def report_formats() -> Mapping[str, ReportFormat]:
    """Every format by name; a plug-in may not take a built-in's name or file."""
    formats: dict[str, ReportFormat] = {}
    for fmt in (*BUILTIN, *load_plugins(ENTRY_POINT_GROUP, ReportFormat, "format")):
        clash = [f.name for f in formats.values() if f.name == fmt.name or f.filename == fmt.filename]
        if clash:
            raise UsageError(f"report format {fmt.name!r} ({fmt.filename}) clashes with {clash[0]!r}")
        formats[fmt.name] = fmt
    return formats


def chosen(extra: Sequence[str]) -> list[ReportFormat]:
    """The formats a run writes: the three always written, then those asked for, each once."""
    formats = report_formats()
    unknown = [name for name in extra if name not in formats]
    if unknown:
        raise UsageError(f"--format {unknown[0]!r} is not a report format (known: {', '.join(formats)})")
    return [formats[name] for name in dict.fromkeys((*ALWAYS, *extra))]


def write_reports(report: Report, out_dir: Path, extra: Sequence[str] = ()) -> tuple[Path, ...]:
    """Render and write each format under ``out_dir``, each written as its parts come (``ReportFormat.text_parts``)."""
    formats = chosen(extra)
    out_dir.mkdir(parents=True, exist_ok=True)
    for fmt in formats:  # a run killed mid-write left its temporary: it is no report, and never becomes one
        for stale in out_dir.glob(f".{glob.escape(fmt.filename)}.*.tmp"):
            stale.unlink(missing_ok=True)
    for fmt in formats:
        atomic.write_parts(out_dir / fmt.filename, fmt.text_parts(report, Detail.FULL))
    return tuple(out_dir / fmt.filename for fmt in formats)
