"""The Action's ``history`` input: the comment's collapsed trend of the strata a PR touches over the base branch's
last changes of the pins, read with git from the checkout (a shallow one gives a note, not an error).

The repositories are built as actions/checkout leaves them (``tests/action/test_entrypoint.py``): a base
branch whose commits move the pins, a PR head on top, and the detached test merge; the entrypoint runs as a
subprocess against the GitHub API stand-in.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from envelope_ci.action.inputs import HISTORY_MAX, InputError, read_inputs
from tests.action.test_entrypoint import PR, SUPPORT_BOT, PrRepo, commit_all, git, run_action, set_pin
from tests.support.github_stub import GitHubStub

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

NOTE = "the clone is shallow: 1 point found; fetch with fetch-depth: 0 for the full history"


def _bump_ms(wd: Path, case_id: str) -> None:
    """Move one pin by a millisecond: the PR changes that pin, well within the time slack."""
    pins = json.loads((wd / "evals" / "envelope-pins.json").read_text("utf-8"))
    set_pin(wd, case_id, ms=pins["cases"][case_id]["ms"] + 1.0)


def make_history_repo(tmp_path: Path) -> PrRepo:
    """A base branch with four commits that move the pins, then a PR that moves one medium pin, checked out at the
    test merge with a branch ``pr-merge`` on it (to clone it shallow)."""
    ws = tmp_path / "workspace"
    ws.mkdir()
    git(ws, "init", "-q")
    shutil.copytree(SUPPORT_BOT, ws / "evals")
    commit_all(ws, "Add the support-bot suite (#1)")
    set_pin(ws, "intent-refund", label="wrong", channel="correctness")
    commit_all(ws, "Pin intent-refund as wrong (#2)")
    set_pin(ws, "intent-refund", label="right", channel="stable")
    commit_all(ws, "Merge pull request #3 from octo/refund")
    set_pin(ws, "cancelled-order-json", label="wrong", channel="correctness")
    base = commit_all(ws, "Re-pin cancelled-order-json (#4)")
    git(ws, "checkout", "-q", "-b", "feature")
    _bump_ms(ws, "refund-window-cites-policy")
    head = commit_all(ws, "pr: retime refund-window-cites-policy")
    tree = git(ws, "rev-parse", "HEAD^{tree}")
    merge = git(ws, "commit-tree", tree, "-p", base, "-p", head, "-m", f"Merge {head} into {base}")
    git(ws, "branch", "pr-merge", merge)
    git(ws, "checkout", "-q", "--detach", merge)
    return PrRepo(ws, base, head, merge)


def shallow_clone(repo: PrRepo, tmp_path: Path, depth: int) -> PrRepo:
    """The test merge cloned with ``fetch-depth: depth``, as actions/checkout fetches it."""
    clone = tmp_path / f"depth-{depth}" / "workspace"
    subprocess.run(["git", "clone", "-q", f"--depth={depth}", "--branch=pr-merge", f"file://{repo.workspace}",
                    str(clone)], check=True, capture_output=True)
    return PrRepo(clone, repo.base, repo.head, repo.merge)


def trend_of(body: str) -> str:
    """The comment's collapsed trend section."""
    match = re.search(r"<details><summary>Trend of .*?</details>", body, re.S)
    assert match, body[-3000:]
    return match.group(0)


@pytest.fixture(scope="module")
def history_repo(tmp_path_factory: pytest.TempPathFactory) -> PrRepo:
    return make_history_repo(tmp_path_factory.mktemp("history-repo"))


def test_history_input_is_a_whole_number_from_0_to_its_maximum() -> None:
    assert read_inputs({}).history == 0
    assert read_inputs({"INPUT_HISTORY": "12"}).history == 12
    assert read_inputs({"INPUT_HISTORY": str(HISTORY_MAX)}).history == HISTORY_MAX
    for bad in ("-1", str(HISTORY_MAX + 1), "1.5", "ten", "07"):
        with pytest.raises(InputError, match=rf"input 'history' must be a whole number from 0 \(off\) to "
                                             rf"{HISTORY_MAX}, got {re.escape(repr(bad))}"):
            read_inputs({"INPUT_HISTORY": bad})


def test_the_comment_folds_the_trend_of_the_strata_the_pr_touches(history_repo: PrRepo, stub: GitHubStub) -> None:
    run = run_action(history_repo, stub, inputs={"history": "10"})
    assert run.outputs["verdict"], run.stdout + run.stderr
    body = stub.comments(PR)[0]["body"]
    trend = trend_of(body)
    # The PR moved a medium pin: the trend is medium's, over the base branch's four changes of the pins.
    assert trend.startswith("<details><summary>Trend of medium over the last 4 changes of the base branch's pins"
                            "</summary>")
    assert 'title "medium pass rate"' in trend and "easy pass rate" not in trend
    assert '    x-axis ["PR 1", "PR 2", "PR 3", "PR 4"]' in trend
    assert "    line [1, 1, 1, 0.8]" in trend
    assert "| medium" in trend and "| easy" not in trend
    assert body.index("</details>", body.index("<summary>Trend of")) < body.index("<sub>envelope-ci")
    assert trend in run.summary
    history = json.loads((run.out_dir / "history.json").read_text("utf-8"))
    assert [p["pr"] for p in history["points"]] == [1, 2, 3, 4] and history["commit"] == history_repo.base
    assert (run.out_dir / "history.md").exists()


def test_without_the_history_input_there_is_no_trend(history_repo: PrRepo, stub: GitHubStub) -> None:
    run = run_action(history_repo, stub)
    assert "Trend of" not in stub.comments(PR)[0]["body"]
    assert not (run.out_dir / "history.json").exists()


def test_a_shallow_checkout_gives_the_trend_a_note_not_an_error(history_repo: PrRepo, stub: GitHubStub,
                                                                  tmp_path: Path) -> None:
    clone = shallow_clone(history_repo, tmp_path, 2)
    full = run_action(history_repo, stub, inputs={"history": "10"})
    run = run_action(clone, stub, inputs={"history": "10"})
    assert run.code == full.code and run.outputs["verdict"] == full.outputs["verdict"]
    trend = trend_of(stub.comments(PR)[0]["body"])
    assert "over the last 1 change of the base branch's pins" in trend
    assert NOTE in trend
    assert not any("trend" in w for w in run.warnings)


def test_a_checkout_without_the_base_commit_says_why_there_is_no_trend(history_repo: PrRepo, stub: GitHubStub,
                                                                       tmp_path: Path) -> None:
    clone = shallow_clone(history_repo, tmp_path, 1)
    run = run_action(clone, stub, inputs={"history": "10"})
    assert run.outputs["verdict"], run.stdout + run.stderr
    body = stub.comments(PR)[0]["body"]
    assert "<summary>Trend of the strata: the base branch's history could not be read</summary>" in body
    assert "fetch-depth: 0" in body
    assert any("the trend of the strata is unavailable" in w for w in run.warnings)
