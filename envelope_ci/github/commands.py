"""The runner's workflow commands: `::error::`/`::warning::`/`::add-mask::` lines, and the $GITHUB_OUTPUT and
$GITHUB_STEP_SUMMARY files."""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Mapping

from ..formats.escape import visible
from .trim import trim_markdown

# A step summary over 1 MiB is not shown at all (the upload fails), so trim rather than lose it.
SUMMARY_LIMIT = 1024 * 1024

_OUTPUT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def escape_data(value: str) -> str:
    """Escape a workflow command's message so it stays on one line and cannot end the command early."""
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: str) -> str:
    """Escape a workflow command property value (file=, title=), which also must not contain `:` or `,`."""
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


def _command(name: str, properties: Mapping[str, str | int | None], message: str) -> str:
    """One `::name k=v,…::message` workflow command line, properties with no value left out."""
    props = ",".join(f"{key}={escape_property(str(value))}" for key, value in properties.items() if value is not None)
    return f"::{name}{' ' + props if props else ''}::{escape_data(message)}"


def error_annotation(file: str | None, line: int | None, title: str | None, message: str) -> str:
    """An `::error file=…,line=…,title=…::message` command; `file` should be repository-relative.

    Title and message show invisible characters escaped (``\\u200b``): an annotation is read, not copied.
    """
    return _command("error", {"file": file, "line": line, "title": _shown(title)}, visible(message))


def warning(message: str, *, file: str | None = None, line: int | None = None, title: str | None = None) -> str:
    """A `::warning::message` command, optionally pointing at a file and line (invisible characters shown escaped)."""
    return _command("warning", {"file": file, "line": line, "title": _shown(title)}, visible(message))


def _shown(title: str | None) -> str | None:
    return None if title is None else visible(title)


def add_mask(value: str) -> str:
    """An `::add-mask::value` command, so the runner hides `value` in every later log line."""
    return _command("add-mask", {}, value)


def write_outputs(path: str | os.PathLike[str], outputs: Mapping[str, str]) -> None:
    """Append step outputs to $GITHUB_OUTPUT in the multi-line-safe `name<<ghadelimiter_<uuid>` form."""
    chunks: list[str] = []
    # Validate everything first so a bad value never leaves half the outputs written.
    for name, value in outputs.items():
        if not _OUTPUT_NAME.fullmatch(name):
            raise ValueError(f"invalid output name {name!r}")
        if not isinstance(value, str):
            raise TypeError(f"output {name!r} must be a str, got {type(value).__name__}")
        delimiter = f"ghadelimiter_{uuid.uuid4()}"
        if delimiter in value:
            # Same rule as actions/toolkit: the value would end the heredoc early.
            raise ValueError(f"output {name!r} contains its delimiter {delimiter!r}")
        chunks.append(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")
    _append(path, "".join(chunks))


def append_summary(path: str | os.PathLike[str], markdown: str, limit: int = SUMMARY_LIMIT) -> bool:
    """Append Markdown to $GITHUB_STEP_SUMMARY, trimmed so the file stays within `limit` bytes; True if trimmed."""
    text = markdown if markdown.endswith("\n") else markdown + "\n"
    try:
        # The limit is per step and the file is per step: earlier appends count too.
        used = os.path.getsize(path)
    except FileNotFoundError:
        used = 0
    budget = limit - used
    if _utf8_len(text) <= budget:
        _append(path, text)
        return False

    def note(omitted: int) -> str:
        return (
            f"> **Trimmed:** {omitted:,} bytes of this summary were left out to stay under GitHub's "
            "1 MiB step-summary limit. The full report is in the report files (`report.md`, `report.json`)."
        )

    trimmed = trim_markdown(text, budget, _utf8_len, note)
    if _utf8_len(trimmed) <= budget:
        _append(path, trimmed)
    return True


def _utf8_len(text: str) -> int:
    """Length in UTF-8 bytes, the unit of the step-summary limit."""
    return len(text.encode("utf-8"))


def _append(path: str | os.PathLike[str], text: str) -> None:
    """Append UTF-8 text to a runner file; newline="" writes "\\n" as is (the value is not ours to rewrite)."""
    with open(path, "a", encoding="utf-8", newline="") as fh:
        fh.write(text)
