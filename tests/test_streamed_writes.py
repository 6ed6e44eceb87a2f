"""Reports written in parts as they are made, and a run's objects held to the exit: the same bytes, less memory, no frees."""
from __future__ import annotations

import dataclasses
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import EXAMPLES, case, make_suite, run_report

from envelope_ci import atomic, held
from envelope_ci.api import run
from envelope_ci.cli import main
from envelope_ci.config import RunConfig
from envelope_ci.formats import markdown, registry
from envelope_ci.formats.base import ReportFormat
from envelope_ci.formats.builtin import JSON, JUNIT, MARKDOWN
from envelope_ci.formats.registry import write_reports
from envelope_ci.model import STRATA, Case, Detail
from envelope_ci.report.codec import to_json
from envelope_ci.report.model import Report
from envelope_ci.result import RunResult

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
    rows = [dataclasses.replace(small.cases[i % len(small.cases)], id=f"case-{i:05d}") for i in range(BIG)]
    rows[7] = dataclasses.replace(rows[7], id="caf\u00e9-\u2014-\U0001f600")
    rows[9] = dataclasses.replace(rows[9], ttft_ms=12.5)
    return dataclasses.replace(small, cases=tuple(rows))


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
    longest_row = max(len(fmt.render(dataclasses.replace(big, cases=(row,)), Detail.FULL)) for row in big.cases[:10])
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
    assert lines == ["    " + json.dumps(to_json(row), ensure_ascii=False) for row in big.cases]


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


@pytest.fixture
def kept(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """What is held to the exit, in a list of this test's own."""
    objects: list[object] = []
    monkeypatch.setattr(held, "_HELD", objects)
    return objects


def test_held_to_exit_only_within_holding(kept: list[object]) -> None:
    first, second, third = object(), object(), object()
    held.hold_to_exit(first)
    assert kept == []
    with held.holding_to_exit():
        with held.holding_to_exit():
            held.hold_to_exit(second)
        held.hold_to_exit(third)  # the inner block ended, the outer holds on
    held.hold_to_exit(first)
    assert kept == [(second,), (third,)]


def _suite_config(tmp_path: Path) -> RunConfig:
    suite = make_suite(tmp_path, [case(f"c{i}", completion="fine", must_include=["fine"]) for i in range(3)])
    return RunConfig(fixtures_dir=suite, pins_path=suite / "envelope-pins.json", out_dir=tmp_path / "out")


def test_a_run_holding_to_exit_holds_its_cases_and_writes_the_same_reports(tmp_path: Path, kept: list[object]) -> None:
    config = _suite_config(tmp_path)
    freed = run(config)
    assert kept == []
    with held.holding_to_exit():
        holding = run(dataclasses.replace(config, out_dir=tmp_path / "kept"))
    cases = [c for objects in kept for each in objects if isinstance(each, list) for c in each if isinstance(c, Case)]
    assert sorted({c.id for c in cases}) == ["c0", "c1", "c2"]
    assert holding.report == freed.report and holding.exit_code == freed.exit_code
    for name in ("report.json", "report.md", "junit.xml"):
        assert (tmp_path / "kept" / name).read_bytes() == (tmp_path / "out" / name).read_bytes()


def test_the_command_holds_its_result_only_when_asked(tmp_path: Path, kept: list[object]) -> None:
    config = _suite_config(tmp_path)
    assert main(["run", str(config.fixtures_dir), "--out", str(tmp_path / "a"), "--quiet"]) == 0
    assert kept == []
    assert main(["run", str(config.fixtures_dir), "--out", str(tmp_path / "b"), "--quiet"], hold=True) == 0
    assert any(isinstance(each, RunResult) for objects in kept for each in objects)
    assert not held._holding  # the block ends with the command


# -- what the forked writers read lies among the rows ------------------------------------------

def test_what_the_forked_writers_read_of_each_row_lies_among_the_rows(tmp_path, monkeypatch):
    """Each object a forked writer reads copies its page there: a 100k-case run's writer copied 199 MB, 95 MB now.

    The case ids and strata were parsed among the fixtures' other values, and each answer's
    finish_reason among its recording's: a run's rows hold a copy of the id made with the row,
    and one string per stratum and per known finish_reason is shared by every case.
    """
    import envelope_ci.api as api_module
    from envelope_ci.providers.openai_chat import read_reply

    loaded: list[Case] = []

    def load_and_keep(*args, **kwargs):
        loaded.extend(real_load(*args, **kwargs))
        return loaded

    real_load = api_module.load_cases
    monkeypatch.setattr(api_module, "load_cases", load_and_keep)
    suite = make_suite(tmp_path, files={"c.jsonl": [case(f"c{i}", stratum="easy", completion="ok") for i in range(3)]})
    report = run(RunConfig(fixtures_dir=suite, pins_path=suite / "envelope-pins.json", out_dir=tmp_path / "out")).report
    assert [c.stratum for c in loaded] == ["easy"] * 3 and all(c.stratum is STRATA[0] for c in loaded)
    assert [row.id for row in report.cases] == [c.id for c in loaded] == ["c0", "c1", "c2"]
    assert not any(row.id is c.id for row, c in zip(report.cases, loaded, strict=True))
    assert [row.preview for row in report.cases] == ["ok"] * 3 and not any(row.preview is c.completion for row, c in zip(report.cases, loaded, strict=True))
    # Each parsed on its own, as each recording's line is: equal strings, distinct objects.
    bodies = [json.loads(json.dumps({"choices": [{"message": {"content": "x"}, "finish_reason": reason}]})) for reason in ("stop", "stop", "odd")]
    replies = [read_reply(body) for body in bodies]
    assert [r.finish_reason for r in replies if r is not None] == ["stop", "stop", "odd"]
    assert replies[0] is not None and replies[1] is not None and replies[0].finish_reason is replies[1].finish_reason
