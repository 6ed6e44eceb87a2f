"""The fast paths of writing and reading a report give exactly what the plain ones give.

A 100k-case merge or run is written and read through shortcuts: the XML of junit.xml written as
text, and escaping that returns text needing none as it is. Each is checked here against the plain
behaviour it stands for, over the bundled examples' reports and over generated ones with hostile
text; and reading a report's rows takes their keys in any order.
"""
from __future__ import annotations

import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import msgspec
import pytest
from conftest import EXAMPLES, from_json, run_report, to_json
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec.structs import fields, replace

from envelope_ci.formats.escape import _cleaned, _escaped_cell, cell, clean
from envelope_ci.formats.junit import JUNIT_KIND, render_junit
from envelope_ci.model import Channel, Gate, Label, Outcome
from envelope_ci.report.model import CaseRow, Report, ShardCase

pytestmark = pytest.mark.usefixtures("clean_env")

SUITES = ["support-bot", "planted", "booking-agent", *(f"alerts/{p.name}" for p in sorted((EXAMPLES / "alerts").iterdir()))]


def bounded(examples: int) -> settings:
    return settings(max_examples=examples, derandomize=True, database=None, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


# Text near every edge of the escapers: markup, URLs and references, whitespace, controls, bidi, surrogates.
NASTY = st.sampled_from(["://", "www.", "WwW.", "gh-1", "GH-9", "xgh-1", "_gh-1", "@a", "#1", "&", "<", ">", "|", "\\", "`", "*", "_",
                         "[", "]", "(", ")", "!", "~", "$", " ", "  ", "\t", "\n", "\r\n", "\x0b", "\x85", "\u2028", "\u202e", "\u200e",
                         "\x00", "\x1b", "\x7f", "\ufffe", "\ud800", "\udfff", "é", "\u212a", "\u017f", ".", ",", ":", "/", "-", "=", "+"])
TEXT = st.one_of(st.lists(NASTY | st.text("abgwhGHW019.,:;/=+-", max_size=4), max_size=12).map("".join), st.text(max_size=40))


@bounded(1500)
@given(text=TEXT, limit=st.none() | st.integers(-1, 50))
def test_cell_returns_text_unchanged_only_where_escaping_would(text, limit):
    def outcome(fn: Any) -> str:
        try:
            return fn(text, limit)
        except ValueError as exc:
            return f"ValueError: {exc}"

    assert outcome(cell) == outcome(_escaped_cell)


@bounded(1500)
@given(text=TEXT)
def test_clean_keeps_printable_text_as_it_is(text):
    assert clean(text) == _cleaned(text)


# -- reading rows ---------------------------------------------------------------------------


def as_dicts(value: Any) -> Any:
    """A generated value with every mapping (hypothesis makes ChainMaps, among others) as the dict a reader makes."""
    if isinstance(value, msgspec.Struct):
        return replace(value, **{f.name: as_dicts(getattr(value, f.name)) for f in fields(value)})
    if isinstance(value, tuple):
        return tuple(as_dicts(v) for v in value)
    if isinstance(value, Mapping):
        return {k: as_dicts(v) for k, v in value.items()}
    return value


def same(a: Any, b: Any) -> bool:
    """Equal, and of the same types throughout (a str-valued enum equals its str): their reprs say both."""
    return repr(a) == repr(b)


@cache
def example_report(suite: str) -> dict[str, Any]:
    _, data = run_report(EXAMPLES / suite, Path(tempfile.mkdtemp()) / "out")
    assert data is not None
    return data


@bounded(200)
@given(case=st.from_type(ShardCase), row=st.from_type(CaseRow), dropped=st.sampled_from(["id", "stratum", "chars", "ms", "attempts", "preview", "pin"]))
def test_a_row_missing_a_key_is_not_a_row_this_version_wrote(case, row, dropped):
    """ShardCase leaves its temperature out while None; a row without one of its keys is refused, naming the key."""
    assert same(from_json(ShardCase, to_json(case)), as_dicts(case))
    data = to_json(row)
    del data[dropped]
    with pytest.raises(msgspec.ValidationError, match=f"missing required field `{dropped}`"):
        from_json(CaseRow, data)


@bounded(100)
@given(row=st.from_type(CaseRow), data=st.data())
def test_keys_in_any_order_or_unknown_read_as_the_fields_and_write_in_field_order(row, data):
    """A row is read by copying its whole dict when every key is a field's: another order or a foreign key changes nothing."""
    plain = to_json(row)
    shuffled = dict(data.draw(st.permutations(list(plain.items()))))
    back = from_json(CaseRow, shuffled)
    assert same(back, as_dicts(row))
    assert list(to_json(back).items()) == list(plain.items())
    assert same(from_json(CaseRow, {**shuffled, "unknown": 1}), as_dicts(row))


# -- junit.xml as ElementTree writes it ------------------------------------------------------------


def element_tree_junit(report: Report, suite: str = "envelope-ci") -> str:
    """junit.xml as an ElementTree, indented and serialised: what the text writer must equal byte for byte."""
    cases = report.cases
    kinds = [JUNIT_KIND[c.gate] for c in cases]
    counts = {k: str(kinds.count(k)) for k in ("failure", "error", "skipped")}
    total_s = f"{sum((c.ms or 0.0) for c in cases) / 1000.0:.3f}"
    root = ET.Element("testsuites", name=suite, tests=str(len(cases)), failures=counts["failure"], errors=counts["error"], time=total_s)
    ts = ET.SubElement(root, "testsuite", name=suite, tests=str(len(cases)), failures=counts["failure"], errors=counts["error"],
                       skipped=counts["skipped"], time=total_s)
    for c, kind in zip(cases, kinds, strict=True):
        attrs = {"classname": f"{suite}.{c.stratum_name}", "name": clean(c.id), "time": f"{(c.ms or 0.0) / 1000.0:.3f}"}
        if c.file:
            attrs["file"] = clean(c.file)
        if c.line:
            attrs["line"] = str(c.line)
        tc = ET.SubElement(ts, "testcase", attrs)
        if kind is None:
            continue
        reasons = clean("; ".join(c.reasons))
        label, channel, outcome = c.label.value, c.channel.value, c.outcome.value
        if kind == "error":
            ET.SubElement(tc, "error", message=f"{label}: {reasons}"[:500], type=label).text = reasons
        elif kind == "skipped":
            ET.SubElement(tc, "skipped", message=f"not stable but not failing the gate: {channel} ({outcome}): {reasons}"[:500])
        else:
            el = ET.SubElement(tc, "failure", message=f"{channel} ({outcome}): {reasons}"[:500], type=channel)
            el.text = reasons + ("\n\nanswer: " + clean(c.preview) if c.preview else "")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


@pytest.mark.parametrize("suite", SUITES)
def test_junit_of_every_example_is_what_element_tree_writes(suite):
    report = Report.from_json(example_report(suite))
    assert render_junit(report) == element_tree_junit(report)


XML_TEXT = TEXT.map(lambda t: t.replace("\ud800", "").replace("\udfff", ""))  # an XML writer cannot write a lone surrogate
ROWS = st.builds(
    lambda id_, stratum, reasons, preview, file, line, ms, gate, label, channel, outcome: (id_, stratum, reasons, preview, file, line, ms, gate,
                                                                                          label, channel, outcome),
    XML_TEXT, st.none() | XML_TEXT, st.lists(XML_TEXT, max_size=3).map(tuple), st.none() | XML_TEXT, XML_TEXT,
    st.none() | st.integers(0, 10**6), st.none() | st.floats(0, 1e7), st.sampled_from(Gate), st.sampled_from(Label), st.sampled_from(Channel),
    st.sampled_from(Outcome))


@bounded(150)
@given(rows=st.lists(ROWS, max_size=6))
def test_junit_of_any_cases_is_what_element_tree_writes(rows):
    template = Report.from_json(example_report("support-bot"))
    base = template.cases[0]
    cases = tuple(replace(base, id=i, stratum=s, reasons=r, preview=p, file=f, line=n, ms=ms, gate=g, label=lab, channel=ch, outcome=o)
                  for i, s, r, p, f, n, ms, g, lab, ch, o in rows)
    report = replace(template, cases=cases)
    assert render_junit(report) == element_tree_junit(report)


def test_grading_asks_an_assertion_only_for_the_failures_it_can_give():
    """``_label`` skips an expectation whose ``kind.judged_as`` lacks the failure asked: it would have answered nothing."""
    from envelope_ci.grading.assertions.base import Answer, Expectation, Failure
    from envelope_ci.grading.assertions.registry import assertion_types

    answers = [Answer("hello"), Answer('{"a": 1}', {"a": 1}, True), Answer('{"a"', None, False),
               Answer("", None, False, ({"type": "function", "function": {"name": "f", "arguments": "{not json"}},))]
    values = {"is-json": None, "max-chars": 3, "tool-call": [{"name": "f"}], "llm-rubric": None, "python": None}
    asked = 0
    for kind in assertion_types().values():
        assert kind.judged_as == {kind.failure, *([Failure.SCHEMA] if kind.check_shape else [])}
        if kind.name not in values and kind.prepare is not None:
            continue  # its value must be prepared from a fixture: covered by its own tests
        for failure in Failure:
            if failure in kind.judged_as:
                continue
            for answer in answers:
                for negated in (False, True) if kind.check_not else (False,):
                    assert Expectation(kind, values.get(kind.name, "x"), negated).failures_as(failure, answer, None) == []
                    asked += 1
    assert asked > 50


@given(labels=st.lists(st.sampled_from(Label), min_size=1, max_size=4))
def test_a_case_label_is_the_worst_delivered_repeat_one_repeat_or_many(labels):
    from envelope_ci.analysis.cases import _SEVERITY, case_label
    from envelope_ci.model import Grade

    grades = [Grade(label, (), None, None, None, 200, None, None, False, None, None, 1) for label in labels]
    delivered = [label for label in labels if not label.is_transport]
    assert case_label(grades) is (min(delivered, key=_SEVERITY.index) if delivered else labels[-1])


@given(budgets=st.lists(st.tuples(st.integers(0, 500), st.booleans()), max_size=4))
def test_a_case_budget_is_its_tightest_size_assertion(budgets):
    from envelope_ci.grading.assertions.base import Expectation
    from envelope_ci.grading.assertions.registry import assertion_types
    from envelope_ci.model import Case

    kinds = assertion_types()
    expectations = tuple(Expectation(kinds["max-chars"], value, negated) for value, negated in budgets) + (Expectation(kinds["contains"], "x"),)
    case = Case("c", None, (), "f", 1, "d", expectations)
    kept = [value for value, negated in budgets if not negated]
    assert case.max_chars == (min(kept) if kept else None)
