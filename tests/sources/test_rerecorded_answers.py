"""Re-records that show what changed (docs/pins.md): recordings keep no per-call noise, and a re-recorded suite's
pin diff tells a changed answer (``modified``) from one whose time only moved (``retimed``)."""
from __future__ import annotations

import json
from pathlib import Path

from tests.support.loaded_server import LoadedServer
from tests.support.suites import case, make_suite, run_cli, run_report

IDS = [f"r{i}" for i in range(6)]


def _suite(tmp_path: Path, config: str | None = None) -> Path:
    return make_suite(tmp_path, [case(cid, prompt=f"Say ok. [[{cid}]]", must_include=["ok"]) for cid in IDS],
                      config=config)


def _record(suite: Path, srv: LoadedServer, path: Path) -> None:
    assert run_cli(["run", suite, "--out", path.parent / f"{path.stem}-out", "--base-url", srv.url, "--model", "m",
                    "--record", path]).code in (0, 1)  # recorded whatever the verdict
    assert run_cli(["import", path, "--into", suite]).code == 0


def _pinned_then_rerecorded(tmp_path: Path, changed: str, base: Path | None = None) -> Path:
    """A suite recorded and pinned, then re-recorded with one answer changed (right still, and as long); ``base``
    keeps the pins as they were before."""
    suite = _suite(tmp_path)
    with LoadedServer(base_ms=5.0) as srv:
        srv.answers.update({cid: "ok." for cid in IDS})
        _record(suite, srv, tmp_path / "first.jsonl")
        assert run_cli(["run", suite, "--out", tmp_path / "pin", "--lane", "adjudication", "--write-pins"]).code == 0
        if base is not None:
            base.write_text((suite / "envelope-pins.json").read_text("utf-8"), "utf-8")
        srv.answers[changed] = "ok!"
        _record(suite, srv, tmp_path / "second.jsonl")
    return suite


def test_recordings_keep_no_response_headers_id_or_created(tmp_path):
    suite = _suite(tmp_path)
    with LoadedServer(base_ms=5.0) as srv:
        _record(suite, srv, tmp_path / "rec.jsonl")
    for line in (tmp_path / "rec.jsonl").read_text("utf-8").splitlines():
        recorded = json.loads(line)["recorded"]
        assert recorded["headers"] == {}
        assert "id" not in recorded["body"] and "created" not in recorded["body"]
        assert recorded["body"]["choices"][0]["message"]["content"] == "ok"


def test_record_headers_names_the_response_headers_to_keep(tmp_path):
    suite = _suite(tmp_path, config="record_headers: [X-Request-Id]\n")
    with LoadedServer(base_ms=5.0) as srv:
        _record(suite, srv, tmp_path / "rec.jsonl")
    headers = [json.loads(line)["recorded"]["headers"] for line in (tmp_path / "rec.jsonl").read_text().splitlines()]
    assert all(list(h) == ["x-request-id"] for h in headers)


def test_rerecording_one_changed_answer_lists_one_modified_case_and_the_rest_retimed(tmp_path):
    suite = _pinned_then_rerecorded(tmp_path, "r3")
    result, report = run_report(suite, tmp_path / "out")
    assert result.code == 1
    fixtures = report["fixtures"]
    assert fixtures["modified"] == ["r3"]
    assert fixtures["retimed"] == [i for i in IDS if i != "r3"]
    message = next(a["message"] for a in report["alert_details"] if a["code"] == "fixtures_changed")
    assert message.index("modified: r3") < message.index("retimed")


def test_the_pin_diff_against_the_base_branch_lists_the_changed_answer_first(tmp_path):
    base = tmp_path / "base-pins.json"
    suite = _pinned_then_rerecorded(tmp_path, "r5", base)
    assert run_cli(["run", suite, "--out", tmp_path / "pin2", "--lane", "adjudication", "--write-pins"]).code == 0
    result, report = run_report(suite, tmp_path / "out", "--base-pins", base)
    assert result.code == 0
    fixture = {row["id"]: row["fixture"] for row in report["base"]["diff"]}
    assert fixture == {**{cid: "retimed" for cid in IDS}, "r5": "modified"}
    markdown = (tmp_path / "out" / "report.md").read_text("utf-8")
    assert markdown.index("fixture cases modified by this PR: r5") < markdown.index("fixture cases retimed by this PR")
    section = markdown[markdown.index("### Pins: base branch"):]
    rows = [line.split("|")[1:3] for line in section.splitlines() if line.startswith("| **")]
    assert [cell.strip() for cell in rows[0]] == ["**r5**", "modified"]
