"""Tests for envelope_ci.render.escape: nasty untrusted text against literal expected Markdown."""

from __future__ import annotations

import html
import re

import pytest

from envelope_ci.formats.escape import (
    ELLIPSIS,
    NEWLINE_MARK,
    cell,
    clean,
    fenced,
    inline,
)

ZWJ = "\u200d"

# -- cell: literal expectations -----------------------------------------------------------------

CELL_CASES = [
    ("@octocat", "@\u200doctocat"),
    ("@org/team please look", "@\u200dorg/team please look"),
    ("me@example.com", "me@\u200dexample.com"),
    ("#123", "#\u200d123"),
    ("owner/repo#1", "owner/repo#\u200d1"),
    ("a|b", "a\\|b"),
    ("a\\|b", "a&#92;\\|b"),  # literal backslash then literal pipe
    ("C:\\path\\", "C:&#92;path&#92;"),
    ("```", "\\`\\`\\`"),
    ("`````", "\\`\\`\\`\\`\\`"),
    ("`code | span`", "\\`code \\| span\\`"),
    ("<!-- envelope-ci:default -->", "&lt;\\!-- envelope-ci:default --&gt;"),
    ("</details>", "&lt;/details&gt;"),
    ("<img src=x onerror=alert(1)>", "&lt;img src=x onerror=alert\\(1\\)&gt;"),
    ("&lt;b&gt; &amp; &#64;", "&amp;lt;b&amp;gt; &amp;amp; &amp;#\u200d64;"),
    ("[click](https://evil.example)", "\\[click\\]\\(https&#58;//evil.example\\)"),
    ("![x](https://t.example/p.png)", "\\!\\[x\\]\\(https&#58;//t.example/p.png\\)"),
    ("see https://evil.example/login", "see https&#58;//evil.example/login"),
    ("or WWW.evil.example", "or WWW&#46;evil.example"),
    ("**bold** _it_ ~~gone~~", "\\*\\*bold\\*\\* \\_it\\_ \\~\\~gone\\~\\~"),
    ("costs $5, $x^2$", "costs &#36;5, &#36;x^2&#36;"),
    ("> quoted", "&gt; quoted"),
    ("abc\u202edcba\u202c\u2066x\u2069\u200ey\u200fz\u061c", "abcdcbaxyz"),
    ("line1\r\nline2\rline3\nline4\u2028line5", "line1⏎line2⏎line3⏎line4⏎line5"),
    ("a\x00b\x07c\x1bd\te\x7ff", "abcd ef"),
    ("  spaced   out\t\t", "spaced out"),
    ("lone \ud800 surrogate", "lone \ufffd surrogate"),
    ("non\ufffe\uffffchar", "nonchar"),
    ("", ""),
]


@pytest.mark.parametrize(("raw", "expected"), CELL_CASES)
def test_cell_literal(raw: str, expected: str) -> None:
    assert cell(raw) == expected


def test_cell_newline_mark_is_documented_glyph() -> None:
    assert NEWLINE_MARK == "⏎"
    assert cell("a\n\nb") == "a⏎⏎b"


def test_cell_truncates_raw_text_to_limit_with_ellipsis() -> None:
    long = "x" * 500
    assert cell(long) == "x" * 79 + ELLIPSIS
    assert cell(long, limit=None) == long
    assert cell("exactly", limit=7) == "exactly"
    assert cell("exactly!", limit=7) == "exactl" + ELLIPSIS


def test_cell_truncation_never_cuts_an_escape() -> None:
    # The limit counts what the reader sees; every escape is whole.
    assert cell("&" * 100, limit=5) == "&amp;" * 4 + ELLIPSIS
    assert cell("a|bcdef", limit=3) == "a\\|" + ELLIPSIS
    assert cell("ab|cdef", limit=3) == "ab" + ELLIPSIS
    assert cell("@@@@@@", limit=3) == ("@" + ZWJ) * 2 + ELLIPSIS
    assert cell("ab    cdef", limit=4) == "ab" + ELLIPSIS  # no space dangling before the ellipsis


def test_limit_must_be_positive() -> None:
    with pytest.raises(ValueError):
        cell("x", limit=0)
    with pytest.raises(ValueError):
        inline("", limit=-1)


def test_very_long_text_stays_bounded() -> None:
    nasty = ("@octocat | <b> #1 `x` \u202e\r\n" * 10_000)
    out = cell(nasty)
    assert "\n" not in out and "\r" not in out
    assert out.endswith(ELLIPSIS)
    assert len(clean(nasty)) > 200_000
    # 80 visible characters; escapes may lengthen the source, but only by a bounded factor.
    assert len(out) < 80 * 6


# -- inline ---------------------------------------------------------------------------------------

INLINE_CASES = [
    ("@octocat and #42", "@\u200doctocat and #\u200d42"),
    ("1. not a list", "1\\. not a list"),
    ("12) not a list", "12\\) not a list"),
    ("- not a list", "\\- not a list"),
    ("+ not a list", "\\+ not a list"),
    ("===", "\\==="),
    ("---", "\\---"),
    ("# not a heading", "#\u200d not a heading"),
    ("> not a quote", "&gt; not a quote"),
    ("    not code", "not code"),
    ("a\r\n\r\nb\tc", "a b c"),
    ("*emph* [link](u) ![img](u)", "\\*emph\\* \\[link\\]\\(u\\) \\!\\[img\\]\\(u\\)"),
    ("x | y", "x \\| y"),
    ("<!-- envelope-ci:default -->", "&lt;\\!-- envelope-ci:default --&gt;"),
    ("1.5 is not a list marker but escaping it is harmless", "1\\.5 is not a list marker but escaping it is harmless"),
]


@pytest.mark.parametrize(("raw", "expected"), INLINE_CASES)
def test_inline_literal(raw: str, expected: str) -> None:
    assert inline(raw) == expected


def test_inline_limit() -> None:
    assert inline("abcdefghij") == "abcdefghij"
    assert inline("abcdefghij", limit=5) == "abcd" + ELLIPSIS
    assert inline("a\nb\nc\nd", limit=3) == "a" + ELLIPSIS
    assert inline("a\nb\nc\nd", limit=4) == "a b" + ELLIPSIS


# -- fenced ---------------------------------------------------------------------------------------


def test_fenced_plain() -> None:
    assert fenced("print('hi')", "python") == "```python\nprint('hi')\n```"


def test_fenced_longer_than_any_backtick_run() -> None:
    assert fenced("a\n```\nb") == "````text\na\n```\nb\n````"
    assert fenced("`````") == "``````text\n`````\n``````"
    assert fenced("inline `x` and ``y``") == "```text\ninline `x` and ``y``\n```"


def test_fenced_keeps_html_literal_and_defuses_markers_and_mentions() -> None:
    raw = "</details>\n<!-- envelope-ci:default -->\n<img src=x>\n@octocat #1\n"
    assert fenced(raw) == (
        "```text\n</details>\n<!\u200d-- envelope-ci:default -->\n<img src=x>\n@\u200doctocat #1\n```"
    )
    assert "<!-- envelope-ci:default -->" not in fenced(raw)


def test_fenced_strips_bidi_and_normalises_newlines() -> None:
    assert fenced("a\r\nb\u202e\u2066c\x00") == "```text\na\nbc\n```"


def test_fenced_sanitises_info_string() -> None:
    assert fenced("x", info="py`thon <b>") == "```pythonb\nx\n```"
    assert fenced("x", info="") == "```\nx\n```"


def test_fenced_empty_and_limit() -> None:
    assert fenced("") == "```text\n```"
    assert fenced("abcdef", limit=4) == "```text\nabc" + ELLIPSIS + "\n```"


# -- rendered by GitHub's own Markdown engine (cmark-gfm), when available --------------------------


def _gfm(markdown: str) -> str:
    cmarkgfm = pytest.importorskip("cmarkgfm")
    from cmarkgfm.cmark import Options  # type: ignore[import-untyped]

    # UNSAFE keeps raw HTML so we can see it if any got through; GitHub sanitises afterwards.
    return str(cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE))


NASTY = [
    "@octocat",
    "owner/repo#1",
    "a | b \\| c \\\\| d",
    "x\\",
    "```\n| injected | row |\n```",
    "<!-- envelope-ci:default -->",
    "</details><details open><summary>fake</summary>",
    "<img src=x> <a href='https://evil.example'>login</a>",
    "[ok](https://evil.example) ![t](https://t.example/p.png) https://x.example",
    "&lt;script&gt; &amp;",
    "`code | span` ``double``",
    "*a* _b_ ~~c~~ **d**",
    "\u202eevil\u202c",
    "line1\r\nline2",
]


@pytest.mark.parametrize("raw", NASTY)
def test_cell_renders_as_one_inert_cell(raw: str) -> None:
    out = _gfm(f"| h | z |\n|---|---|\n| {cell(raw, limit=None)} | end |\n")
    cells = re.findall(r"<td>(.*?)</td>", out, re.DOTALL)
    assert len(cells) == 2 and cells[1] == "end"
    assert html.unescape(cells[0]) == _visible(raw, newline=NEWLINE_MARK)


@pytest.mark.parametrize("raw", NASTY)
def test_cell_survives_a_table_written_without_spaces(raw: str) -> None:
    out = _gfm(f"|h|z|\n|-|-|\n|{cell(raw, limit=None)}|end|\n")
    cells = re.findall(r"<td>(.*?)</td>", out, re.DOTALL)
    assert len(cells) == 2 and cells[1] == "end"
    assert html.unescape(cells[0]) == _visible(raw, newline=NEWLINE_MARK)


@pytest.mark.parametrize("raw", NASTY)
def test_inline_renders_as_plain_text(raw: str) -> None:
    out = _gfm(f"- {inline(raw)}\n")
    assert out.startswith("<ul>\n<li>") and out.endswith("</li>\n</ul>\n")
    text = out[len("<ul>\n<li>") : -len("</li>\n</ul>\n")]
    assert "<" not in text  # no element at all: no link, image, emphasis, code or comment
    assert html.unescape(text) == _visible(raw, newline=" ")


@pytest.mark.parametrize("raw", NASTY)
def test_fenced_renders_as_one_code_block(raw: str) -> None:
    out = _gfm(fenced(raw) + "\n\nafter\n")
    assert out.count("<pre") == 1
    code = re.fullmatch(r'<pre lang="text"><code>(.*)</code></pre>\n<p>after</p>\n', out, re.DOTALL)
    assert code is not None
    expected = clean(raw).replace("@", "@" + ZWJ).replace("<!--", "<!" + ZWJ + "--")
    assert html.unescape(code.group(1)) == expected + "\n"


def _visible(raw: str, *, newline: str) -> str:
    """What a reader should see: the cleaned text, one line, with ZWJ after @ and #."""
    text = clean(raw).replace("\n", newline)
    text = re.sub(r"\s+", " ", text).strip() if newline == " " else re.sub(r"[ \t]+", " ", text).strip()
    return text.replace("@", "@" + ZWJ).replace("#", "#" + ZWJ)
