"""Checks on rendered Markdown shared by the report and Action tests: GitHub's parser, and whose fences a text opens."""
from __future__ import annotations

import re

import pytest

# The only fences a report opens: the next steps' commands (indented in their list item) and the time chart.
OUR_FENCE = re.compile(r"^ {0,2}(`{3,})(sh|mermaid)$")


def gfm(markdown: str) -> str:
    """HTML as GitHub's parser (cmark-gfm) renders it, raw HTML kept so anything that got through would show."""
    cmarkgfm = pytest.importorskip("cmarkgfm")
    from cmarkgfm.cmark import Options  # type: ignore[import-untyped]

    return str(cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE))


def fences_are_ours(markdown: str) -> None:
    """Every line that opens a fence is one of ours and is closed by its own closer: data never opens one."""
    closer = None
    for line in markdown.splitlines():
        if closer is not None:
            if line.strip() == closer:
                closer = None
            continue
        match = OUR_FENCE.match(line)
        if match:
            closer = match.group(1)
        elif line.lstrip().startswith(("```", "~~~")):
            raise AssertionError(f"a fence escaped into the comment: {line!r}")
    assert closer is None, "a fence was left open"
