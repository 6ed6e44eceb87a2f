"""The typed report: report.json round-trips exactly, validates against its published schema,
and matches the golden reports of the bundled examples."""
from __future__ import annotations

import json

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envelope_ci.canonical import LONE_SURROGATE
from envelope_ci.model import Gate
from envelope_ci.report.build import scrub
from envelope_ci.report.model import REPORT_VERSION, Report, dump_report, report_schema
from tests.support.suites import EXAMPLES, run_cli, run_report, to_json

SUITES = ["support-bot", "planted", *(f"alerts/{p.name}" for p in sorted((EXAMPLES / "alerts").iterdir()))]


@pytest.mark.parametrize("suite", SUITES)
def test_report_json_round_trips_and_validates(suite, tmp_path):
    _, data = run_report(EXAMPLES / suite, tmp_path / "out")
    text = (tmp_path / "out" / "report.json").read_text("utf-8")
    report = Report.from_json(data)
    assert report.to_json() == data
    assert dump_report(report) == text
    assert Report.from_json(report.to_json()) == report
    jsonschema.Draft202012Validator(report_schema()).validate(data)
    assert data["report_version"] == REPORT_VERSION == 3


def test_every_case_row_carries_its_gate(tmp_path):
    _, data = run_report(EXAMPLES / "alerts" / "easy-regression", tmp_path / "out")
    gates = {c["id"]: c["gate"] for c in data["cases"]}
    assert set(gates.values()) <= {g.value for g in Gate}
    failing = [c for c in data["cases"] if c["stratum"] == "easy" and c["channel"] != "stable"]
    assert failing and all(c["gate"] == "fail" for c in failing)


def test_a_written_pins_update_round_trips(tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "c.yaml").write_text("- {id: a, prompt: p, completion: sure}\n- {id: b, prompt: p, completion: nope, must_include: [sure]}\n", "utf-8")
    result, data = run_report(suite, tmp_path / "out", "--lane", "adjudication", "--write-pins")
    assert result.code in (0, 1) and data["pins_update"]["moved"][0]["from"] is None
    assert Report.from_json(data).to_json() == data
    jsonschema.Draft202012Validator(report_schema()).validate(data)


def test_schema_report_command_prints_the_schema():
    result = run_cli(["schema", "report"])
    assert result.code == 0 and json.loads(result.out) == to_json(report_schema())  # msgspec gives tuple defaults
    assert "gate" in report_schema()["$defs"]["CaseRow"]["required"]


# -- text in the report: lone surrogates replaced, nothing else -----------------------------------------

SURROGATE_TEXT = st.lists(st.sampled_from(["a", " ", "\u00e9", "\ud800", "\udc00", "\U0001f600", "\ufffd"]),
                          max_size=8).map("".join)


@settings(max_examples=400)
@given(text=SURROGATE_TEXT | st.lists(SURROGATE_TEXT, max_size=3))
def test_scrub_replaces_exactly_the_lone_surrogates(text):
    """ASCII text is given back as it is; any other has each lone surrogate replaced, and nothing else changed."""
    texts = [text] if isinstance(text, str) else text
    scrubbed = scrub(text)
    got = list(scrubbed) if not isinstance(text, str) else [scrubbed]
    assert got == [LONE_SURROGATE.sub("\ufffd", t) for t in texts]
