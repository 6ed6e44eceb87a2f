"""The short cuts a 100k-case merge writes its rows by give exactly what the long ways give."""
from __future__ import annotations

import json
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from conftest import EXAMPLES, from_json, run_report, to_json
from hypothesis import given
from hypothesis import strategies as st
from msgspec.structs import replace

from envelope_ci.formats.escape import _escaped_cell, _verbatim, cell
from envelope_ci.formats.markdown import _case_line, grid_section, table_of_lines
from envelope_ci.report.model import CaseRow, Report, dump_report


@pytest.fixture(scope="module")
def text() -> str:
    """The support-bot example's report.json: every case pinned, two known failures."""
    out = Path(tempfile.mkdtemp()) / "out"
    run_report(EXAMPLES / "support-bot", out)
    return (out / "report.json").read_text("utf-8")


@pytest.fixture(scope="module")
def report(text: str) -> Report:
    return Report.from_json(json.loads(text))


def test_the_example_has_pinned_rows_for_these_tests_to_mean_something(report: Report) -> None:
    assert report.cases and all(c.pin is not None and c.pin.fingerprint is not None for c in report.cases)


def test_a_row_read_with_its_keys_out_of_order_is_written_in_field_order(report: Report) -> None:
    data = to_json(report.cases[0])
    row = from_json(CaseRow, dict(reversed(data.items())))
    assert list(to_json(row)) == list(data)
    one = replace(report, cases=(row,))
    assert dump_report(one) == dump_report(replace(report, cases=report.cases[:1]))


def test_a_report_is_written_as_it_was_read(text: str, report: Report) -> None:
    assert dump_report(report) == text


# Characters a cell keeps and some it escapes, and the pieces of a link or an issue reference.
_CELL_PIECES = [*"aZ09.,:;/=+-_ |\\`*#@<>&!()[]~$\t\n\u200e\u2028é", "://", "www.", "WWW.", "gh-", "GH-1", "gh-x"]
_CELL_TEXT = st.lists(st.sampled_from(_CELL_PIECES), max_size=12).map("".join)


@given(_CELL_TEXT, st.sampled_from([None, 5, 60, 80]))
def test_a_cell_given_back_as_it_is_is_what_escaping_it_gives(text: str, limit: int | None) -> None:
    assert cell(text, limit) == _escaped_cell(text, limit)


def test_plain_ids_are_given_back_without_escaping_and_links_are_not() -> None:
    assert _verbatim("case-000005") and _verbatim("a/b.c:1=2+3,4;5")
    assert not any(map(_verbatim, ["a b", "x_y", "https://x", "WWW.x", "see GH-12", "é"]))


def test_the_grid_counts_unstratified_cases_once_however_their_stratum_is_missing(report: Report) -> None:
    rows = report.cases
    mixed = replace(report, cases=(*rows, replace(rows[0], stratum=None), replace(rows[1], stratum="")),
                                strata={**report.strata, "unstratified": next(iter(report.strata.values()))})
    counts = Counter((c.stratum_name, c.channel.value) for c in mixed.cases)
    grid = "\n".join(grid_section(mixed))
    line = next(x for x in grid.splitlines() if x.startswith("| unstratified"))
    assert line.split("|")[2].strip() == str(counts[("unstratified", "stable")])


@given(_CELL_TEXT, _CELL_TEXT, st.booleans())
def test_a_case_line_splits_back_into_its_cells_whatever_its_texts(report: Report, case_id: str, stratum: str, streamed: bool) -> None:
    """A small cases table is padded from its lines split at `` | ``: no cell may hold that (a cell's own ``|`` is escaped)."""
    row = replace(report.cases[0], id=case_id or "x", stratum=stratum or None)
    line = _case_line(row, streamed, cell)
    cells = line[2:-2].split(" | ")
    assert len(cells) == 12 + streamed and line.startswith("| ") and line.endswith(" |")
    assert cells[0] == cell(row.id, 60) and cells[1] == cell(row.stratum or "–") and cells[-1] == row.outcome.value.replace("_", " ")
    padded = table_of_lines(["h"] * len(cells), [line]).splitlines()[2]
    assert [c.strip() for c in padded[2:-2].split(" | ")] == [c.strip() for c in cells]
