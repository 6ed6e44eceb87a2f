"""What a report format is: a name, the file it is written to, and a pure render.

A format is one object ``FORMAT = ReportFormat(...)`` in one module: the built-ins are
listed in ``registry.BUILTIN``; third parties register theirs under the entry-point group
``envelope_ci.formats`` (see docs/plugins.md) and users add them with ``--format NAME``.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..model import Detail
from ..report.model import Report

Render = Callable[[Report, Detail], str]


@dataclass(frozen=True)
class ReportFormat:
    """One report format; ``render`` returns text and never writes: the caller decides where it goes."""

    name: str
    filename: str
    render: Render
    description: str = ""
