"""The built-in formats: report.json, report.md, junit.xml and the console summary as a file."""
from __future__ import annotations

from collections.abc import Iterable

from ..model import Detail
from ..report.model import Report, dump_report, report_parts
from .base import ReportFormat
from .console import render_console
from .junit import junit_parts, render_junit
from .markdown import markdown_parts, render_markdown


def _json(report: Report, detail: Detail) -> str:
    return dump_report(report)


def _json_parts(report: Report, detail: Detail) -> Iterable[str]:
    return report_parts(report)


def _markdown(report: Report, detail: Detail) -> str:
    return render_markdown(report, detail)


def _markdown_parts(report: Report, detail: Detail) -> Iterable[str]:
    return markdown_parts(report, detail)


def _junit(report: Report, detail: Detail) -> str:
    return render_junit(report)


def _junit_parts(report: Report, detail: Detail) -> Iterable[str]:
    return junit_parts(report)


def _console(report: Report, detail: Detail) -> str:
    return render_console(report) + "\n"


JSON = ReportFormat("json", "report.json", _json,
                    "the whole report as JSON (docs/report.md; `envelope-ci schema report`)", _json_parts)
MARKDOWN = ReportFormat("markdown", "report.md", _markdown,
                        "GitHub-flavoured Markdown, as in the PR comment and job summary", _markdown_parts)
JUNIT = ReportFormat("junit", "junit.xml", _junit,
                     "JUnit XML: failure = fails the gate, error = undelivered, skipped = tolerated", _junit_parts)
CONSOLE = ReportFormat("console", "summary.txt", _console, "the one-screen summary printed on stdout")
