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
    """Text that stays on its line and shows what it holds: CR, LF and every other unprintable character from user
    input (a key, a file name: controls, zero-width and other format characters) shown escaped.

    On a GitHub runner a printed line that starts with ``::`` is a workflow command, so a
    newline smuggled into a message must never start a new line; and two names that differ by
    an invisible character must not read the same.
    """
    return text if text.isprintable() else "".join(map(_shown, text))


def _shown(char: str) -> str:
    """One character of a message as printed: itself, a tab, or its escape (``\\n``, ``\\u200b``)."""
    if char.isprintable() or char == "\t":
        return char
    if char in "\r\n":
        return "\\r" if char == "\r" else "\\n"
    return f"\\u{ord(char):04x}" if ord(char) <= 0xFFFF else f"\\U{ord(char):08x}"


class UsageError(Exception):
    """Bad input or usage: exit 2 with every problem on its own line."""

    def __init__(self, problems: list[Problem] | str):
        if isinstance(problems, str):
            problems = [Problem("", None, None, problems)]
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))
