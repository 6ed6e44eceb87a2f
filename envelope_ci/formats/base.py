"""What a report format is: a name, the file it is written to, and a pure render.

A format is one object ``FORMAT = ReportFormat(...)`` in one module: the built-ins are
listed in ``registry.BUILTIN``; third parties register theirs under the entry-point group
``envelope_ci.formats`` (see docs/plugins.md) and users add them with ``--format NAME``.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..model import Detail
from ..report.model import Report

Render = Callable[[Report, Detail], str]
Parts = Callable[[Report, Detail], Iterable[str]]


@dataclass(frozen=True)
class ReportFormat:
    """One report format; ``render`` returns text and never writes: the caller decides where it goes."""

    name: str
    filename: str
    render: Render
    description: str = ""
    # ``render``'s text in parts, made as they are written: a format whose text grows with the cases
    # need never hold it whole, nor its encoded bytes beside it.
    parts: Parts | None = None

    def text_parts(self, report: Report, detail: Detail) -> Iterable[str]:
        """The text to write, in parts when the format makes them, else ``render``'s whole."""
        return self.parts(report, detail) if self.parts is not None else (self.render(report, detail),)
