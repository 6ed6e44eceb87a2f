"""The version has one home, ``envelope_ci.__version__``: pyproject.toml reads it (so the wheel's metadata does) and the
release workflow checks the tag against it, so a release cannot ship two versions."""
from __future__ import annotations

import os
import subprocess
import sys

import yaml
from setuptools.config.pyprojecttoml import read_configuration

from envelope_ci import __version__
from tests.support.suites import REPO_ROOT


def test_pyproject_takes_its_version_from_the_package():
    # What the build backend computes (dynamic fields expanded): a literal project.version that differs fails here,
    # and one listed under project.dynamic as well makes setuptools refuse the file.
    config = read_configuration(REPO_ROOT / "pyproject.toml")
    assert config["project"]["version"] == __version__, "pyproject.toml: project.version must be envelope_ci.__version__"
    assert config["project"].get("dynamic") == ["version"], "pyproject.toml: project.dynamic must list version, not a literal"
    assert config["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "envelope_ci.__version__"}


def release_check(tag: str, tmp_path) -> tuple[int, str]:
    """Run release.yml's tag check (job version, step version) as the workflow does; its exit code and GITHUB_OUTPUT."""
    workflow = yaml.safe_load((REPO_ROOT / ".github" / "workflows" / "release.yml").read_text("utf-8"))
    script = next(s["run"] for s in workflow["jobs"]["version"]["steps"] if s.get("id") == "version")
    output = tmp_path / "github_output"
    output.write_text("", "utf-8")
    path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    env = {**os.environ, "PATH": path, "TAG": tag, "GITHUB_OUTPUT": str(output)}
    result = subprocess.run(["bash", "-c", script], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60)
    return result.returncode, output.read_text("utf-8")


def test_the_release_workflow_checks_the_tag_against_the_package_version(tmp_path):
    assert release_check(f"v{__version__}", tmp_path) == (0, f"version={__version__}\n")
    code, out = release_check(f"v{__version__}.1", tmp_path)
    assert code == 1 and out == ""
