"""Reports written in parts as they are made: the same bytes, less memory."""
from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from msgspec.structs import replace

from envelope_ci import atomic
from envelope_ci.formats import markdown, registry
from envelope_ci.formats.base import ReportFormat
from envelope_ci.formats.builtin import JSON, JUNIT, MARKDOWN
from envelope_ci.formats.registry import write_reports
from envelope_ci.model import Detail
from envelope_ci.report.model import Report
from tests.support.suites import EXAMPLES, run_report, to_json

pytestmark = pytest.mark.usefixtures("clean_env")

# More rows than markdown pads (PADDED_ROWS_MAX): the table of every case then comes a line at a time.
BIG = markdown.PADDED_ROWS_MAX * 3


@pytest.fixture(scope="module")
def small() -> Report:
    """The support-bot example's report: pinned rows, known failures, every section."""
    out = Path(tempfile.mkdtemp()) / "out"
    run_report(EXAMPLES / "support-bot", out)
    return Report.from_json(json.loads((out / "report.json").read_text("utf-8")))


@pytest.fixture(scope="module")
def big(small: Report) -> Report:
    """The example's rows again and again under new ids (one not ASCII, one streamed), past the padded table's size."""
    rows = [replace(small.cases[i % len(small.cases)], id=f"case-{i:05d}") for i in range(BIG)]
    rows[7] = replace(rows[7], id="caf\u00e9-\u2014-\U0001f600")
    rows[9] = replace(rows[9], ttft_ms=12.5)
    return replace(small, cases=tuple(rows))


@pytest.mark.parametrize("which", ["small", "big"])
@pytest.mark.parametrize("fmt", [JSON, MARKDOWN, JUNIT], ids=lambda f: f.name)
def test_each_format_writes_what_it_renders(which: str, fmt: ReportFormat, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    report = request.getfixturevalue(which)
    write_reports(report, tmp_path)
    assert fmt.parts is not None
    assert (tmp_path / fmt.filename).read_text("utf-8") == fmt.render(report, Detail.FULL)


@pytest.mark.parametrize("detail", list(Detail))
def test_markdown_parts_join_to_the_rendered_text_at_every_detail(big: Report, small: Report, detail: Detail) -> None:
    for report in (big, small):
        assert "".join(markdown.markdown_parts(report, detail)) == markdown.render_markdown(report, detail)


def test_markdown_parts_are_the_whole_render_when_the_mark_is_found_in_the_text(big: Report, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(markdown, "_TABLE_HERE", "### ")  # in every heading too: where the table goes is not known
    assert list(markdown.markdown_parts(big)) == [markdown.render_markdown(big)]


@pytest.mark.parametrize("fmt", [JSON, MARKDOWN, JUNIT], ids=lambda f: f.name)
def test_a_big_report_comes_a_row_at_a_time(big: Report, fmt: ReportFormat) -> None:
    assert fmt.parts is not None
    parts = list(fmt.parts(big, Detail.FULL))
    longest_row = max(len(fmt.render(replace(big, cases=(row,)), Detail.FULL)) for row in big.cases[:10])
    assert len(parts) > len(big.cases)
    # Only the text around the rows comes whole: no part holds more than one row's worth.
    assert max(len(p) for p in parts[1:-1]) < longest_row
    assert all(row.id in "".join(parts) for row in big.cases[::97])


def test_a_format_without_parts_is_written_from_its_render(small: Report, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plain = ReportFormat("csv", "cases.csv", lambda report, detail: "".join(f"{c.id}\n" for c in report.cases))
    formats = {**registry.report_formats(), "csv": plain}
    monkeypatch.setattr(registry, "report_formats", lambda: formats)
    write_reports(small, tmp_path, ("csv",))
    assert (tmp_path / "cases.csv").read_text("utf-8") == "".join(f"{c.id}\n" for c in small.cases)


def test_report_json_is_the_report_data_with_a_row_a_line(big: Report) -> None:
    text = "".join(JSON.text_parts(big, Detail.FULL))
    assert json.loads(text) == big.to_json()
    opened = text.index('\n  "cases": [\n') + len('\n  "cases": [\n')
    lines = text[opened:text.rindex("\n  ]\n}\n")].split(",\n")
    assert lines == ["    " + json.dumps(to_json(row), ensure_ascii=False, separators=(",", ":")) for row in big.cases]


def test_a_write_that_fails_midway_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    target.write_text("old\n", "utf-8")

    def parts() -> Iterator[str]:
        yield "new "
        raise RuntimeError("a row would not encode")

    with pytest.raises(RuntimeError):
        atomic.write_parts(target, parts())
    assert target.read_text("utf-8") == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]
    atomic.write_parts(target, iter(["new ", "text\n"]))
    assert target.read_text("utf-8") == "new text\n"
