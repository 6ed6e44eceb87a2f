"""``--write-pins`` refuses, before the run, a ``--pins`` inside the fixtures directory that a later run without that
``--pins`` would read as a fixture (or as the settings); a pins file no run reads is written."""
from __future__ import annotations

import pytest

from tests.support.suites import answer_case, make_suite, run_cli, write_pins

pytestmark = pytest.mark.usefixtures("clean_env")


def suite(tmp_path):
    return make_suite(tmp_path, [answer_case("a", stratum="easy"), answer_case("b", stratum="easy")], name="evals")


@pytest.mark.parametrize(("pins", "read_as"), [
    ("pins.json", "a fixture"),
    ("sub/pins.yaml", "a fixture"),
    ("cases.yaml.recorded.jsonl", "a fixture"),  # a sidecar: read with cases.yaml
    ("envelope-ci.yaml", "the settings"),
])
def test_pins_a_later_run_would_read_are_refused_before_the_run(tmp_path, pins, read_as):
    fixtures = suite(tmp_path)
    before = sorted(p.relative_to(fixtures) for p in fixtures.rglob("*"))
    result = write_pins(fixtures, tmp_path / "out", "--pins", fixtures / pins)
    assert result.code == 2, result.out
    assert result.err_lines == [
        f"error: --pins {(fixtures / pins).as_posix()} is inside the fixtures directory {fixtures.as_posix()}: "
        f"a run without this --pins would read the pins written there as {read_as}; "
        "name them envelope-pins.json, or write them outside the fixtures directory"]
    assert sorted(p.relative_to(fixtures) for p in fixtures.rglob("*")) == before
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("pins", ["envelope-pins.json", "sub/envelope-pins.json", ".pins/pins.json", "pins.lock",
                                  "sub/envelope-ci.yaml"])
def test_pins_no_run_reads_as_a_fixture_are_written(tmp_path, pins):
    fixtures = suite(tmp_path)
    result = write_pins(fixtures, tmp_path / "out", "--pins", fixtures / pins)
    assert result.code == 0, result.err
    assert (fixtures / pins).is_file()
    assert run_cli(["run", fixtures, "--out", tmp_path / "again", "--pins", fixtures / pins]).code == 0


def test_pins_outside_the_fixtures_directory_are_written_under_any_name(tmp_path):
    fixtures = suite(tmp_path)
    assert write_pins(fixtures, tmp_path / "out", "--pins", tmp_path / "pins.json").code == 0
    assert (tmp_path / "pins.json").is_file()


def test_the_same_pins_path_without_write_pins_is_only_read(tmp_path):
    """Reading pins from such a path writes nothing there: only --write-pins is refused."""
    fixtures = suite(tmp_path)
    result = run_cli(["run", fixtures, "--out", tmp_path / "out", "--pins", fixtures / "pins.json"])
    assert result.code != 2, result.err
