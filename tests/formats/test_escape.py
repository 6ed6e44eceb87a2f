"""envelope_ci.formats.escape: nasty untrusted text against literal expected Markdown, and any text as GitHub
renders it."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envelope_ci.formats.escape import (
    ELLIPSIS,
    NEWLINE_MARK,
    _cleaned,
    _escaped_cell,
    _verbatim,
    cell,
    clean,
    fenced,
    inline,
)
from envelope_ci.formats.markdown import table
from tests.support.hostile import NASTY
from tests.support.markdown_checks import fences_are_ours, gfm
from tests.support.strategies import EDGE_TEXT

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


# -- any text: escaped cells and inline text stay in place, and inert, as GitHub's parser reads them --------

# Text that tries: fences, pipes, HTML, mentions, references, links, emphasis, entities, line breaks.
MARKUP = st.sampled_from(["```", "~~~", "|", "\\|", "\\", "<!--", "-->", "<b>", "</td>", "<img src=x>", "@octocat",
                          "@org/team", "#12", "GH-7", "gh-1", "https://x.example", "www.x.example", "[a](b)", "![i](u)",
                          "*", "_", "~", "$", "&amp;", "&#64;", "\n", "\r\n", "\u2028", "\u202e", "\x00", "\ud800", "`",
                          "    ", "\t", "- ", "1. ", "> ", "=", "#", "@"])
CELL_TEXT = st.one_of(st.lists(MARKUP | st.text(max_size=4), max_size=12).map("".join), st.text(max_size=60))
ALLOWED_TAGS = {"table", "thead", "tbody", "tr", "th", "td"}
TAG = re.compile(r"<(/?)([a-zA-Z0-9!?-]+)")
# What would link or ping if GitHub saw it unescaped in rendered text (ZWJ is what the escaper inserts).
LIVE_REFERENCE = re.compile(r"@[A-Za-z0-9]|#[0-9]|(?i:\bgh-[0-9])")


def inert(rendered_text: str) -> None:
    """No mention, issue reference or GH- reference survives in what the reader sees."""
    assert not LIVE_REFERENCE.search(html.unescape(rendered_text)), rendered_text


@settings(max_examples=150)
@given(rows=st.lists(st.lists(CELL_TEXT, min_size=3, max_size=3), min_size=1, max_size=4))
def test_tables_stay_rectangular_and_inert_for_any_cell_text(rows):
    markdown = table(["case", "why", "answer"], [[cell(text) for text in row] for row in rows])
    fences_are_ours(markdown)
    out = gfm(markdown)
    assert {tag for _, tag in TAG.findall(out)} <= ALLOWED_TAGS, out
    body = re.findall(r"<tr>(.*?)</tr>", out, re.DOTALL)
    assert len(body) == len(rows) + 1
    assert all(len(re.findall(r"<t[dh]>", row)) == 3 for row in body), out
    inert(re.sub(r"<[^>]+>", "", out))


@settings(max_examples=150)
@given(text=CELL_TEXT)
def test_inline_text_stays_one_plain_list_item(text):
    markdown = f"- {inline(text)}\n"
    fences_are_ours(markdown)
    out = gfm(markdown)
    assert out.startswith("<ul>\n<li>") and out.endswith("</li>\n</ul>\n"), out
    inner = out[len("<ul>\n<li>"): -len("</li>\n</ul>\n")]
    assert "<" not in inner, out  # no element at all: no link, image, emphasis, code span or raw HTML
    inert(inner)


# -- text that needs no escaping is given back as it is, and only such text ------------------------------
# (a 100k-case merge writes its tables through these short cuts)


@settings(max_examples=1500)
@given(text=EDGE_TEXT, limit=st.none() | st.integers(-1, 50))
def test_cell_returns_text_unchanged_only_where_escaping_would(text, limit):
    def outcome(fn: Any) -> str:
        try:
            return fn(text, limit)
        except ValueError as exc:
            return f"ValueError: {exc}"

    assert outcome(cell) == outcome(_escaped_cell)


@settings(max_examples=1500)
@given(text=EDGE_TEXT)
def test_clean_keeps_printable_text_as_it_is(text):
    assert clean(text) == _cleaned(text)


# Characters a cell keeps and some it escapes, and the pieces of a link or an issue reference.
CELL_PIECES = [*"aZ09.,:;/=+-_ |\\`*#@<>&!()[]~$\t\n\u200e\u2028é", "://", "www.", "WWW.", "gh-", "GH-1", "gh-x"]


@given(st.lists(st.sampled_from(CELL_PIECES), max_size=12).map("".join), st.sampled_from([None, 5, 60, 80]))
def test_a_cell_given_back_as_it_is_is_what_escaping_it_gives(text: str, limit: int | None) -> None:
    assert cell(text, limit) == _escaped_cell(text, limit)


def test_plain_ids_are_given_back_without_escaping_and_links_are_not() -> None:
    assert _verbatim("case-000005") and _verbatim("a/b.c:1=2+3,4;5")
    assert not any(map(_verbatim, ["a b", "x_y", "https://x", "WWW.x", "see GH-12", "é"]))
