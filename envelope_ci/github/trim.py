"""Cut Markdown to a size budget at a line boundary, closing an open code fence and <details>, then say what was left
out."""

from __future__ import annotations

import re
from collections.abc import Callable

_FENCE_OPEN = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")
_FENCE_CLOSE = re.compile(r" {0,3}(`{3,}|~{3,})[ \t]*")
_DETAILS_OPEN = re.compile(r"<details(?:\s|>|$)", re.IGNORECASE)
_DETAILS_CLOSE = re.compile(r"</details\s*>", re.IGNORECASE)


def trim_markdown(text: str, budget: int, measure: Callable[[str], int], note: Callable[[int], str]) -> str:
    """The longest line-boundary prefix of `text` that fits `budget` with its closers and `note(omitted)`."""
    # Linear in the text: a 1 MiB summary has tens of thousands of lines, so nothing here
    # may re-measure or re-join the whole text per line.
    total = measure(text)
    lines = text.splitlines(keepends=True)
    best_lines, best_tail = 0, note(total)
    size = 0
    fence: tuple[str, int] | None = None  # (character, length) of the open fence
    details = 0
    for count, line in enumerate(lines, 1):
        size += measure(line)
        if size > budget:
            break
        fence, details = _block_state(line.rstrip("\r\n"), fence, details)
        closers = (fence[0] * fence[1] + "\n" if fence else "") + "</details>\n" * details
        tail = closers + "\n" + note(total - size) + "\n"
        if size + measure(tail) <= budget:
            best_lines, best_tail = count, tail
    return "".join(lines[:best_lines]) + best_tail


def _block_state(line: str, fence: tuple[str, int] | None, details: int) -> tuple[tuple[str, int] | None, int]:
    """The open code fence and <details> depth after one more line."""
    if fence is not None:
        match = _FENCE_CLOSE.fullmatch(line)
        if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= fence[1]:
            return None, details
        return fence, details
    match = _FENCE_OPEN.fullmatch(line)
    # CommonMark: a backtick fence's info string cannot contain a backtick (that is a code span).
    if match and not (match.group(1)[0] == "`" and "`" in match.group(2)):
        return (match.group(1)[0], len(match.group(1))), details
    depth = details + len(_DETAILS_OPEN.findall(line)) - len(_DETAILS_CLOSE.findall(line))
    return None, max(0, depth)
