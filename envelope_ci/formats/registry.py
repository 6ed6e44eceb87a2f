"""Every report format by name (built-ins, then ``envelope_ci.formats`` entry points), and writing them.

A run always writes json, markdown and junit; ``--format NAME`` adds more. Adding a
built-in is one module and one line in ``BUILTIN``.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache, partial
from pathlib import Path

from .. import atomic
from ..errors import UsageError
from ..model import Detail
from ..parallel import MIN_ITEMS, one_after_another, run_concurrently
from ..plugins import load_plugins
from ..report.model import Report
from . import builtin
from .base import ReportFormat

ENTRY_POINT_GROUP = "envelope_ci.formats"
BUILTIN: tuple[ReportFormat, ...] = (builtin.JSON, builtin.MARKDOWN, builtin.JUNIT, builtin.CONSOLE)
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


def write_reports(report: Report, out_dir: Path, extra: Sequence[str] = (), made: Mapping[str, Callable[[], Iterable[str]]] | None = None) -> tuple[Path, ...]:
    """Render and write each format under ``out_dir``; rendered side by side for big runs.

    Each is written as its parts come (``ReportFormat.text_parts``).
    ``made`` makes some formats' text another way than their ``render`` (by name): a merge
    writes report.json from its shards' rows, and report.md around a cases table made while it
    read. Those are written one after another in this process while the renders run in another
    (``run_concurrently``): forking a 400 MB merge once more, and its copy-on-write, cost more
    than they do (the three formats of a 100k-case merge: 1.14-1.17 s this way; 1.32-1.38 s with
    each in a process of its own).
    """
    formats = chosen(extra)
    out_dir.mkdir(parents=True, exist_ok=True)
    others = made or {}

    def job(fmt: ReportFormat) -> Callable[[], None]:
        make = others.get(fmt.name) or partial(fmt.text_parts, report, Detail.FULL)

        def write() -> None:
            atomic.write_parts(out_dir / fmt.filename, make())

        return write

    cheap = [job(fmt) for fmt in formats if fmt.name in others]
    rendered = [job(fmt) for fmt in formats if fmt.name not in others]
    run_concurrently([one_after_another(cheap), *rendered] if cheap else rendered, parallel=len(report.cases) >= MIN_ITEMS)
    return tuple(out_dir / fmt.filename for fmt in formats)

