"""A bad ``fixtures`` input (missing, a file, outside the workspace, too long for a folder name) is bad input, exit 2,
reported in the suite's own sticky comment: the one its marker, keyed by that input, finds again."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envelope_ci.action.suite import SLUG_MAX, slug
from envelope_ci.github.comment import marker_for
from tests.support.github_stub import WRITE_TOKEN, GitHubStub
from tests.support.suites import EXAMPLES, REPO_ROOT

pytestmark = pytest.mark.usefixtures("clean_env")

PR = 7
LONG = "evals-" + "e" * 300  # a folder name past what file systems allow (255 bytes)


def run_action(tmp_path: Path, stub: GitHubStub, fixtures: str) -> tuple[int, str, dict[str, str]]:
    """entrypoint.py on a pull request of a workspace holding ``evals``, with this ``fixtures`` input: exit status, log,
    outputs."""
    workspace, runner = tmp_path / "workspace", tmp_path / "runner"
    shutil.copytree(EXAMPLES / "support-bot", workspace / "evals")
    runner.mkdir()
    repo = {"full_name": stub.repo}
    (runner / "event.json").write_text(json.dumps({"number": PR, "repository": repo, "pull_request": {
        "number": PR, "head": {"sha": "b" * 40, "ref": "feature", "repo": repo},
        "base": {"sha": "a" * 40, "ref": "main", "repo": repo}}}), "utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INPUT_", "GITHUB_", "EVAL_", "RUNNER_", "CI"))}
    env.update({"INPUT_FIXTURES": fixtures, "INPUT_GITHUB-TOKEN": WRITE_TOKEN, "GITHUB_WORKSPACE": str(workspace),
                "GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": str(runner / "event.json"),
                "GITHUB_REPOSITORY": stub.repo, "GITHUB_API_URL": stub.url, "GITHUB_SHA": "c" * 40,
                "GITHUB_OUTPUT": str(runner / "output"), "GITHUB_STEP_SUMMARY": str(runner / "summary.md"),
                "HOME": str(runner), "PYTHONIOENCODING": "utf-8"})
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "entrypoint.py")], cwd=workspace, env=env,
                          capture_output=True, text=True, encoding="utf-8", timeout=180, check=False)
    lines = (runner / "output").read_text("utf-8").splitlines() if (runner / "output").is_file() else []
    outputs = {lines[i].split("<<")[0]: lines[i + 1] for i in range(0, len(lines) - 2, 3)}
    return proc.returncode, proc.stdout + proc.stderr, outputs


@pytest.mark.parametrize(("fixtures", "key", "why"), [
    ("evals-typo", "evals-typo", "not a directory of fixtures"),
    ("evals/easy.yaml", "evals/easy.yaml", "not a directory of fixtures"),
    ("../elsewhere/evals", "../elsewhere/evals", "not a directory of fixtures"),
    (LONG, LONG, "File name too long"),
], ids=["missing", "a-file", "outside-the-workspace", "too-long-for-a-folder"])
def test_a_bad_fixtures_input_is_reported_in_the_suites_own_comment(tmp_path, stub, fixtures, key, why):
    code, log, outputs = run_action(tmp_path, stub, fixtures)
    assert code == 2, log
    assert outputs["exit-code"] == "2" and outputs["verdict"] == ""
    [comment] = stub.comments(PR)
    first, body = comment["body"].split("\n", 1)
    assert first == marker_for(key)
    assert "envelope-ci: bad input" in body and why in body
    assert "Traceback" not in log


def test_a_long_key_gets_a_report_folder_of_its_own_that_a_file_system_takes():
    one, other = slug(LONG), slug(LONG[:-1] + "f")
    assert one != other and len(one.encode()) <= 255 and len(one) <= SLUG_MAX + 9
    assert one.startswith("evals-eee") and slug("src/evals") == "src-evals"
