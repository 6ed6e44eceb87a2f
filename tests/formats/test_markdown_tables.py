"""report.md's tables as a 100k-case merge writes them: the same numbers, counts and cells as the general code.

The cases table is written line by line and padded from its lines split back at `` | ``; numbers go
through formatters made for whole numbers and tenths. Each is checked against what it stands for.
"""
from __future__ import annotations

import json
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st
from msgspec.structs import replace

from envelope_ci.formats.escape import cell
from envelope_ci.formats.markdown import _case_line, _fmt_tenths, _fmt_whole, fmt_num, grid_section, table_of_lines
from envelope_ci.report.model import Report
from tests.support.suites import example_report_text

NUMBERS = [None, 0, 7, -3, 10**12, 0.0, 0.05, 0.15, 2.5, 3.5, 329.84999, -1.25, 1e16, True, False]


@pytest.fixture(scope="module")
def report() -> Report:
    """The support-bot example's report: every case pinned, two known failures."""
    return Report.from_json(json.loads(example_report_text("support-bot")))


@pytest.mark.parametrize("value", NUMBERS)
def test_whole_and_tenths_are_fmt_num(value: object) -> None:
    assert _fmt_whole(value) == fmt_num(value)
    assert _fmt_tenths(value) == fmt_num(value, 1)


def test_the_grid_counts_unstratified_cases_once_however_their_stratum_is_missing(report: Report) -> None:
    rows = report.cases
    mixed = replace(report, cases=(*rows, replace(rows[0], stratum=None), replace(rows[1], stratum="")),
                    strata={**report.strata, "unstratified": next(iter(report.strata.values()))})
    counts = Counter((c.stratum_name, c.channel.value) for c in mixed.cases)
    grid = "\n".join(grid_section(mixed))
    line = next(x for x in grid.splitlines() if x.startswith("| unstratified"))
    assert line.split("|")[2].strip() == str(counts[("unstratified", "stable")])


# Characters a cell keeps and some it escapes, and the pieces of a link or an issue reference.
CELL_PIECES = [*"aZ09.,:;/=+-_ |\\`*#@<>&!()[]~$\t\n\u200e\u2028é", "://", "www.", "WWW.", "gh-", "GH-1", "gh-x"]
CELL_TEXT = st.lists(st.sampled_from(CELL_PIECES), max_size=12).map("".join)


@given(CELL_TEXT, CELL_TEXT, st.booleans())
def test_a_case_line_splits_back_into_its_cells_whatever_its_texts(report: Report, case_id: str, stratum: str,
                                                                   streamed: bool) -> None:
    """A small cases table is padded from its lines split at `` | ``: no cell may hold that (a ``|`` is escaped)."""
    row = replace(report.cases[0], id=case_id or "x", stratum=stratum or None)
    line = _case_line(row, streamed, cell)
    cells = line[2:-2].split(" | ")
    assert len(cells) == 12 + streamed and line.startswith("| ") and line.endswith(" |")
    assert cells[0] == cell(row.id, 60) and cells[1] == cell(row.stratum or "–")
    assert cells[-1] == row.outcome.value.replace("_", " ")
    padded = table_of_lines(["h"] * len(cells), [line]).splitlines()[2]
    assert [c.strip() for c in padded[2:-2].split(" | ")] == [c.strip() for c in cells]
