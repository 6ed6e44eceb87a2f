"""A ``regex`` or ``json-path`` pattern that can backtrack catastrophically is bad input at load time, on its line."""
from __future__ import annotations

import pytest

from envelope_ci.grading.assertions.regex import pattern_problem
from tests.support.suites import case, make_suite, run_cli

NESTED = [r"(a+)+$", r"^(\w+\s?)+$", r"(a*)*b", r"(?:x+x+)+y", r"((ab)+)+", r"(\s*)*x"]
FINE = [r"refund", r"(foo|bar)+", r"\d+\s*\d+", r"^[a-z]+(-[a-z]+)*$", r"(\s*,\s*\w+)*", r"(a?)*b", r"(?i)^order #\d+"]


@pytest.mark.parametrize("pattern", NESTED)
def test_a_nested_unbounded_repeat_is_refused(pattern):
    assert "can backtrack catastrophically" in (pattern_problem(pattern) or "")


@pytest.mark.parametrize("pattern", FINE)
def test_an_ordinary_pattern_is_accepted(pattern):
    assert pattern_problem(pattern) is None


@pytest.mark.parametrize("entry", [
    {"type": "regex", "value": "(a+)+$"},
    {"type": "json-path", "value": {"path": "$.a", "matches": "(a+)+$"}},
])
def test_the_refusal_names_the_file_line_and_field_before_any_grading(tmp_path, entry):
    suite = make_suite(tmp_path, [case("ok", completion="{}"), case("bad", completion='{"a": "aaa"}', **{"assert": [entry]})])
    result = run_cli(["run", suite, "--out", tmp_path / "out"])
    assert result.code == 2 and "cases.yaml" in result.err and "assert.0.value" in result.err, result.err
    assert "can backtrack catastrophically" in result.err and not (tmp_path / "out").exists()
