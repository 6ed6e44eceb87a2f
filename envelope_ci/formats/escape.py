"""Neutralise untrusted text (model output, fixture text) for GitHub-flavoured Markdown."""

from __future__ import annotations

import re
import unicodedata

from ..canonical import LONE_SURROGATE

__all__ = ["ELLIPSIS", "NEWLINE_MARK", "cell", "clean", "fenced", "inline", "invisible_in", "reveal", "visible"]

# A table row cannot hold a line break, and `<br>` would be markup we then have to trust;
# a visible glyph keeps the row on one line and still tells the reader the model broke a line.
NEWLINE_MARK = "\u23ce"  # ⏎
ELLIPSIS = "\u2026"  # …

# Zero-width joiner: invisible, but GitHub's mention and issue-reference filters run on the
# rendered HTML text, where Markdown escapes are already gone; only an inserted character
# between `@`/`#` and the name stops `@octocat` pinging or `#123` back-linking.
_ZWJ = "\u200d"

# Bidi embeddings/overrides/isolates and the directional marks: they can make a cell read
# differently from what it contains ("trojan source"), so they never reach a comment.
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")

# The characters str.splitlines() treats as line breaks; all become "\n" so the rest of the
# module has one notion of a line.
_LINE_BREAKS = re.compile("\r\n|[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")

# One translation table, applied in a single pass: every character is replaced at most once,
# so `&` never re-escapes an `&lt;` we produced, and a literal `\` is escaped independently
# of the backslash we put in front of `|`.
_MARKDOWN = str.maketrans(
    {
        "&": "&amp;",  # a model's `&lt;` must show as `&lt;`, not become `<`
        "<": "&lt;",  # no HTML: comments (forged markers), </details>, <img>
        ">": "&gt;",  # no blockquotes, no half of an HTML tag
        # GFM's cell splitter takes any `\|` as an escaped pipe, so a literal backslash written
        # as `\\` followed by the cell's closing `|` (when a caller writes `|cell|` without a
        # space) would swallow the delimiter; an entity has no backslash to misread.
        "\\": "&#92;",
        "|": "\\|",  # table cell delimiter (GFM: escaped even inside code spans)
        "`": "\\`",  # a code span would show our entities and backslashes verbatim
        "*": "\\*",
        "_": "\\_",
        "[": "\\[",  # links and images: no phishing link, no tracking pixel
        "]": "\\]",
        "(": "\\(",
        ")": "\\)",
        "!": "\\!",
        "~": "\\~",  # strikethrough and ~~~ fences
        "$": "&#36;",  # GitHub renders $…$ as math; an entity is never a delimiter
        "@": "@" + _ZWJ,
        "#": "#" + _ZWJ,
    }
)

# GFM's autolink extension turns bare `https://…` and `www.…` into links at parse time; an
# entity for the `:` or `.` is plain text to the parser but renders the same to the reader.
# (Bare e-mail addresses are already broken by the ZWJ after `@`.)
_BARE_URL = re.compile(r"://")
# No word boundary: after an escaped `_` (`\_www.`) GFM still autolinks, and `\b` would not see it.
_BARE_WWW = re.compile(r"(?i)(www)\.")
# `GH-12` is an issue reference too: a joiner after `GH` stops it linking.
_GH_REFERENCE = re.compile(r"(?i)\b(gh)(-[0-9])")

_SPACES = re.compile(r"[ \t]+")
_WHITESPACE = re.compile(r"\s+")
# Block syntax that only matters at the start of a paragraph or list item.
_LEADING_BLOCK = re.compile(r"^(?:([0-9]{1,9})([.)])|([-+=]))")
_BACKTICK_RUN = re.compile(r"`+")
_INFO_DISALLOWED = re.compile(r"[^A-Za-z0-9_+.-]")
# The characters of text that ``cell`` gives back unchanged: letters, digits and punctuation that is
# never markup (nothing in _MARKDOWN, no whitespace, nothing ``clean`` drops); ``_verbatim`` also
# wants no bare URL or issue reference. Most cells (ids, stratum names) are such text; checking it
# costs far less than escaping it.
_VERBATIM_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.,:;/=+-"


# Dropped outright: bidi controls, C0/C1 controls but tab and newline (category Cc), and the
# noncharacters U+FFFE/U+FFFF that XML 1.0 (the JUnit report) forbids.
_DROPPED = re.compile("[" + "".join(sorted(_BIDI)) + "\x00-\x08\x0b-\x1f\x7f-\x9f\ufffe\uffff]")


# Invisible characters, shown as their escape (``\\u200b``) wherever text is rendered, and refused in a case id:
# every format character (Unicode category Cf: soft hyphen, zero-width space, non-joiner and joiner, word
# joiner, the byte order mark, the invisible operators, the tag characters U+E0000-U+E007F, ...) and the
# letters and symbols that are blank (the Hangul fillers, the braille blank). Two ids or two cells that
# differ only by one of these would read the same: ``refund`` and ``re\\u200bfund``. The ranges cover
# every Cf character Unicode has defined (a test checks them against ``unicodedata``), unassigned
# neighbours included; the bidi controls among them are dropped by ``clean`` before this applies.
_FORMAT_RANGES = ("\u00ad", "\u0600-\u0605", "\u061c", "\u06dd", "\u070f", "\u0890-\u0891", "\u08e2", "\u180e",
                  "\u200b-\u200f", "\u202a-\u202e", "\u2060-\u206f", "\ufeff", "\ufff9-\ufffb", "\U000110bd",
                  "\U000110cd", "\U00013430-\U0001343f", "\U0001bca0-\U0001bca3", "\U0001d173-\U0001d17a",
                  "\U000e0000-\U000e007f")
BLANK_CHARACTERS = "\u115f\u1160\u3164\uffa0\u2800"
_BLANK = re.compile(f"[{BLANK_CHARACTERS}]")
_INVISIBLE = re.compile("[" + "".join(_FORMAT_RANGES) + BLANK_CHARACTERS + "]")


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def visible(text: str) -> str:
    """``text`` with every invisible character (format characters, blank letters) shown as its escape, ``\\u200b``."""
    return text if text.isascii() else _INVISIBLE.sub(lambda m: _escape(m.group()), text)


def _hidden(char: str) -> bool:
    return _INVISIBLE.match(char) is not None or unicodedata.category(char) in ("Cc", "Cf")


def invisible_in(text: str) -> list[str]:
    """The invisible characters of ``text`` (what ``visible`` escapes) and its controls, each once, as escapes."""
    if text.isascii() and text.isprintable():
        return []
    return [_escape(c) for c in dict.fromkeys(c for c in text if _hidden(c))]


def reveal(text: str) -> str:
    """``text`` with each character ``invisible_in`` finds shown as its escape: for a message about them."""
    return text if text.isascii() and text.isprintable() else "".join(_escape(c) if _hidden(c) else c for c in text)


def clean(text: str) -> str:
    """Normalise line breaks to "\\n", drop bidi and other control characters, replace lone surrogates with U+FFFD,
    show invisible characters escaped (``visible``)."""
    # Every character _cleaned changes is a control, format, surrogate, noncharacter, line or paragraph
    # separator, and none of those is printable, or a blank letter: most text (every plain id) has none,
    # and is kept as it is.
    return text if text.isprintable() and (text.isascii() or not _BLANK.search(text)) else _cleaned(text)


def _cleaned(text: str) -> str:
    text = _DROPPED.sub("", _LINE_BREAKS.sub("\n", text))
    return visible(LONE_SURROGATE.sub("\ufffd", text))


def _inert(text: str) -> str:
    """Escape every character that could become markup, a mention, a reference or a link."""
    text = text.translate(_MARKDOWN)
    text = _BARE_URL.sub("&#58;//", text)
    text = _GH_REFERENCE.sub("\\1" + _ZWJ + "\\2", text)
    return _BARE_WWW.sub(r"\1&#46;", text)


def _truncate(text: str, limit: int | None) -> str:
    """Cut raw text to at most `limit` characters, the last one an ellipsis."""
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    if limit is None or len(text) <= limit:
        return text
    return text[: limit - 1].rstrip() + ELLIPSIS


def cell(text: str, limit: int | None = 80) -> str:
    """Make untrusted text safe inside a GFM table cell: one line, inert, at most `limit` visible characters."""
    if (limit is None or len(text) <= limit) and _verbatim(text):
        return text  # what _escaped_cell gives back unchanged
    return _escaped_cell(text, limit)


def _verbatim(text: str) -> bool:
    """Whether ``_escaped_cell`` gives the text back as it is (string methods: most cells are plain and need no
    regex)."""
    if not text or text.strip(_VERBATIM_CHARS):  # no text goes the long way too: it checks the limit
        return False
    # no bare URL or issue reference: a "gh-" without a digit is checked the long way, not wrongly
    lowered = text.lower()
    return "://" not in lowered and "www." not in lowered and "gh-" not in lowered


def _escaped_cell(text: str, limit: int | None) -> str:
    flat = clean(text).replace("\n", NEWLINE_MARK)
    flat = _SPACES.sub(" ", flat).strip()
    # Truncate before escaping: the limit counts what the reader sees, and an escape
    # sequence such as `&amp;` or `\|` can never be cut in half.
    return _inert(_truncate(flat, limit))


def inline(text: str, limit: int | None = None) -> str:
    """Make untrusted text safe in a paragraph or list item: one line, inert, at most `limit` visible characters."""
    flat = _WHITESPACE.sub(" ", clean(text)).strip()
    escaped = _inert(_truncate(flat, limit))
    # `-`, `+`, `1.` or `=` at the start would turn the line into a list item or a
    # setext underline; `#`, `>`, `*` and fences are already neutralised by the table.
    return _LEADING_BLOCK.sub(_escape_leading, escaped, count=1)


def _escape_leading(match: re.Match[str]) -> str:
    """Backslash-escape the block marker found at the start of an inline text."""
    if match.group(3) is not None:
        return "\\" + match.group(3)
    return match.group(1) + "\\" + match.group(2)


def fenced(text: str, info: str = "text", *, limit: int | None = None) -> str:
    """Wrap untrusted text in a fenced code block that its content cannot close; no trailing newline."""
    body = _truncate(clean(text), limit)
    # GitHub does not link mentions inside <pre>/<code> (its html-pipeline MentionFilter skips
    # those parents), but that is not documented; a ZWJ after `@` is cheap insurance against
    # a comment edited on every push pinging someone each time.
    body = body.replace("@", "@" + _ZWJ)
    # Literal content may quote an HTML comment such as another tool's sticky-comment marker;
    # a ZWJ inside `<!--` keeps a plain substring search from mistaking our comment for theirs.
    body = body.replace("<!--", "<!" + _ZWJ + "--")
    longest = max((len(run) for run in _BACKTICK_RUN.findall(body)), default=0)
    # CommonMark: a closing fence must be at least as long as the opening one, so a fence
    # longer than any backtick run in the content cannot be closed from inside.
    fence = "`" * max(3, longest + 1)
    # A backtick fence's info string may not contain backticks; keep it to a language name.
    info = _INFO_DISALLOWED.sub("", info)
    if body and not body.endswith("\n"):
        body += "\n"
    return f"{fence}{info}\n{body}{fence}"
