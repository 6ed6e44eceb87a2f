"""report.json's case rows read back as they were written: keys in any order, a missing key refused.

A 100k-case merge reads each row by copying its dict whole when every key is a field's; these check
that short cut against the plain reading, over the support-bot example's rows and generated ones.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec.structs import fields, replace

from envelope_ci.report.model import CaseRow, Report, ShardCase, dump_report
from tests.support.suites import example_report_text, from_json, to_json


@pytest.fixture(scope="module")
def text() -> str:
    """The support-bot example's report.json: every case pinned, two known failures."""
    return example_report_text("support-bot")


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


# -- generated rows ---------------------------------------------------------------------------


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


@settings(max_examples=200)
@given(case=st.from_type(ShardCase), row=st.from_type(CaseRow),
       dropped=st.sampled_from(["id", "stratum", "chars", "ms", "attempts", "preview", "pin"]))
def test_a_row_missing_a_key_is_not_a_row_this_version_wrote(case, row, dropped):
    """ShardCase leaves its temperature out while None; a row without one of its keys is refused, naming the key."""
    assert same(from_json(ShardCase, to_json(case)), as_dicts(case))
    data = to_json(row)
    del data[dropped]
    with pytest.raises(msgspec.ValidationError, match=f"missing required field `{dropped}`"):
        from_json(CaseRow, data)


@settings(max_examples=100)
@given(row=st.from_type(CaseRow), data=st.data())
def test_keys_in_any_order_or_unknown_read_as_the_fields_and_write_in_field_order(row, data):
    """A row is read by copying its whole dict when every key is a field's: another order or a foreign key changes
    nothing."""
    plain = to_json(row)
    shuffled = dict(data.draw(st.permutations(list(plain.items()))))
    back = from_json(CaseRow, shuffled)
    assert same(back, as_dicts(row))
    assert list(to_json(back).items()) == list(plain.items())
    assert same(from_json(CaseRow, {**shuffled, "unknown": 1}), as_dicts(row))
