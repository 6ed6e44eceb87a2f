"""git is pointed at the repository, never left to find one in a folder of the fixtures (pull-request content).

A pull request can commit ``HEAD``, ``config``, ``objects/`` and ``refs/`` as plain files in a fixtures
folder: git, run there and left to search, takes that folder for a repository and obeys its ``config``.
Here the config asks for a lazy fetch of a missing object through an ``ssh`` command that writes git's
environment to a file: report.html's pinned answers, ``history`` and the Action's base pins all run git
in such folders, with the endpoint's key in the environment.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from envelope_ci.sources.history import Git, git_environment
from tests.support.suites import case, chat_body, git, recorded, run_cli, write_pins

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed: nothing runs it here")

SECRET = "sk-planted-repository-must-never-see-this"




def plant_repository(folder: Path, marker: Path) -> None:
    """Plain files that make ``folder`` a repository to git's search, whose config runs a command on a fetch."""
    (folder / "objects" / "info").mkdir(parents=True)
    (folder / "refs" / "heads").mkdir(parents=True)
    (folder / "objects" / "info" / ".keep").write_text("", "utf-8")
    (folder / "refs" / "heads" / ".keep").write_text("", "utf-8")
    (folder / "HEAD").write_text("ref: refs/heads/main\n", "utf-8")
    (folder / "config").write_text(
        "[core]\n\trepositoryformatversion = 1\n\tbare = false\n\tworktree = .\n"
        f"\tsshCommand = \"env > {marker.as_posix()}; false\"\n"
        "[extensions]\n\tpartialClone = origin\n"
        "[remote \"origin\"]\n\turl = ssh://example.invalid/x\n\tpromisor = true\n\tpartialclonefilter = blob:none\n",
        "utf-8")


@pytest.fixture
def planted(tmp_path: Path) -> tuple[Path, Path]:
    """A committed repository whose fixtures folder ``evals/evil`` is also laid out as a repository; the marker."""
    repo, marker = tmp_path / "repo", tmp_path / "ran.txt"
    evil = repo / "evals" / "evil"
    evil.mkdir(parents=True)
    (evil / "cases.yaml").write_text(json.dumps([case("booking", must_include=["booked"])]), "utf-8")
    line = {"id": "booking", "recorded": recorded(chat_body("The table is booked."))}
    (evil / "cases.yaml.recorded.jsonl").write_text(json.dumps(line) + "\n", "utf-8")
    assert write_pins(repo / "evals", tmp_path / "pins-out").code == 0
    plant_repository(evil, marker)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "pins")
    return repo, marker


def test_report_html_reads_the_pinned_answers_from_the_repository_not_the_planted_one(planted, tmp_path):
    repo, marker = planted
    result = run_cli(["run", repo / "evals", "--out", tmp_path / "out", "--format", "html"],
                     env={"EVAL_API_KEY": SECRET})
    assert result.code in (0, 1), result.err  # fixtures_changed may fire for the planted files: the page still comes
    assert not marker.exists(), marker.read_text("utf-8")[:200]
    page = (tmp_path / "out" / "report.html").read_text("utf-8")
    assert "The table is booked." in page and "git could not" not in page


def test_history_reads_the_repository_not_the_planted_one(planted, tmp_path):
    repo, marker = planted
    result = run_cli(["history", repo / "evals" / "evil", "--pins", repo / "evals" / "envelope-pins.json",
                      "--out", tmp_path / "hist"], env={"EVAL_API_KEY": SECRET})
    assert not marker.exists(), marker.read_text("utf-8")[:200]
    assert result.code == 0, result.err


def test_git_in_a_planted_folder_names_the_repository_above_it(planted):
    repo, marker = planted
    evil = repo / "evals" / "evil"
    found = Git(evil).text("rev-parse", "--show-toplevel")
    assert found is not None and Path(found).resolve() == repo.resolve()
    assert Git(evil).blobs(["HEAD:./cases.yaml"])["HEAD:./cases.yaml"].startswith(b"[")
    Git(evil).run("cat-file", "-p", "0" * 40)  # a missing object: never fetched from anywhere
    assert not marker.exists()


def test_outside_any_repository_git_says_so_and_searches_nothing(tmp_path):
    folder = tmp_path / "loose"
    folder.mkdir()
    plant_repository(folder, tmp_path / "ran.txt")
    assert Git(folder).text("rev-parse", "--show-toplevel") is None
    assert not (tmp_path / "ran.txt").exists()


def test_git_runs_without_the_secrets_in_its_environment():
    environ = {"PATH": "/usr/bin", "HOME": "/home/u", "LANG": "C.UTF-8", "EVAL_API_KEY": SECRET,
               "INPUT_GITHUB-TOKEN": "ghp_x", "GITHUB_TOKEN": "ghs_y", "GIT_DIR": "/elsewhere", "MY_PASSWORD": "p"}
    env = git_environment(environ)
    assert {"PATH", "HOME", "LANG"} <= env.keys()
    assert not {"EVAL_API_KEY", "INPUT_GITHUB-TOKEN", "GITHUB_TOKEN", "GIT_DIR", "MY_PASSWORD"} & env.keys()
    assert SECRET not in json.dumps(env) and os.environ.get("EVAL_API_KEY") != SECRET


def test_the_actions_base_pins_read_git_the_same_way(planted):
    from envelope_ci.action.basepins import git_in

    repo, marker = planted
    done = git_in(repo / "evals" / "evil")("rev-parse", "--show-toplevel")
    assert done is not None and Path(done.stdout.decode().strip()).resolve() == repo.resolve()
    git_in(repo / "evals" / "evil")("cat-file", "-p", "0" * 40)
    assert not marker.exists()


def test_no_config_can_let_git_fetch(tmp_path):
    """Even the repository's own config, asking for a lazy fetch over ssh and allowing ssh outright, fetches nothing:
    GIT_ALLOW_PROTOCOL, empty, outranks every protocol.*.allow."""
    repo, marker = tmp_path / "repo", tmp_path / "ran.txt"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "a.txt").write_text("a\n", "utf-8")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "a")
    for key, value in (("extensions.partialClone", "origin"), ("remote.origin.url", "ssh://example.invalid/x"),
                       ("remote.origin.promisor", "true"), ("core.repositoryformatversion", "1"),
                       ("protocol.ssh.allow", "always"), ("core.sshCommand", f"env > {marker.as_posix()}; false")):
        git(repo, "config", key, value)
    Git(repo).run("cat-file", "-p", "1" * 40)
    assert not marker.exists()
