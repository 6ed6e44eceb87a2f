"""``envelope-ci history``: the pins file's history read with git, on a scratch repository whose commits move the pins.

The repository has ten first-parent commits that change the pins (one of them the merge of a pull
request whose own two commits are not points), and commits that change other files; a case moves
from one stratum to another half-way, so each point's strata must be read from its own commit.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.support.suites import run_cli

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Octo Cat", "GIT_AUTHOR_EMAIL": "octocat@example.invalid",
    "GIT_COMMITTER_NAME": "Octo Cat", "GIT_COMMITTER_EMAIL": "octocat@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_TERMINAL_PROMPT": "0",
}
# A subject a reviewer would not want rendered as markup: a mention, an image, a table cell's end.
HOSTILE = "Pin b as wrong, cc @octocat <img src=x> | done (#2)"


def git(cwd: Path, *args: str, day: int = 1) -> str:
    date = f"2025-06-{day:02d}T12:00:00+00:00"
    proc = subprocess.run(
        ["git", "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false", *args], cwd=cwd, capture_output=True,
        text=True, check=False, env={**os.environ, **GIT_ENV, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date},
    )
    assert proc.returncode == 0, f"git {' '.join(args)}: {proc.stderr}"
    return proc.stdout.strip()


def case(cid: str, stratum: str | None) -> dict[str, Any]:
    data: dict[str, Any] = {"id": cid, "prompt": f"question {cid}", "completion": "an answer", "contains": "answer"}
    return {**data, "stratum": stratum} if stratum else data


@dataclass
class Suite:
    """The fixtures as they stand, written into the repository at each commit."""

    strata: dict[str, str | None] = field(default_factory=lambda: {"a": "easy", "b": "easy", "c": "medium",
                                                                   "d": "medium", "e": "stretch", "f": None})
    labels: dict[str, str] = field(default_factory=lambda: dict.fromkeys("abcdef", "right"))
    ms: dict[str, float] = field(default_factory=lambda: dict.fromkeys("abcdef", 400.0))
    passes: dict[str, list[int]] = field(default_factory=dict)

    def write(self, root: Path) -> None:
        evals = root / "evals"
        evals.mkdir(exist_ok=True)
        yaml_cases = {"easy.yaml": "ab", "medium.yaml": "cd"}
        for name, ids in yaml_cases.items():
            (evals / name).write_text(json.dumps([case(i, self.strata[i]) for i in ids]), "utf-8")  # JSON is YAML
        (evals / "stretch.json").write_text(json.dumps({"cases": [case("e", self.strata["e"])]}), "utf-8")
        (evals / "extra.jsonl").write_text(json.dumps(case("f", self.strata["f"])) + "\n", "utf-8")
        (evals / "envelope-pins.json").write_text(json.dumps(self.pins()), "utf-8")

    def pins(self) -> dict[str, Any]:
        cases = {cid: {"hash": f"sha256:{cid}", "label": label, "channel": "stable" if label == "right" else "correctness",
                       "chars": 40 + 10 * i, "tokens": 10, "tokens_estimated": False, "ms": self.ms[cid],
                       "ms_p95": self.ms[cid], "fingerprint": None,
                       **({"passes": self.passes[cid]} if cid in self.passes else {})}
                 for i, (cid, label) in enumerate(sorted(self.labels.items()))}
        return {"format": "envelope-ci/pins", "version": 1, "fixtures_hash": "sha256:0", "fingerprint": None,
                "files": {}, "cases": cases}


@dataclass
class Repo:
    root: Path
    points: list[str]  # the commits that moved the pins on main's first-parent line, oldest first
    others: list[str]  # commits that are not points: other files, and the merged branch's own commits


def commit(repo: Path, suite: Suite, message: str, day: int) -> str:
    suite.write(repo)
    git(repo, "add", "-A", day=day)
    git(repo, "commit", "-q", "--allow-empty", "-m", message, day=day)
    return git(repo, "rev-parse", "HEAD")


def make_repo(tmp_path: Path) -> Repo:
    """Ten commits that move the pins on main (the third a merged pull request), and three that are not points."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    s = Suite()
    points = [commit(root, s, "Add the suite (#1)", 1)]
    s.labels["b"] = "wrong"
    points.append(commit(root, s, HOSTILE, 2))
    (root / "README.md").write_text("the suite\n", "utf-8")
    others = [commit(root, s, "docs: a readme", 3)]
    git(root, "checkout", "-q", "-b", "fix-b")
    s.labels["b"] = "right"
    others.append(commit(root, s, "fix b", 4))
    s.ms["a"] = 100.0
    others.append(commit(root, s, "speed up a", 4))
    git(root, "checkout", "-q", "main")
    git(root, "merge", "-q", "--no-ff", "fix-b", "-m", "Merge pull request #3 from octo/fix-b\n\nFix b", day=5)
    points.append(git(root, "rev-parse", "HEAD"))
    s.labels["c"] = "wrong"
    points.append(commit(root, s, "Re-pin after the model bump", 6))
    s.strata["c"], s.labels["c"] = "easy", "right"
    points.append(commit(root, s, "Move c to easy (#5)", 7))
    s.labels["d"], s.passes["d"] = "wrong", [1, 2]
    points.append(commit(root, s, "Pin d as flaky (#6)", 8))
    (root / "evals" / "NOTES.md").write_text("f has no stratum\n", "utf-8")
    others.append(commit(root, s, "docs: say why f has no stratum", 9))
    s.labels["e"] = "drop"
    points.append(commit(root, s, "e is not delivered (#7)", 10))
    s.labels["e"] = "right"
    points.append(commit(root, s, "e is back (#8)", 11))
    s.labels["f"] = "wrong"
    points.append(commit(root, s, "f regressed (#9)", 12))
    s.ms = dict.fromkeys("abcdef", 200.0)
    points.append(commit(root, s, "A faster model (#10)", 13))
    return Repo(root, points, others)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    return make_repo(tmp_path_factory.mktemp("history"))


def history(repo_root: Path, out: Path, *args: str, env: Mapping[str, str | None] | None = None) -> tuple[Any, Any]:
    """``envelope-ci history evals`` from the repository's top, and the history.json it wrote (None if none)."""
    cwd = os.getcwd()
    os.chdir(repo_root)
    try:
        result = run_cli(["history", "evals", "--out", out, *args], env=env)
    finally:
        os.chdir(cwd)
    path = out / "history.json"
    return result, json.loads(path.read_text("utf-8")) if path.exists() else None


def rates(data: Mapping[str, Any], stratum: str) -> list[float | None]:
    return [p["strata"][stratum]["pass_rate"] if stratum in p["strata"] else None for p in data["points"]]


def test_one_point_per_first_parent_commit_that_moved_the_pins(repo: Repo, tmp_path: Path) -> None:
    result, data = history(repo.root, tmp_path / "out")
    assert result.code == 0, result.err
    assert [p["commit"] for p in data["points"]] == repo.points
    assert not set(repo.others) & {p["commit"] for p in data["points"]}
    assert [p["date"][:10] for p in data["points"]][:3] == ["2025-06-01", "2025-06-02", "2025-06-05"]
    assert data["shallow"] is False and data["notes"] == []
    assert "10 change(s) of evals/envelope-pins.json on HEAD" in result.out


def test_a_point_names_the_pull_request_of_a_merge_or_a_squash_title(repo: Repo, tmp_path: Path) -> None:
    _, data = history(repo.root, tmp_path / "out")
    assert [p["pr"] for p in data["points"]] == [1, 2, 3, None, 5, 6, 7, 8, 9, 10]
    assert data["points"][1]["subject"] == HOSTILE


def test_each_stratum_is_counted_with_the_strata_of_its_own_commit(repo: Repo, tmp_path: Path) -> None:
    _, data = history(repo.root, tmp_path / "out")
    # b wrong at #2, right again by the merge; c moves to easy at #5; d is flaky (1 of 2) from #6
    assert rates(data, "easy") == [1.0, 0.5, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    assert rates(data, "medium") == [1.0, 1.0, 1.0, 0.5, 1.0, 0.5, 0.5, 0.5, 0.5, 0.5]
    assert data["points"][4]["strata"]["easy"] == {"n": 3, "passed": 3, "pass_rate": 1.0, "cases": 3,
                                                    "undelivered": 0}
    assert data["points"][5]["strata"]["medium"]["passed"] == 0.5
    # e undelivered at #7: no rate, not a zero
    assert rates(data, "stretch")[6] is None and data["points"][6]["strata"]["stretch"]["undelivered"] == 1
    assert rates(data, "unstratified") == [1.0] * 8 + [0.0, 0.0]


def test_yield_median_time_and_labels_come_from_the_pins(repo: Repo, tmp_path: Path) -> None:
    _, data = history(repo.root, tmp_path / "out")
    points = data["points"]
    assert points[6]["yield"] == 0.833333  # e dropped: 5 of 6 cases right or wrong
    assert [p["median_ms"] for p in points][1:3] == [400.0, 400.0] and points[-1]["median_ms"] == 200.0
    assert points[0]["median_chars"] == 65.0
    assert points[1]["labels"]["b"] == "wrong" and points[2]["labels"]["b"] == "right"


def test_last_keeps_the_most_recent_changes_and_ref_reads_another_branch(repo: Repo, tmp_path: Path) -> None:
    _, last = history(repo.root, tmp_path / "last", "--last", "4")
    assert [p["commit"] for p in last["points"]] == repo.points[-4:]
    _, merged = history(repo.root, tmp_path / "branch", "--ref", "fix-b")
    assert [p["pr"] for p in merged["points"]] == [1, 2, None, None]
    assert merged["ref"] == "fix-b" and merged["commit"] == repo.others[2]


def test_history_md_draws_a_line_chart_per_measure(repo: Repo, tmp_path: Path) -> None:
    history(repo.root, tmp_path / "out")
    md = (tmp_path / "out" / "history.md").read_text("utf-8")
    for title in ("easy pass rate", "medium pass rate", "stretch pass rate", "unstratified pass rate", "yield",
                  "median time", "median size"):
        assert f'    title "{title}"' in md
    assert md.count("```mermaid\nxychart-beta\n") == 7
    axis = '"PR 1", "PR 2", "PR 3", "' + repo.points[3][:7] + '", "PR 5", "PR 6", "PR 7", "PR 8", "PR 9", "PR 10"'
    assert f"    x-axis [{axis}]\n    y-axis \"pass rate\" 0 --> 1\n    line [1, 0.5, 1, 1, 1, 1, 1, 1, 1, 1]" in md
    # a line has no gaps: the point without a stretch rate is left out of its chart
    assert "    line [1, 1, 1, 1, 1, 1, 1, 1, 1]\n" in md.split('title "stretch pass rate"')[1].split("```")[0]
    assert re.search(r"^\| b +\| right → wrong → right +\|$", md, re.M)


def test_commit_subjects_are_escaped_in_history_md(repo: Repo, tmp_path: Path) -> None:
    history(repo.root, tmp_path / "out")
    md = (tmp_path / "out" / "history.md").read_text("utf-8")
    assert "<img" not in md and "&lt;img src=x&gt;" in md
    assert "@octocat" not in md and "@\u200docto" in md
    assert "done \\(#\u200d2\\)" in md and "\\| done" in md


def test_a_shallow_clone_gives_a_note_not_an_error(repo: Repo, tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--depth", "3", f"file://{repo.root}", str(clone)], check=True,
                   capture_output=True, env={**os.environ, **GIT_ENV})
    result, data = history(clone, tmp_path / "out")
    assert result.code == 0, result.err
    assert [p["commit"] for p in data["points"]] == repo.points[-3:]
    note = "the clone is shallow: 3 points found; fetch with fetch-depth: 0 for the full history"
    assert data["shallow"] is True and data["notes"] == [note]
    assert f"note: {note}" in result.out
    assert note in (tmp_path / "out" / "history.md").read_text("utf-8")


def test_a_shallow_clone_with_the_whole_history_asked_has_no_note(repo: Repo, tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--depth", "3", f"file://{repo.root}", str(clone)], check=True,
                   capture_output=True, env={**os.environ, **GIT_ENV})
    _, data = history(clone, tmp_path / "out", "--last", "2")
    assert len(data["points"]) == 2 and data["notes"] == []


def test_a_fixture_file_that_cannot_be_read_at_a_commit_is_a_note(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    s = Suite()
    commit(root, s, "first", 1)
    s.labels["a"] = "wrong"
    s.write(root)
    (root / "evals" / "easy.yaml").write_text("- id: a\n  stratum: [easy\n", "utf-8")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "broken", day=2)
    result, data = history(root, tmp_path / "out")
    assert result.code == 0, result.err
    [note] = data["notes"]
    assert "easy.yaml could not be read, its cases count as unstratified: " in note and "malformed YAML" in note
    assert data["points"][1]["strata"]["unstratified"]["cases"] == 3  # a and b, beside f
    assert data["points"][0]["strata"]["easy"]["cases"] == 2


def test_history_json_follows_its_published_schema(repo: Repo, tmp_path: Path) -> None:
    _, data = history(repo.root, tmp_path / "out")
    printed = run_cli(["schema", "history"])
    assert printed.code == 0
    schema = json.loads(printed.out)
    assert schema["title"] == "envelope-ci history.json (history_version 1)"
    jsonschema.validate(data, schema)
    assert data["history_version"] == 1


def test_outside_a_git_repository_is_bad_usage(tmp_path: Path) -> None:
    (tmp_path / "evals").mkdir()
    result, data = history(tmp_path, tmp_path / "out", env={"GIT_CEILING_DIRECTORIES": str(tmp_path.parent)})
    assert result.code == 2 and data is None
    assert "evals: not inside a git repository" in result.err


@pytest.mark.parametrize("ref", ["no-such-branch", "--output=written-by-git", "-n1"])
def test_a_ref_that_names_no_commit_is_bad_usage(repo: Repo, tmp_path: Path, ref: str) -> None:
    result, data = history(repo.root, tmp_path / "out", f"--ref={ref}")
    assert result.code == 2 and data is None
    assert f"--ref {ref!r} is not a branch, tag or commit" in result.err or f"{ref!r} names no commit" in result.err
    assert not (repo.root / "written-by-git").exists()


def test_help_teaches_by_example() -> None:
    result = run_cli(["history", "--help"])
    assert result.code == 0
    assert "examples:" in result.out and "envelope-ci history evals/ --ref main --last 10" in result.out
