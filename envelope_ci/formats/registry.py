"""Every report format by name (built-ins, then ``envelope_ci.formats`` entry points), and writing them.

A run always writes json, markdown and junit; ``--format NAME`` adds more. Adding a
built-in is one module and one line in ``BUILTIN``.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path

from .. import atomic
from ..errors import UsageError
from ..model import Detail
from ..parallel import MIN_ITEMS, run_concurrently
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


def write_reports(report: Report, out_dir: Path, extra: Sequence[str] = (), rendered: Mapping[str, str] | None = None) -> tuple[Path, ...]:
    """Render and write each format under ``out_dir``; rendered side by side for big runs.

    ``rendered`` holds formats' text made already (by name): written as it is, first.
    """
    formats = chosen(extra)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = tuple(out_dir / fmt.filename for fmt in formats)
    done = rendered or {}
    for path, fmt in zip(paths, formats, strict=True):
        if fmt.name in done:
            atomic.write_text(path, done[fmt.name])
    to_render = [(p, f) for p, f in zip(paths, formats, strict=True) if f.name not in done]

    def job(path: Path, fmt: ReportFormat) -> Callable[[], None]:
        def write() -> None:
            atomic.write_text(path, fmt.render(report, Detail.FULL))

        return write

    run_concurrently([job(p, f) for p, f in to_render], parallel=len(report.cases) >= MIN_ITEMS)
    return paths
