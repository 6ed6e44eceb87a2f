"""Issue #27 item 8: invisible characters are refused in case ids and shown escaped (``\\u200b``) wherever rendered.

Two rows must not both read ``refund``: a zero-width space, a word joiner, a tag character or
a Hangul filler in an id is bad input on the id's line, and in any other text (answers, reasons,
file names) it is shown as its escape in the Markdown report and comment, the console, JUnit,
annotations and the Action's log.
"""
from __future__ import annotations

import io
import json
import sys
import unicodedata
from pathlib import Path

import pytest

from envelope_ci.action.log import Tee
from envelope_ci.errors import UsageError
from envelope_ci.formats.escape import cell, clean, fenced, inline, invisible_in, visible
from envelope_ci.github.commands import add_mask, error_annotation, warning
from envelope_ci.sources.cases import load_cases
from tests.support.suites import case, make_suite, run_report

pytestmark = pytest.mark.usefixtures("clean_env")

# The brief's list: format characters (Cf) and the blank letters and symbols.
NAMED = {
    "\u200b": "\\u200b",  # zero-width space
    "\u200c": "\\u200c",  # zero-width non-joiner
    "\u200d": "\\u200d",  # zero-width joiner
    "\u2060": "\\u2060",  # word joiner
    "\ufeff": "\\ufeff",  # byte order mark / zero-width no-break space
    "\u00ad": "\\u00ad",  # soft hyphen
    "\U000e0000": "\\U000e0000",  # first of the tag block
    "\U000e0041": "\\U000e0041",  # TAG LATIN CAPITAL LETTER A
    "\U000e007f": "\\U000e007f",  # CANCEL TAG
    "\u115f": "\\u115f",  # HANGUL CHOSEONG FILLER
    "\u1160": "\\u1160",  # HANGUL JUNGSEONG FILLER
    "\u3164": "\\u3164",  # HANGUL FILLER
    "\uffa0": "\\uffa0",  # HALFWIDTH HANGUL FILLER
    "\u2800": "\\u2800",  # BRAILLE PATTERN BLANK
}
# Dropped, not escaped, as before: they reorder what a reader sees ("trojan source").
BIDI = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")


def test_every_format_character_unicode_defines_is_shown_escaped():
    format_characters = [chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf"]
    assert len(format_characters) > 150
    missed = [f"U+{ord(c):04X}" for c in format_characters if visible(c) == c]
    assert missed == [], f"add these to escape._FORMAT_RANGES (Unicode {unicodedata.unidata_version}): {missed}"
    for char in format_characters:
        assert clean(f"a{char}b") == ("ab" if char in BIDI else f"a{visible(char)}b")


@pytest.mark.parametrize(("char", "escape"), NAMED.items(), ids=[f"U+{ord(c):04X}" for c in NAMED])
def test_each_renderer_shows_the_escape(char, escape):
    text = f"re{char}fund"
    assert clean(text) == f"re{escape}fund" and visible(text) == f"re{escape}fund"
    shown = escape.replace("\\", "&#92;")  # a backslash is an entity in Markdown: it renders as \u200b
    assert cell(text) == f"re{shown}fund" != cell("refund")
    assert inline(text) == f"re{shown}fund"
    assert fenced(text) == f"```text\nre{escape}fund\n```"
    assert invisible_in(text) == [escape]


def test_visible_text_is_kept_as_it_is():
    for text in ("refund", "réfund-日本-😀", "a\tb\nc", "Ünïcödé ok"):
        assert visible(text) == text and invisible_in(text.replace("\t", "").replace("\n", "")) == []
    assert clean("plain text") == "plain text"
    # The joiner escape.py itself puts after @ and # (so no one is mentioned) is its own, not the text's.
    assert cell("@octocat #12") == "@\u200doctocat #\u200d12"


@pytest.mark.parametrize(("char", "escape"), [*NAMED.items(), ("\u0001", "\\u0001"), ("\u180e", "\\u180e")],
                         ids=[*(f"U+{ord(c):04X}" for c in NAMED), "U+0001", "U+180E"])
def test_an_id_with_an_invisible_character_is_bad_input_on_its_line(tmp_path, char, escape):
    suite = make_suite(tmp_path, files={"cases.jsonl": json.dumps(case("refund", completion="x")) + "\n"
                                        + json.dumps(case(f"re{char}fund", completion="x")) + "\n"})
    with pytest.raises(UsageError) as caught:
        load_cases(suite, set())
    assert [str(p) for p in caught.value.problems] == [
        f"{suite.as_posix()}/cases.jsonl:2: id: 're{escape}fund' holds invisible characters ({escape}): "
        "an id must read as what it is; write it with visible characters"]


def test_an_id_is_refused_through_the_cli_with_exit_2(tmp_path):
    suite = make_suite(tmp_path, [case("refund", completion="x"), case("re\u200bfund", completion="x")])
    result, report = run_report(suite, tmp_path / "out")
    assert result.code == 2 and report is None
    assert "cases.yaml:4: id: 're\\u200bfund' holds invisible characters (\\u200b)" in result.err
    assert "\u200b" not in result.err


def test_ids_in_other_scripts_and_emoji_are_still_ids(tmp_path):
    suite = make_suite(tmp_path, [case(i, completion="x") for i in ("remboursé", "返金", "refund-😀", "Δ_1")])
    assert [c.id for c in load_cases(suite, set())] == ["remboursé", "返金", "refund-😀", "Δ_1"]


def test_answers_reasons_and_file_names_are_shown_escaped_in_every_report(tmp_path):
    answer = "re\u200bfund \u3164 ok \U000e0041"
    cases = [case("refund", completion=answer, must_include=["refund"])]
    suite = make_suite(tmp_path, files={"cases\u2060.yaml": cases})
    result, report = run_report(suite, tmp_path / "out")
    assert result.code == 1, result.err + result.out
    junit = (tmp_path / "out" / "junit.xml").read_text("utf-8")
    markdown = (tmp_path / "out" / "report.md").read_text("utf-8")
    for text in (result.out, junit, markdown):
        assert not [c for c in text if invisible_in(c) and c not in "\u200d\n"], text  # escape.py's own joiners aside
        assert "\u200b" not in text and "\u3164" not in text and "\U000e0041" not in text and "\u2060" not in text
    assert "cases\\u2060.yaml:1" in result.out
    assert 'file="' in junit and "cases\\u2060.yaml" in junit and "re\\u200bfund \\u3164 ok \\U000e0041" in junit
    assert "re&#92;u200bfund &#92;u3164 ok &#92;U000e0041" in markdown
    assert report is not None and report["cases"][0]["preview"].startswith("re\u200bfund")  # the data keeps the text


def test_annotations_and_the_action_log_show_the_escape_but_masks_stay_literal():
    assert error_annotation("evals/a.yaml", 3, "envelope-ci: re\u200bfund", "missing re\u200bfund") == \
        "::error file=evals/a.yaml,line=3,title=envelope-ci%3A re\\u200bfund::missing re\\u200bfund"
    assert warning("re\u3164fund", title="t\u2060") == "::warning title=t\\u2060::re\\u3164fund"
    assert add_mask("sk-\u200bsecret") == "::add-mask::sk-\u200bsecret"  # the runner must match the value itself
    stream = io.StringIO()
    tee = Tee(stream, lambda text: text.replace("sk-key", "***"))
    tee.write("case re\u200bfund sk-key\n")
    assert stream.getvalue() == tee.getvalue() == "case re\\u200bfund ***\n"


def test_the_case_schema_says_ids_have_no_invisible_characters():
    schema = json.loads((Path(__file__).resolve().parents[2] / "envelope_ci" / "case_schema.json").read_text("utf-8"))
    assert "invisible" in schema["properties"]["id"]["description"]
