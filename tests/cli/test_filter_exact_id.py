"""``run --filter``: an exact id is matched as written before it is read as a glob, so a vars matrix's ids, which
hold ``[``, select their own case."""
from __future__ import annotations

import pytest

from tests.support.suites import answer_case, make_suite, run_report

pytestmark = pytest.mark.usefixtures("clean_env")


def matrix_suite(tmp_path):
    """A matrix over two cities, and a case whose id the bracket glob ``refund-window[city=Paris]`` matches."""
    matrix = {**answer_case("refund-window"), "prompt": "Refund window in {{ city }}?", "vars": {"city": ["Paris", "Lyon"]},
              "tags": ["billing"]}
    return make_suite(tmp_path, [matrix, answer_case("refund-windows"), answer_case("greeting")])


def selected(tmp_path, *filters):
    args = [a for f in filters for a in ("--filter", f)]
    result, report = run_report(matrix_suite(tmp_path), tmp_path / "out", *args)
    assert report is not None, result.err
    return [row["id"] for row in report["cases"]]


def test_an_exact_matrix_id_selects_exactly_that_case(tmp_path):
    assert selected(tmp_path, "refund-window[city=Paris]") == ["refund-window[city=Paris]"]


def test_an_exact_id_after_the_id_prefix_selects_exactly_that_case(tmp_path):
    assert selected(tmp_path, "id:refund-window[city=Lyon]") == ["refund-window[city=Lyon]"]


def test_a_filter_that_is_no_cases_id_is_still_a_glob(tmp_path):
    # [s] is a set of one character here: no case is called that, so the glob selects refund-windows
    assert selected(tmp_path, "refund-window[s]") == ["refund-windows"]


def test_a_glob_selects_every_case_of_a_matrix(tmp_path):
    assert selected(tmp_path, "refund-window[[]city=*]") == ["refund-window[city=Paris]", "refund-window[city=Lyon]"]


def test_a_tag_filter_selects_every_case_the_tagged_matrix_made(tmp_path):
    assert selected(tmp_path, "tag:billing") == ["refund-window[city=Paris]", "refund-window[city=Lyon]"]
