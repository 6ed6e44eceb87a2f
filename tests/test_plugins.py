"""The plug-in seams: assertions and report formats found through their entry-point groups."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.suites import REPO_ROOT

PLUGIN = REPO_ROOT / "examples" / "plugin-max-words"


def _env(**extra: str) -> dict[str, str]:
    """The environment of a child process that imports this working tree's envelope_ci."""
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "GITHUB_ACTIONS", "EVAL_BASE_URL", "EVAL_MODEL", "EVAL_API_KEY")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), extra.pop("PYTHONPATH", "")) if p)
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the example plug-in installed into it from its source folder (no network): wheel built, dist-info and all.

    Built and installed by this interpreter (the one with the test extra's setuptools and wheel), not by a
    virtual environment's: a venv made from a venv has the *base* interpreter's packages, which need not
    have a build backend, nor envelope-ci's own dependencies.
    """
    site = tmp_path_factory.mktemp("plugin-site")
    install = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index",
               "--disable-pip-version-check", "--target", str(site), str(PLUGIN)]
    done = subprocess.run(install, capture_output=True, text=True, env=_env(), timeout=300)
    assert done.returncode == 0, done.stderr
    assert list(site.glob("envelope_ci_max_words-*.dist-info/entry_points.txt")), sorted(p.name for p in site.iterdir())
    return site


def _run(python: Path, *args: str | Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(python), "-m", "envelope_ci", *map(str, args)], capture_output=True, text=True, env=_env(**env), timeout=120)


def test_installed_max_words_plugin_grades_a_suite(plugin_site, tmp_path):
    done = _run(Path(sys.executable), "run", PLUGIN / "evals", "--out", tmp_path / "out", PYTHONPATH=str(plugin_site))
    report = json.loads((tmp_path / "out" / "report.json").read_text("utf-8"))
    labels = {c["id"]: (c["label"], c["reasons"]) for c in report["cases"]}
    assert labels["short-greeting"] == ("right", [])
    assert labels["rambling-greeting"][0] == "wrong" and "13 words > max-words 5" in labels["rambling-greeting"][1]
    assert done.returncode == 1 and "easy_regression" in report["alerts"]


def test_plugin_assertions_join_the_case_schema(plugin_site):
    schema = json.loads(_run(Path(sys.executable), "schema", "case", PYTHONPATH=str(plugin_site)).stdout)
    names = schema["properties"]["assert"]["items"]["properties"]["type"]["enum"]
    assert "max-words" in names and "not-max-words" in names


def test_without_the_plugin_max_words_is_an_unknown_type(tmp_path):
    done = _run(Path(sys.executable), "run", PLUGIN / "evals", "--out", tmp_path / "out")
    assert done.returncode == 2 and "cases.yaml:6: assert.0.type" in done.stderr and "max-words" in done.stderr


def _format_plugin(site: Path) -> None:
    """A report format registered through a real entry point: a module and its dist-info on sys.path."""
    (site / "csv_format.py").write_text(
        '"""A test format: one CSV line per case."""\n'
        "from envelope_ci.formats.base import ReportFormat\n\n\n"
        "def _render(report, detail):\n"
        "    return ''.join(f'{c.id},{c.label.value},{c.gate.value}\\n' for c in report.cases)\n\n\n"
        "FORMAT = ReportFormat('csv', 'cases.csv', _render, 'one line per case')\n", "utf-8")
    info = site / "csv_format-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: csv-format\nVersion: 0.1\n", "utf-8")
    (info / "entry_points.txt").write_text("[envelope_ci.formats]\ncsv = csv_format:FORMAT\n", "utf-8")


def test_a_registered_format_is_written_with_format_flag(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    _format_plugin(site)
    suite = REPO_ROOT / "fixtures_example" / "support-bot"
    done = _run(Path(sys.executable), "run", suite, "--out", tmp_path / "out", "--format", "csv", "--format", "console", PYTHONPATH=str(site))
    assert done.returncode == 0, done.stderr
    lines = (tmp_path / "out" / "cases.csv").read_text("utf-8").splitlines()
    assert len(lines) == 12 and lines[0].endswith(",right,pass")
    assert (tmp_path / "out" / "summary.txt").read_text("utf-8").startswith("envelope-ci: PASS")
    unknown = _run(Path(sys.executable), "run", suite, "--out", tmp_path / "out2", "--format", "csv")
    assert unknown.returncode == 2 and "--format 'csv' is not a report format" in unknown.stderr
