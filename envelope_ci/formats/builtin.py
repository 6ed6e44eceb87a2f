"""The built-in formats: report.json, report.md, junit.xml and the console summary as a file."""
from __future__ import annotations

from ..model import Detail
from ..report.model import Report, dump_report
from .base import ReportFormat
from .console import render_console
from .junit import render_junit
from .markdown import render_markdown


def _json(report: Report, detail: Detail) -> str:
    return dump_report(report)


def _markdown(report: Report, detail: Detail) -> str:
    return render_markdown(report, detail)


def _junit(report: Report, detail: Detail) -> str:
    return render_junit(report)


def _console(report: Report, detail: Detail) -> str:
    return render_console(report) + "\n"


JSON = ReportFormat("json", "report.json", _json, "the whole report as JSON (docs/report.md; `envelope-ci schema report`)")
MARKDOWN = ReportFormat("markdown", "report.md", _markdown, "GitHub-flavoured Markdown, as in the PR comment and job summary")
JUNIT = ReportFormat("junit", "junit.xml", _junit, "JUnit XML: failure = fails the gate, error = undelivered, skipped = tolerated")
CONSOLE = ReportFormat("console", "summary.txt", _console, "the one-screen summary printed on stdout")
