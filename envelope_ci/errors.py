"""Errors the edges raise; the command line turns them into exit code 2."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong with user input, located as precisely as the format allows."""

    file: str
    line: int | None
    field: str | None
    message: str

    def __str__(self) -> str:
        where = self.file + (f":{self.line}" if self.line else "")
        return one_line(f"{where + ': ' if where else ''}{self.field + ': ' if self.field else ''}{self.message}")


def one_line(text: str) -> str:
    """Text that stays on its line: CR and LF from user input (a key, a file name) shown escaped.

    On a GitHub runner a printed line that starts with ``::`` is a workflow command, so a
    newline smuggled into a message must never start a new line.
    """
    return text.replace("\r", "\\r").replace("\n", "\\n")


class UsageError(Exception):
    """Bad input or usage: exit 2 with every problem on its own line."""

    def __init__(self, problems: list[Problem] | str):
        if isinstance(problems, str):
            problems = [Problem("", None, None, problems)]
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))
