"""The action's entrypoint.py, run as a subprocess with the environment a runner gives a container action.

Each test builds a real git repository the way actions/checkout leaves it on a pull_request
run: a base commit, a PR head commit on top, and the detached test-merge commit whose first
parent is the base (built with ``git commit-tree``). The GitHub API is the local
``GitHubStub``; inputs come as ``INPUT_<NAME>`` with hyphens kept, as the runner exports them.

``ENVELOPE_CI_REGEN_DOCS=1 python -m pytest tests/action/test_entrypoint.py -k comment_example``
rewrites docs/comment-example.md from the comment the stub received.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from envelope_ci.github.commands import SUMMARY_LIMIT
from envelope_ci.github.comment import COMMENT_LIMIT, marker_for
from tests.support.github_stub import (
    APP_LOGIN,
    APP_TOKEN,
    BOT_LOGIN,
    PAT_LOGIN,
    PAT_TOKEN,
    READ_TOKEN,
    WRITE_TOKEN,
    GitHubStub,
)
from tests.support.markdown_checks import fences_are_ours, gfm

ROOT = Path(__file__).resolve().parents[2]
ENTRYPOINT = ROOT / "entrypoint.py"
SUPPORT_BOT = ROOT / "fixtures_example" / "support-bot"
COMMENT_EXAMPLE = ROOT / "docs" / "comment-example.md"
REPO = "octo-org/widgets"
PR = 7
MODEL = "gpt-4o-mini-2024-07-18"
API_KEY = "sk-envelopeTEST-k3y-0f-the-endpoint-5ecret"
MARKER = marker_for("evals")
ZWJ = "\u200d"
OUTPUTS = (
    "verdict", "exit-code", "stable", "regressions", "yield", "accuracy-on-yield",
    "alerts", "baseline-lowered", "report-json", "report-markdown", "report-html", "comment-url",
)
# Fixed identities and dates make the commit ids, and so the comment, reproducible.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Octo Cat", "GIT_AUTHOR_EMAIL": "octocat@example.invalid",
    "GIT_COMMITTER_NAME": "Octo Cat", "GIT_COMMITTER_EMAIL": "octocat@example.invalid",
    "GIT_AUTHOR_DATE": "2025-06-01T12:00:00+00:00", "GIT_COMMITTER_DATE": "2025-06-01T12:00:00+00:00",
    "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_TERMINAL_PROMPT": "0",
}
# The PR's planted regression: an easy case that now invents a tracking number.
INVENTED = "Your tracking number is 1Z999AA10123456784 and it ships today!"

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


# -- a repository as actions/checkout leaves it ------------------------------------------------


def git(cwd: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false", *args],
        cwd=cwd, capture_output=True, text=True, env={**os.environ, **GIT_ENV}, check=False,
    )
    assert proc.returncode == 0, f"git {' '.join(args)}: {proc.stderr}"
    return proc.stdout.strip()


def commit_all(ws: Path, message: str) -> str:
    git(ws, "add", "-A")
    git(ws, "commit", "-q", "--allow-empty", "-m", message)
    return git(ws, "rev-parse", "HEAD")


Edit = Callable[[Path], None]


@dataclass
class PrRepo:
    """A workspace checked out at a PR's test-merge commit."""

    workspace: Path
    base: str
    head: str
    merge: str
    suite: str = "evals"  # fixtures path, relative to the working directory


def make_pr_repo(tmp_path: Path, *, base: Edit | None = None, head: Edit | None = None, subdir: str = "") -> PrRepo:
    """Base commit: support-bot as `<subdir>/evals` (+ `base`); PR head: `head` on top; HEAD: their test merge."""
    ws = tmp_path / "workspace"
    wd = ws / subdir
    wd.mkdir(parents=True)
    git(ws, "init", "-q")
    shutil.copytree(SUPPORT_BOT, wd / "evals")
    if base:
        base(wd)
    base_sha = commit_all(ws, "base: support-bot suite")
    git(ws, "checkout", "-q", "-b", "feature")
    if head:
        head(wd)
    head_sha = commit_all(ws, "pr: change the prompt")
    tree = git(ws, "rev-parse", "HEAD^{tree}")
    merge = git(ws, "commit-tree", tree, "-p", base_sha, "-p", head_sha, "-m", f"Merge {head_sha} into {base_sha}")
    git(ws, "update-ref", f"refs/remotes/pull/{PR}/merge", merge)
    git(ws, "checkout", "-q", "--detach", merge)
    return PrRepo(ws, base_sha, head_sha, merge)


def pins_path(wd: Path) -> Path:
    return wd / "evals" / "envelope-pins.json"


def set_pin(wd: Path, case_id: str, **fields: Any) -> None:
    """Edit one case's pin (the fixtures hash is untouched, so the pins still match the fixtures)."""
    pins = json.loads(pins_path(wd).read_text("utf-8"))
    pins["cases"][case_id].update(fields)
    pins_path(wd).write_text(json.dumps(pins, indent=1) + "\n", "utf-8")


def chat(content: str, model: str = MODEL) -> dict[str, Any]:
    return {
        "id": "chatcmpl-replay",
        "object": "chat.completion",
        "created": 1764540099,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content, "refusal": None}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 180, "completion_tokens": max(1, len(content) // 4), "total_tokens": 180 + len(content) // 4},
    }


def envelope(content: str, elapsed_ms: float) -> dict[str, Any]:
    return {"http_status": 200, "elapsed_ms": elapsed_ms, "headers": {"content-type": "application/json"}, "body": chat(content)}


def write_replay(wd: Path, lines: Mapping[str, Any], name: str = "recordings/pr.jsonl") -> None:
    """A recordings file (not part of the fixtures hash): the PR's model answers, graded against the same pins."""
    path = wd / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"id": k, "recorded": v}) + "\n" for k, v in lines.items()), "utf-8")


def planted_regression(wd: Path) -> None:
    write_replay(wd, {"no-invented-tracking": envelope(INVENTED, 388.2)})


# -- the runner's environment ------------------------------------------------------------------


def event_payload(repo: PrRepo, *, fork: str | None = None) -> dict[str, Any]:
    head_repo = fork or REPO
    return {
        "action": "synchronize",
        "number": PR,
        "pull_request": {
            "number": PR,
            "head": {"sha": repo.head, "ref": "feature", "repo": {"full_name": head_repo}},
            "base": {"sha": repo.base, "ref": "main", "repo": {"full_name": REPO}},
        },
        "repository": {"full_name": REPO},
    }


@dataclass
class ActionRun:
    code: int
    stdout: str
    stderr: str
    summary: str
    outputs_raw: str
    outputs: dict[str, str]
    out_dir: Path

    def report(self) -> dict[str, Any]:
        return json.loads((self.out_dir / "report.json").read_text("utf-8"))

    def report_files(self) -> str:
        return "".join(p.read_text("utf-8") for p in sorted(self.out_dir.iterdir()) if p.is_file())

    @property
    def errors(self) -> list[str]:
        return [line for line in self.stdout.splitlines() if line.startswith("::error")]

    @property
    def warnings(self) -> list[str]:
        return [line for line in self.stdout.splitlines() if line.startswith("::warning")]


def parse_outputs(text: str) -> dict[str, str]:
    """$GITHUB_OUTPUT in the `name<<delimiter` form the runner reads; anything else fails the test."""
    pattern = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*)<<(ghadelimiter_[0-9a-f-]{36})\n(.*?)\n?\2\n", re.DOTALL)
    values: dict[str, str] = {}
    pos = 0
    while pos < len(text):
        m = pattern.match(text, pos)
        assert m is not None, f"unparseable output file at {pos}: {text[pos:pos + 80]!r}"
        values[m.group(1)] = m.group(3)
        pos = m.end()
    return values


def runner_env(
    repo: PrRepo,
    stub: GitHubStub | None,
    *,
    inputs: Mapping[str, str] | None = None,
    event: Mapping[str, Any] | None = None,
    event_name: str = "pull_request",
    token: str = WRITE_TOKEN,
    env: Mapping[str, str | None] | None = None,
    summary_name: str = "summary.md",
) -> dict[str, str]:
    """The environment the runner gives the container: inputs, event, summary and output files."""
    tmp = repo.workspace.parent
    files = tmp / "runner"
    files.mkdir(exist_ok=True)
    event_path = files / "event.json"
    event_path.write_text(json.dumps(event if event is not None else event_payload(repo)), "utf-8")
    summary, output = files / summary_name, files / "output"
    for path in (summary, output):
        path.write_text("", "utf-8")
    action = yaml.safe_load((ROOT / "action.yml").read_text("utf-8"))
    # The runner exports every input, defaults included, upper-cased with hyphens kept.
    values = {name: str(spec.get("default", "")) for name, spec in action["inputs"].items()}
    values["github-token"] = token
    values.update(inputs or {})
    full = {k: v for k, v in os.environ.items() if not k.startswith(("INPUT_", "GITHUB_", "EVAL_", "RUNNER_"))}
    full.update({f"INPUT_{name.upper()}": value for name, value in values.items()})
    full.update({
        "CI": "true",
        "GITHUB_ACTIONS": "true",
        "GITHUB_WORKSPACE": str(repo.workspace),
        "GITHUB_EVENT_PATH": str(event_path),
        "GITHUB_EVENT_NAME": event_name,
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_API_URL": stub.url if stub else "http://127.0.0.1:9",
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_RUN_ID": "4242",
        "GITHUB_RUN_ATTEMPT": "1",
        "GITHUB_SHA": repo.merge,
        "GITHUB_REF": f"refs/pull/{PR}/merge",
        "GITHUB_STEP_SUMMARY": str(summary),
        "GITHUB_OUTPUT": str(output),
        "EVAL_API_KEY": API_KEY,
        "HOME": str(files),
        "PYTHONUNBUFFERED": "1",
        "PYTHONIOENCODING": "utf-8",
        "GIT_CONFIG_GLOBAL": os.devnull,
    })
    for name, value in (env or {}).items():
        if value is None:
            full.pop(name, None)
        else:
            full[name] = value
    return full


def action_run(code: int, stdout: str, stderr: str, env: Mapping[str, str]) -> ActionRun:
    """What a run left: its exit, its log, and the runner's files."""
    outputs_raw = Path(env["GITHUB_OUTPUT"]).read_text("utf-8")
    outputs = parse_outputs(outputs_raw)
    workspace = Path(env["GITHUB_WORKSPACE"])
    return ActionRun(
        code, stdout, stderr, Path(env["GITHUB_STEP_SUMMARY"]).read_text("utf-8"), outputs_raw, outputs,
        workspace / (outputs.get("report-json") or ".envelope-ci/x/report.json").rsplit("/", 1)[0],
    )


def run_action(repo: PrRepo, stub: GitHubStub | None, **options: Any) -> ActionRun:
    """`python entrypoint.py` the way the runner starts the container's entrypoint (options: see runner_env)."""
    full = runner_env(repo, stub, **options)
    proc = subprocess.run(
        [sys.executable, str(ENTRYPOINT)], cwd=repo.workspace, env=full,
        capture_output=True, text=True, encoding="utf-8", timeout=180, check=False,
    )
    return action_run(proc.returncode, proc.stdout, proc.stderr, full)


def bot_comments(stub: GitHubStub) -> list[dict[str, Any]]:
    return [c for c in stub.comments(PR) if c["user"]["login"] == BOT_LOGIN]


def writes(stub: GitHubStub) -> list[tuple[str, str]]:
    """The requests that change something (the GraphQL identity lookup is a read)."""
    return [(r.method, r.path) for r in stub.requests if r.method != "GET" and r.path != "/graphql"]


# -- the sticky comment ------------------------------------------------------------------------


def test_first_push_creates_one_comment(tmp_path: Path, stub: GitHubStub) -> None:
    repo = make_pr_repo(tmp_path)
    run = run_action(repo, stub)
    assert run.code == 0, run.stdout + run.stderr
    [comment] = stub.comments(PR)
    assert comment["user"]["login"] == BOT_LOGIN
    body = comment["body"]
    assert body.split("\n", 1)[0] == MARKER
    assert "## ✅ envelope-ci: pass — evals" in body
    assert "<details><summary>Pins: base branch → this PR → this run: 0 of 12 changed</summary>" in body
    assert f"commit `{repo.head[:12]}`" in body
    assert "https://github.com/octo-org/widgets/actions/runs/4242" in body
    assert run.outputs["comment-url"] == comment["html_url"]
    assert writes(stub) == [("POST", f"/repos/{REPO}/issues/{PR}/comments")]
    # Same Markdown in the job summary (the full table, not fitted to the comment limit).
    assert "## ✅ envelope-ci: pass — evals" in run.summary
    assert "### All cases (12)" in run.summary and "<details" not in run.summary
    assert (run.out_dir / "comment.md").read_text("utf-8") + "" in body


def test_a_github_app_token_edits_its_own_comment(tmp_path: Path, stub: GitHubStub) -> None:
    """An App's installation token posts as `<app>[bot]`; GraphQL names it, so the next push edits."""
    repo = make_pr_repo(tmp_path)
    assert run_action(repo, stub, token=APP_TOKEN).code == 0
    assert run_action(make_pr_repo(tmp_path / "push2"), stub, token=APP_TOKEN).code == 0
    [comment] = stub.comments(PR)
    assert comment["user"]["login"] == APP_LOGIN
    assert [w[0] for w in writes(stub)] == ["POST", "PATCH"]


def test_second_push_edits_the_same_comment(tmp_path: Path, stub: GitHubStub) -> None:
    repo = make_pr_repo(tmp_path)
    first = run_action(repo, stub)
    assert first.code == 0
    # The next push plants a regression; the comment is edited, not duplicated.
    repo2 = make_pr_repo(tmp_path / "push2", head=planted_regression)
    second = run_action(repo2, stub, inputs={"replay": "recordings/pr.jsonl"})
    assert second.code == 1, second.stdout + second.stderr
    [comment] = stub.comments(PR)
    assert "## ❌ envelope-ci: fail — evals" in comment["body"]
    assert second.outputs["comment-url"] == first.outputs["comment-url"] == comment["html_url"]
    assert writes(stub) == [
        ("POST", f"/repos/{REPO}/issues/{PR}/comments"),
        ("PATCH", f"/repos/{REPO}/issues/comments/{comment['id']}"),
    ]


def test_personal_access_token_keeps_one_comment(tmp_path: Path, stub: GitHubStub) -> None:
    repo = make_pr_repo(tmp_path)
    stub.seed_comment(PR, MARKER + "\nan old comment by github-actions[bot]", login=BOT_LOGIN, user_type="Bot")
    first = run_action(repo, stub, token=PAT_TOKEN)
    second = run_action(repo, stub, token=PAT_TOKEN)
    assert first.code == second.code == 0
    mine = [c for c in stub.comments(PR) if c["user"]["login"] == PAT_LOGIN]
    assert len(mine) == 1 and len(stub.comments(PR)) == 2
    assert [m for m, _ in writes(stub)] == ["POST", "PATCH"]
    assert first.outputs["comment-url"] == second.outputs["comment-url"] == mine[0]["html_url"]


def test_finds_its_comment_on_page_two(tmp_path: Path, stub: GitHubStub) -> None:
    stub.seed_many(PR, 150)
    # A human quoting the marker is not our comment.
    stub.seed_comment(PR, MARKER + "\nquoting the bot")
    repo = make_pr_repo(tmp_path)
    run_action(repo, stub)
    run_action(repo, stub)
    mine = bot_comments(stub)
    assert len(mine) == 1 and len(stub.comments(PR)) == 152
    assert [m for m, _ in writes(stub)] == ["POST", "PATCH"]
    lists = [r for r in stub.requests if r.method == "GET" and r.path.endswith(f"/issues/{PR}/comments")]
    assert any(r.query.get("page") == ["2"] for r in lists), [r.query for r in lists]
    assert stub.comments(PR)[1]["body"].startswith("Looks good")


@pytest.mark.parametrize(("planted", "expected"), [(False, 0), (True, 1)])
def test_read_only_token_writes_the_summary_and_warns(tmp_path: Path, stub: GitHubStub, planted: bool, expected: int) -> None:
    repo = make_pr_repo(tmp_path, head=planted_regression if planted else None)
    run = run_action(
        repo, stub, token=READ_TOKEN,
        inputs={"replay": "recordings/pr.jsonl"} if planted else None,
        event=event_payload(repo, fork="stranger/widgets"),
    )
    assert run.code == expected, run.stdout + run.stderr  # the harness's verdict, never the 403
    assert stub.comments(PR) == []
    [warn] = [w for w in run.warnings if "comment" in w]
    assert "403" in warn and "fork stranger/widgets" in warn and "workflow_run" in warn
    assert "The PR comment was not posted" in run.summary
    assert "envelope-ci: " + ("fail" if planted else "pass") in run.summary
    assert run.outputs["comment-url"] == ""
    assert run.outputs["exit-code"] == str(expected)


def test_comment_false_makes_no_api_write(tmp_path: Path, stub: GitHubStub) -> None:
    repo = make_pr_repo(tmp_path, head=planted_regression)
    run = run_action(repo, stub, inputs={"comment": "false", "replay": "recordings/pr.jsonl"})
    assert run.code == 1
    assert writes(stub) == [] and stub.comments(PR) == []
    assert not any(r.path.endswith("/comments") for r in stub.requests)
    assert "## ❌ envelope-ci: fail — evals" in run.summary
    assert run.outputs["comment-url"] == ""
    assert not run.warnings  # a choice, not a problem
    # The fitted body is still there for a workflow_run workflow to post.
    assert (run.out_dir / "comment.md").read_text("utf-8").startswith("## ❌ envelope-ci: fail")


@pytest.mark.parametrize("event_name", ["workflow_dispatch", "push", "issue_comment"])
def test_no_pull_request_means_summary_only(tmp_path: Path, stub: GitHubStub, event_name: str) -> None:
    repo = make_pr_repo(tmp_path)
    event: dict[str, Any] = {"inputs": {}} if event_name != "issue_comment" else {
        "issue": {"number": PR, "pull_request": {"url": "x"}}, "comment": {"body": "/eval"}}
    run = run_action(repo, stub, event=event, event_name=event_name)
    assert run.code == 0
    assert stub.requests == []
    assert "envelope-ci: pass" in run.summary and "Pins: base branch" not in run.summary
    assert f"no pull request in this {event_name} event" in run.stdout
    assert not run.warnings


def test_five_thousand_cases_fit_the_comment_limit(tmp_path: Path, stub: GitHubStub) -> None:
    def big_suite(wd: Path) -> None:
        shutil.rmtree(wd / "evals")
        (wd / "evals").mkdir()
        with (wd / "evals" / "cases.jsonl").open("w", encoding="utf-8") as fh:
            for i in range(5000):
                answer = f"hello there, customer {i}" if i % 2 == 0 else f"goodbye {i} | @octocat"
                fh.write(json.dumps({
                    "id": f"case-{i:04d}", "stratum": ("easy", "medium", "stretch")[i % 3],
                    "prompt": f"Greet customer {i}", "completion": answer, "must_include": ["hello"],
                }) + "\n")

    repo = make_pr_repo(tmp_path, base=big_suite)
    run = run_action(repo, stub)
    assert run.code == 1
    [comment] = stub.comments(PR)
    body = comment["body"]
    assert len(body) < COMMENT_LIMIT
    # The tables of cases are cut in a comment, so the channel x stratum table and the folded sections still fit.
    failing = sum(1 for i in range(5000) if i % 2 and i % 3 != 2)  # wrong answers in easy and medium: under their floors
    assert f"### Other cases failing the gate ({failing})" in body and f"… and {failing - 10} more: every case is in the job summary" in body
    assert "more not-stable cases" in body
    assert "### Channels by stratum" in body and "<details><summary>Labels and yield" in body
    assert "https://github.com/octo-org/widgets/actions/runs/4242" in body  # footer kept
    assert "@octocat" not in body
    # The summary keeps more, within its 1 MiB.
    assert len(run.summary.encode("utf-8")) <= SUMMARY_LIMIT
    assert "case-4999" in run.summary
    # At most 10 annotations, then how many more.
    assert len(run.errors) == 10
    more = re.search(r"envelope-ci: (\d+) more case\(s\) not annotated", run.stdout)
    assert more is not None and int(more.group(1)) == failing - 10


NASTY = "@octocat look | here | ```\n```\n</details><!-- envelope-ci:evals --> [ok](https://evil.example) #1 \u202eevil"


def _nasty_comment(tmp_path: Path, stub: GitHubStub) -> str:
    """The comment for a PR whose model answers carry a mention, pipes, fences, HTML and a bidi override."""
    repo = make_pr_repo(tmp_path, head=lambda wd: write_replay(wd, {
        "no-invented-tracking": envelope(NASTY, 388.2),
        "order-status-json": envelope('{"x": "@octocat | ```", "order_id": "NW-104233", "status": "shipped", "eta_days": 2}', 412.0),
    }))
    run = run_action(repo, stub, inputs={"replay": "recordings/pr.jsonl"})
    assert run.code == 1
    assert run.outputs["regressions"] == "2"
    [comment] = stub.comments(PR)
    return str(comment["body"])


def test_model_text_renders_harmlessly(tmp_path: Path, stub: GitHubStub) -> None:
    body = _nasty_comment(tmp_path, stub)
    assert "@octocat" not in body and f"@{ZWJ}octocat" in body
    assert body.count(MARKER) == 1 and body.startswith(MARKER)
    assert "\u202e" not in body
    assert "</details><!--" not in body and "<!-- envelope-ci:evals -->" not in body[len(MARKER):]
    rows = [line for line in body.splitlines() if line.startswith(("| no-invented-tracking ", "| order-status-json "))]
    # Each answer stays inside its row: pipes escaped, no line of it can open or close a fence.
    assert len([r for r in rows if "octocat" in r]) == 2
    assert all(r"\|" in line and r"\`\`\`" in line for line in rows if "octocat" in line)
    fences_are_ours(body)


def test_model_text_renders_harmlessly_in_gfm(tmp_path: Path, stub: GitHubStub) -> None:
    body = _nasty_comment(tmp_path, stub)
    # Raw HTML is kept, so anything that got through would show; GitHub sanitises after.
    rendered = gfm(body)
    # No code block opened by an answer: only the next steps' commands and the time chart are fenced.
    assert all(pre in ('<pre lang="sh">', '<pre lang="mermaid">') for pre in re.findall(r"<pre[^>]*>", rendered))
    # Only our own folded sections: no <details> opened or closed by an answer.
    assert rendered.count("<details>") == rendered.count("<details><summary>") == rendered.count("</details>")
    assert rendered.count("<details") == rendered.count("<details>")
    # The only link is the footer's, to the run; the answer's "[ok](https://evil.example)" is text.
    assert re.findall(r'href="([^"]*)"', rendered) == ["https://github.com/octo-org/widgets/actions/runs/4242"]
    # No row split or swallowed: two regressions, then two known failures in their own table.
    for title, count, cells in (("<h3>Regressions (2)</h3>", 2, 6), ("<summary>Known failures and tolerated misses (2)</summary>", 2, 7)):
        table = re.search(re.escape(title) + r"\s*(?:<p>[^<]*</p>\s*)?<table>(.*?)</table>", rendered, re.DOTALL)
        assert table is not None, title
        rows = re.findall(r"<tr>(.*?)</tr>", table.group(1), re.DOTALL)[1:]
        assert len(rows) == count, title
        for row in rows:
            assert len(re.findall(r"<td", row)) == cells, row
    assert "@octocat" not in html.unescape(rendered)
    assert rendered.count("<!--") == 1  # the forged marker is visible text, not a comment


def test_secrets_appear_nowhere(tmp_path: Path, stub: GitHubStub) -> None:
    repo = make_pr_repo(tmp_path, head=planted_regression)
    shutil.rmtree(repo.workspace / ".git")  # the base pins then come from the API, with the token
    stub.add_file(repo.base, "evals/envelope-pins.json", (SUPPORT_BOT / "envelope-pins.json").read_text("utf-8"))
    run = run_action(repo, stub, inputs={"replay": "recordings/pr.jsonl"})
    assert run.code == 1
    # The masks come first: the runner hides these values in every later line.
    assert set(run.stdout.splitlines()[:2]) == {f"::add-mask::{WRITE_TOKEN}", f"::add-mask::{API_KEY}"}
    rest = "\n".join(run.stdout.splitlines()[2:])
    texts = [rest, run.stderr, run.summary, run.outputs_raw, run.report_files()]
    texts += [c["body"] for c in stub.comments(PR)]
    for secret in (WRITE_TOKEN, API_KEY):
        for text in texts:
            assert secret not in text
    assert any(r.path.endswith("/contents/evals/envelope-pins.json") for r in stub.requests)


def test_live_run_with_underscore_inputs_keeps_the_key_secret(tmp_path: Path, stub: GitHubStub) -> None:
    from tests.support.fake_openai import Behaviour, FakeOpenAI

    repo = make_pr_repo(tmp_path)
    with FakeOpenAI(default=Behaviour.ok(f"Hello from Northwind. (echo: {API_KEY})")) as srv:
        run = run_action(repo, stub, env={
            # The underscore form, as a workflow's own `env:` would set it.
            "INPUT_BASE_URL": srv.url, "INPUT_MODEL": "test-model", "INPUT_ENDPOINT_CLASS": "fake",
            "INPUT_BASE-URL": "", "INPUT_ENDPOINT-CLASS": "",
            "INPUT_CONCURRENCY": "2",
        })
        requests = srv.all_requests
    assert run.code in (1, 3), run.stdout + run.stderr
    assert requests and all(r.headers["authorization"] == f"Bearer {API_KEY}" for r in requests)
    assert requests[0].body["model"] == "test-model"
    report = run.report()
    assert report["run"]["mode"] == "live" and report["fingerprint"]["endpoint_class"] == "fake"
    # The endpoint echoed the key: the comment, the summary and the report files must not carry it.
    [comment] = stub.comments(PR)
    log = "\n".join(run.stdout.splitlines()[2:])  # after the two ::add-mask:: lines
    texts = (comment["body"], run.summary, log, run.stderr, run.outputs_raw, run.report_files())
    for text in texts:
        assert API_KEY not in text
    assert "(echo: ***)" in (run.out_dir / "report.json").read_text("utf-8")
    assert r"(echo: \*\*\*\)" in comment["body"]


# -- base branch pins --------------------------------------------------------------------------


# The comment's pin-diff row for the case whose pin the base branch had different (70 chars).
BASE_ROW = re.compile(r"^\| \*\*greeting-no-apology-loop\*\* +\| +\| right · 70 chars · 20 tok +\| right · 79 chars", re.MULTILINE)


def _base_pin_differs(wd: Path) -> None:
    set_pin(wd, "greeting-no-apology-loop", chars=70)


def _restore_pins(wd: Path) -> None:
    shutil.copyfile(SUPPORT_BOT / "envelope-pins.json", pins_path(wd))


def _restore_pins_and_regress(wd: Path) -> None:
    _restore_pins(wd)
    planted_regression(wd)


def test_base_pins_from_the_test_merge_parent(tmp_path: Path, stub: GitHubStub) -> None:
    repo = make_pr_repo(tmp_path, base=_base_pin_differs, head=_restore_pins)
    run = run_action(repo, stub)
    assert run.code == 0
    body = stub.comments(PR)[0]["body"]
    assert "1 of 12 case pins changed in this PR" in body
    assert BASE_ROW.search(body)
    assert f"git show {repo.base[:12]}:evals/envelope-pins.json" in body
    assert not any("/contents/" in r.path for r in stub.requests)
    base = run.report()["base"]
    assert base["present"] is True and base["error"] is None


def _edit_greeting(wd: Path) -> None:
    easy = wd / "evals" / "easy.yaml"
    easy.write_text(easy.read_text("utf-8").replace("How can I help with your order today?", "How can I help?"), "utf-8")


def test_the_page_is_written_beside_the_report_with_git_trusting_the_checkout(tmp_path: Path, stub: GitHubStub) -> None:
    """report.html for upload-artifact: its pinned answers read with git, though (as root in the container) the
    checkout belongs to another user, which git alone refuses as dubious ownership."""
    repo = make_pr_repo(tmp_path, head=_edit_greeting)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        subprocess.run(["chown", "-R", "65534:65534", str(repo.workspace)], check=True)
        untrusted = subprocess.run(["git", "-C", str(repo.workspace), "log", "-1"], capture_output=True, text=True,
                                   env={**os.environ, "GIT_CONFIG_GLOBAL": os.devnull}, check=False)
        assert "dubious ownership" in untrusted.stderr  # what the page would meet without the action's trust
    run = run_action(repo, stub)
    assert run.code == 1, run.stdout + run.stderr  # fixtures_changed: the greeting's answer moved
    assert run.outputs["report-html"] == ".envelope-ci/evals/report.html"
    page = (repo.workspace / run.outputs["report-html"]).read_text("utf-8")
    assert page.startswith("<!DOCTYPE html>") and "greeting-no-apology-loop" in page
    assert "its fixture file had no recorded answers at the pins' commit" in page  # git read the pins' commit
    assert "git could not read the pins file" not in page


def test_checkout_below_the_workspace(tmp_path: Path, stub: GitHubStub) -> None:
    # actions/checkout with `path: src`: the repository is a folder of the workspace.
    built = make_pr_repo(tmp_path / "build", base=_base_pin_differs, head=_restore_pins_and_regress)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    built.workspace.rename(workspace / "src")
    repo = PrRepo(workspace, built.base, built.head, built.merge)
    run = run_action(repo, stub, inputs={"working-directory": "src", "replay": "recordings/pr.jsonl"})
    assert run.code == 1, run.stdout + run.stderr
    body = stub.comments(PR)[0]["body"]
    assert body.startswith(marker_for("src/evals"))
    assert BASE_ROW.search(body) and f"git show {repo.base[:12]}:evals/envelope-pins.json" in body
    assert run.errors[0].startswith("::error file=src/evals/easy.yaml,line=")
    assert run.outputs["report-json"] == ".envelope-ci/src-evals/report.json"


def test_base_pins_without_pins_on_the_base_branch(tmp_path: Path, stub: GitHubStub) -> None:
    def no_pins(wd: Path) -> None:
        pins_path(wd).unlink()

    repo = make_pr_repo(tmp_path, base=no_pins, head=_restore_pins)
    run = run_action(repo, stub)
    assert run.code == 0
    body = stub.comments(PR)[0]["body"]
    assert "the base branch has no pins yet (first pins in this PR)" in body
    assert "12 of 12 case pins changed" in body
    assert not any("/contents/" in r.path for r in stub.requests)


@pytest.mark.parametrize("history", ["no-git", "depth-1"])
def test_base_pins_fall_back_to_the_api(tmp_path: Path, stub: GitHubStub, history: str) -> None:
    repo = make_pr_repo(tmp_path, base=_base_pin_differs, head=_restore_pins)
    if history == "no-git":
        shutil.rmtree(repo.workspace / ".git")
    else:
        clone = tmp_path / "clone"
        git(tmp_path, "clone", "-q", "--depth", "1", "--no-local", "--branch", "feature", repo.workspace.as_uri(), str(clone))
        git(clone, "fetch", "-q", "--depth", "1", "origin", f"refs/remotes/pull/{PR}/merge")
        git(clone, "checkout", "-q", "--detach", "FETCH_HEAD")
        shutil.rmtree(repo.workspace)
        clone.rename(repo.workspace)
        assert git(repo.workspace, "rev-parse", "HEAD") == repo.merge
    base_pins = (SUPPORT_BOT / "envelope-pins.json").read_text("utf-8")
    pins = json.loads(base_pins)
    pins["cases"]["greeting-no-apology-loop"]["chars"] = 70
    stub.add_file(repo.base, "evals/envelope-pins.json", json.dumps(pins))
    run = run_action(repo, stub)
    assert run.code == 0, run.stdout + run.stderr
    body = stub.comments(PR)[0]["body"]
    assert BASE_ROW.search(body)
    assert "pull\\_request.base.sha" in body
    [get] = [r for r in stub.requests if "/contents/" in r.path]
    assert get.path == f"/repos/{REPO}/contents/evals/envelope-pins.json" and get.query == {"ref": [repo.base]}
    assert get.headers["Accept"] == "application/vnd.github.raw+json"


def test_base_pins_404_means_first_pr(tmp_path: Path, stub: GitHubStub) -> None:
    repo = make_pr_repo(tmp_path)
    shutil.rmtree(repo.workspace / ".git")
    run = run_action(repo, stub)
    assert run.code == 0
    body = stub.comments(PR)[0]["body"]
    assert "the base branch has no pins yet (first pins in this PR)" in body
    assert "404" in body
    assert not run.warnings


def test_base_pins_unavailable_is_said_and_the_run_goes_on(tmp_path: Path, stub: GitHubStub) -> None:
    repo = make_pr_repo(tmp_path, head=planted_regression)
    shutil.rmtree(repo.workspace / ".git")
    # The contents API refuses (a token without contents: read); the comment still goes out.
    stub.plant(403, count=1, body={"message": "Resource not accessible by integration"})
    run = run_action(repo, stub, inputs={"replay": "recordings/pr.jsonl"})
    assert run.code == 1, run.stdout + run.stderr
    body = stub.comments(PR)[0]["body"]
    assert "base branch pins unavailable:" in body
    assert "base branch pins unavailable" in run.summary
    assert any("base branch pins unavailable" in w for w in run.warnings)
    base = run.report()["base"]
    assert base["present"] is False and "API" in base["error"] and "git" in base["error"]


def test_malformed_base_pins_are_said_and_the_run_goes_on(tmp_path: Path, stub: GitHubStub) -> None:
    def garbage(wd: Path) -> None:
        pins_path(wd).write_text("{not json", "utf-8")

    repo = make_pr_repo(tmp_path, base=garbage, head=_restore_pins)
    run = run_action(repo, stub)
    assert run.code == 0, run.stdout + run.stderr
    body = stub.comments(PR)[0]["body"]
    where = f"{repo.base[:12]}:evals/envelope-pins.json:1: malformed JSON"
    assert "base branch pins unavailable:" in body and where in body
    base = run.report()["base"]
    assert base["present"] is False and where in base["error"]
    assert base["source"] == f"git show {repo.base[:12]}:evals/envelope-pins.json (test merge's first parent)"


# -- what the action hands to the library, and what it makes of a failure (in process) ------------


@dataclass
class Handed:
    """What the action passed to envelope_ci.api.run."""

    config: Any = None
    base: Any = None


def run_in_process(repo: PrRepo, stub: GitHubStub, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                   fake: Callable[..., Any] | None = None, **options: Any) -> tuple[ActionRun, Handed]:
    """``envelope_ci.action.run.main`` in this process, the run (``supervise.run``) wrapped (or replaced by `fake`) to see what it gets."""
    import io

    from envelope_ci import supervise
    from envelope_ci.action.run import main

    handed = Handed()
    real = supervise.run

    def spy(config: Any, base: Any = None) -> Any:
        handed.config, handed.base = config, base
        return (fake or real)(config, base)

    monkeypatch.setattr(supervise, "run", spy)
    monkeypatch.chdir(repo.workspace)  # main changes directory; this puts it back
    env = runner_env(repo, stub, **options)
    out = io.StringIO()
    code = main(env, out)
    return action_run(code, out.getvalue(), capsys.readouterr().err, env), handed


def test_the_run_config_and_base_pins_handed_to_the_library(tmp_path: Path, stub: GitHubStub, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    from envelope_ci.api import BaseSource
    from envelope_ci.config import RunConfig
    from envelope_ci.model import Lane

    repo = make_pr_repo(tmp_path, base=_base_pin_differs, head=_restore_pins_and_regress)
    run, handed = run_in_process(repo, stub, monkeypatch, capsys, inputs={
        "replay": "recordings/pr.jsonl", "lane": "adjudication", "concurrency": "7", "repeats": "2", "endpoint-class": "fake"})
    assert run.code == 1, run.stdout + run.stderr
    config = handed.config
    assert isinstance(config, RunConfig)
    assert (config.fixtures_dir, config.pins_path, config.replay) == (Path("evals"), Path("evals/envelope-pins.json"), Path("recordings/pr.jsonl"))
    assert config.out_dir == repo.workspace.resolve() / ".envelope-ci" / "evals"
    assert (config.lane, config.concurrency, config.repeats, config.endpoint_class) == (Lane.ADJUDICATION, 7, 2, "fake")
    assert config.max_run_time_s == 1800  # bounded by default
    assert (config.base_url, config.model, config.api_key, config.stream, config.in_ci, config.write_pins) == (None, None, API_KEY, False, True, False)
    base = handed.base
    assert isinstance(base, BaseSource) and base.error is None and base.pins is not None
    assert base.pins.cases["greeting-no-apology-loop"].chars == 70
    assert base.source == f"git show {repo.base[:12]}:evals/envelope-pins.json (test merge's first parent)"
    assert not (run.out_dir / "base-pins.json").exists()
    # The console summary is in the fenced group, before its end.
    fenced = run.stdout.split("::stop-commands::", 1)[1]
    assert fenced.index("envelope-ci: FAIL") < fenced.index("::endgroup::")


def test_no_pull_request_hands_no_base_pins(tmp_path: Path, stub: GitHubStub, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_pr_repo(tmp_path)
    run, handed = run_in_process(repo, stub, monkeypatch, capsys, event={}, event_name="push",
                                 env={"EVAL_BASE_URL": "http://127.0.0.1:9/v1", "EVAL_MODEL": "m", "INPUT_REPLAY": "r.jsonl"})
    assert run.code == 2  # a job's EVAL_BASE_URL stands in for base-url, as on the command line, and excludes a replay
    assert handed.base is None and handed.config.base_url == "http://127.0.0.1:9/v1" and handed.config.model == "m"
    assert "--base-url and --replay are exclusive" in run.summary


@pytest.mark.parametrize(("raised", "code", "said"), [
    (RuntimeError(f"boom {API_KEY}"), 70, "RuntimeError: boom ***"),
    (KeyboardInterrupt(), 130, "envelope-ci: interrupted"),
])
def test_a_crash_or_an_interrupt_still_reports(tmp_path: Path, stub: GitHubStub, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str], raised: BaseException, code: int, said: str) -> None:
    def crash(*_: Any) -> Any:
        raise raised

    repo = make_pr_repo(tmp_path)
    run, _ = run_in_process(repo, stub, monkeypatch, capsys, fake=crash)
    assert run.code == code and run.outputs["exit-code"] == str(code) and run.outputs["verdict"] == ""
    body = stub.comments(PR)[0]["body"]
    for text in (body, run.summary):
        assert f"envelope-ci: exit {code}" in text and said in text
    assert said in run.stderr and [e for e in run.errors if "envelope-ci failed" in e]
    for text in (body, run.summary, run.stdout.split("\n", 2)[2], run.stderr):
        assert API_KEY not in text and WRITE_TOKEN not in text
    if code == 70:
        assert "Traceback (most recent call last)" in run.stderr and "Traceback" in body


# -- the harness's verdicts --------------------------------------------------------------------


def test_outputs_are_all_written(tmp_path: Path, stub: GitHubStub) -> None:
    repo = make_pr_repo(tmp_path, head=planted_regression)
    run = run_action(repo, stub, inputs={"replay": "recordings/pr.jsonl"})
    assert set(run.outputs) == set(OUTPUTS)
    report = run.report()
    assert run.outputs["verdict"] == report["verdict"] == "fail"
    assert run.outputs["exit-code"] == "1"
    assert run.outputs["regressions"] == "1" and report["regressions"] == ["no-invented-tracking"]
    assert run.outputs["stable"] == str(report["summary"]["stable"]) == "9"
    assert float(run.outputs["yield"]) == report["summary"]["yield"] == 1.0
    assert float(run.outputs["accuracy-on-yield"]) == pytest.approx(report["summary"]["accuracy_on_yield"], abs=1e-6)
    assert run.outputs["alerts"] == ",".join(report["alerts"]) == "easy_regression"
    assert run.outputs["baseline-lowered"] == "false" and report["base"]["downgraded"] == []
    assert run.outputs["report-json"] == ".envelope-ci/evals/report.json"
    assert run.outputs["report-markdown"] == ".envelope-ci/evals/report.md"
    for name in ("report-json", "report-markdown"):
        assert (repo.workspace / run.outputs[name]).is_file()
    assert run.outputs["comment-url"].startswith(f"https://github.com/{REPO}/pull/{PR}#issuecomment-")


def test_annotation_on_the_regressed_fixture_line(tmp_path: Path, stub: GitHubStub) -> None:
    repo = make_pr_repo(tmp_path, subdir="services/bot", head=planted_regression)
    run = run_action(repo, stub, inputs={"working-directory": "services/bot", "replay": "recordings/pr.jsonl"})
    assert run.code == 1
    line = next(i for i, text in enumerate((SUPPORT_BOT / "easy.yaml").read_text("utf-8").splitlines(), 1)
                if text == "- id: no-invented-tracking")
    [error] = run.errors
    assert error.startswith(f"::error file=services/bot/evals/easy.yaml,line={line},title=envelope-ci%3A no-invented-tracking")
    assert "regression (correctness)" in error and "1Z" in error
    assert run.outputs["report-json"] == ".envelope-ci/services-bot-evals/report.json"
    assert stub.comments(PR)[0]["body"].startswith(marker_for("services/bot/evals"))


def test_fixtures_changed_without_pins(tmp_path: Path, stub: GitHubStub) -> None:
    def edit_fixture(wd: Path) -> None:
        easy = wd / "evals" / "easy.yaml"
        easy.write_text(easy.read_text("utf-8").replace("prompt: hi\n", "prompt: hello there\n"), "utf-8")

    repo = make_pr_repo(tmp_path, head=edit_fixture)
    run = run_action(repo, stub)
    assert run.code == 1
    assert "fixtures_changed" in run.outputs["alerts"]
    body = stub.comments(PR)[0]["body"]
    assert "greeting-no-apology-loop" in body
    assert "envelope-ci run evals --pins evals/envelope-pins.json --lane adjudication --write-pins" in body


@pytest.mark.parametrize(("fail_on", "expected"), [("false", 0), ("true", 3)])
def test_inconclusive(tmp_path: Path, stub: GitHubStub, fail_on: str, expected: int) -> None:
    dropped = {"error": "ConnectionResetError: [Errno 104] Connection reset by peer", "elapsed_ms": 3.0}
    repo = make_pr_repo(tmp_path, head=lambda wd: write_replay(wd, {"intent-refund": dropped}))
    run = run_action(repo, stub, inputs={"replay": "recordings/pr.jsonl", "fail-on-inconclusive": fail_on})
    assert run.code == expected, run.stdout + run.stderr
    assert run.outputs["exit-code"] == "3" and run.outputs["verdict"] == "inconclusive"
    assert any("inconclusive" in w for w in run.warnings)
    assert "envelope-ci: inconclusive" in stub.comments(PR)[0]["body"]


def test_underscore_inputs_are_accepted(tmp_path: Path, stub: GitHubStub) -> None:
    dropped = {"error": "ConnectionResetError: [Errno 104] Connection reset by peer", "elapsed_ms": 3.0}
    repo = make_pr_repo(tmp_path, subdir="app", head=lambda wd: write_replay(wd, {"intent-refund": dropped}))
    run = run_action(repo, stub, env={
        "INPUT_FAIL-ON-INCONCLUSIVE": "", "INPUT_FAIL_ON_INCONCLUSIVE": "false",
        "INPUT_WORKING-DIRECTORY": "", "INPUT_WORKING_DIRECTORY": "app",
        "INPUT_GITHUB-TOKEN": "", "INPUT_GITHUB_TOKEN": WRITE_TOKEN,
        "INPUT_REPLAY": "recordings/pr.jsonl",
    })
    assert run.code == 0 and run.outputs["exit-code"] == "3", run.stdout + run.stderr
    assert stub.comments(PR)[0]["body"].startswith(marker_for("app/evals"))


def test_bad_input_exits_2_with_the_reason(tmp_path: Path, stub: GitHubStub) -> None:
    repo = make_pr_repo(tmp_path)
    run = run_action(repo, stub, inputs={"lane": "turbo", "stream": "yes"})
    assert run.code == 2 and run.outputs["exit-code"] == "2" and run.outputs["verdict"] == ""
    [error] = run.errors
    assert "lane" in error and "turbo" in error and "stream" in error
    assert stub.requests == []


def test_broken_fixtures_exit_2_and_say_where(tmp_path: Path, stub: GitHubStub) -> None:
    def break_it(wd: Path) -> None:
        (wd / "evals" / "broken.yaml").write_text("- id: broken\n  stratum: easy\n", "utf-8")

    repo = make_pr_repo(tmp_path, head=break_it)
    run = run_action(repo, stub)
    assert run.code == 2, run.stdout + run.stderr
    assert run.outputs["exit-code"] == "2" and run.outputs["report-json"] == ""
    body = stub.comments(PR)[0]["body"]
    assert "envelope-ci: bad input" in body and "broken.yaml" in body
    assert "broken.yaml" in run.summary
    assert run.errors and "broken.yaml" in run.errors[0]


def test_defaults_match_action_yml() -> None:
    from envelope_ci.action.inputs import INPUT_DEFAULTS
    from envelope_ci.action.publish import OUTPUT_NAMES

    action = yaml.safe_load((ROOT / "action.yml").read_text("utf-8"))
    defaults = {name: str(spec.get("default", "")) for name, spec in action["inputs"].items()}
    defaults["github-token"] = ""  # ${{ github.token }} only exists on a runner
    assert INPUT_DEFAULTS == defaults
    assert set(OUTPUT_NAMES) == set(action["outputs"]) == set(OUTPUTS)


def _head_pins_lower_the_baseline(wd: Path) -> None:
    """The PR pins intent-refund (right and stable on the base branch) as wrong."""
    set_pin(wd, "intent-refund", label="wrong", channel="correctness")


def test_baseline_lowered_is_an_output_and_tops_the_comment(tmp_path: Path, stub: GitHubStub) -> None:
    repo = make_pr_repo(tmp_path, head=_head_pins_lower_the_baseline)
    run = run_action(repo, stub)
    assert run.report()["base"]["downgraded"] == ["intent-refund"]
    assert run.outputs["baseline-lowered"] == "true"
    # A warning, not a failure: rewriting pins is the reviewed way to move a baseline.
    assert run.outputs["verdict"] != "fail" and "baseline_lowered" not in run.outputs["alerts"]
    lines = stub.comments(PR)[0]["body"].splitlines()
    assert lines[1].startswith("## ") and lines[3].startswith("> **⚠️ Baseline lowered. This PR downgrades 1 pin that the base branch")
    assert "intent-refund (right → wrong)" in lines[3] and "evals/envelope-pins.json" in lines[3]
    assert run.summary.splitlines()[2].startswith("> **⚠️ Baseline lowered.")
    assert any("baseline lowered" in w and "intent-refund" in w for w in run.warnings)


def test_temperature_input_reaches_the_run(tmp_path: Path, stub: GitHubStub, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_pr_repo(tmp_path)
    _, handed = run_in_process(repo, stub, monkeypatch, capsys, inputs={"temperature": "0.7"})
    assert handed.config.temperature == 0.7
    _, default = run_in_process(repo, stub, monkeypatch, capsys)
    assert default.config.temperature == 0.0


@pytest.mark.parametrize("value", ["2.5", "-1", "nan", "inf", "1e0", "1_0", "0.7.1", "warm", "0x1"])
def test_temperature_input_is_a_number_from_0_to_2(value: str) -> None:
    from envelope_ci.action.inputs import InputError, read_inputs

    with pytest.raises(InputError, match=rf"input 'temperature' must be a number from 0 to 2, got {re.escape(repr(value))}"):
        read_inputs({"INPUT_TEMPERATURE": value})
    for fine in ("0", "2", "0.7", "1.0", ".5"):
        assert read_inputs({"INPUT_TEMPERATURE": fine}).temperature == float(fine)


def test_docs_list_every_input_and_output() -> None:
    action = yaml.safe_load((ROOT / "action.yml").read_text("utf-8"))
    docs = (ROOT / "docs" / "action.md").read_text("utf-8")
    inputs = docs[docs.index("## Inputs"):docs.index("## Outputs")]
    outputs = docs[docs.index("## Outputs"):docs.index("## Reviewing a lowered baseline")]
    assert re.findall(r"^\| `([a-z-]+)` \|", inputs, re.M) == list(action["inputs"])
    assert re.findall(r"^\| `([a-z-]+)` \|", outputs, re.M) == list(action["outputs"])


# -- docs/comment-example.md -------------------------------------------------------------------

EXAMPLE_HEADER = (
    "<!-- docs/comment-example.md: the PR comment envelope-ci posted for fixtures_example/support-bot with one\n"
    "     planted regression and one case made faster\n"
    "     (tests/action/test_entrypoint.py::test_comment_example_is_current; regenerate with\n"
    "     ENVELOPE_CI_REGEN_DOCS=1 python -m pytest tests/action/test_entrypoint.py -k comment_example). -->\n"
)


def _example_pr(wd: Path) -> None:
    """The example's PR: its pins restored, one answer now inventing a tracking number, another answered in half the time."""
    _restore_pins(wd)
    write_replay(wd, {"no-invented-tracking": envelope(INVENTED, 388.2),
                      "intent-refund": envelope('{"intent": "refund", "confidence": 0.97}', 141.0)})


def test_comment_example_is_current(tmp_path: Path, stub: GitHubStub) -> None:
    repo = make_pr_repo(tmp_path, base=_base_pin_differs, head=_example_pr)
    run = run_action(repo, stub, inputs={"replay": "recordings/pr.jsonl"})
    assert run.code == 1 and run.outputs["regressions"] == "1"
    body = stub.comments(PR)[0]["body"]
    # What the example shows: the regression with its reason, the one table, a chart of the faster case, the rest folded.
    top = body[:body.index("<details>")]
    for shown in ("### Regressions (1)", "contains forbidden '1Z'", "### Channels by stratum", "### Time moved (1)",
                  '"intent-refund · pin", "intent-refund · this run"'):
        assert shown in top, shown
    text = EXAMPLE_HEADER + body
    # The README shows the same comment, quoted, as a screenshot of what a PR gets.
    quoted = "\n".join(("> " + line).rstrip() for line in body.rstrip("\n").split("\n"))
    readme = (ROOT / "README.md").read_text("utf-8")
    start, end = "<!-- example-comment:start -->\n", "\n<!-- example-comment:end -->"
    before, rest = readme.split(start, 1)
    _, after = rest.split(end, 1)
    if os.environ.get("ENVELOPE_CI_REGEN_DOCS") == "1":
        COMMENT_EXAMPLE.write_text(text, "utf-8")
        (ROOT / "README.md").write_text(before + start + quoted + end + after, "utf-8")
    assert COMMENT_EXAMPLE.read_text("utf-8") == text
    assert rest.split(end, 1)[0] == quoted, "README's example comment is stale: regenerate it"


def _stuck_case(wd: Path) -> None:
    """A case whose regex never ends on its answer ("^(a|aa)+$" against a's then "!"): grading it hangs."""
    (wd / "evals" / "stuck.yaml").write_text(
        "- id: zz-stuck\n  prompt: p\n  completion: '" + "a" * 40 + "!'\n  assert:\n    - type: regex\n      value: '^(a|aa)+$'\n", "utf-8")


def test_max_run_time_stops_a_stuck_run_and_still_comments(tmp_path: Path, stub: GitHubStub) -> None:
    repo = make_pr_repo(tmp_path, head=_stuck_case)
    pins = pins_path(repo.workspace).read_bytes()
    started = time.monotonic()
    run = run_action(repo, stub, inputs={"max-run-time": "3"})
    assert time.monotonic() - started < 60
    assert run.code == 3, run.stdout + run.stderr
    assert run.outputs["exit-code"] == "3" and run.outputs["verdict"] == "inconclusive"
    body = stub.comments(PR)[0]["body"]
    assert r"the run reached --max-run-time \(3 s\) while grading case zz-stuck" in body, body  # parentheses escaped for Markdown
    report = run.report()
    rows = {row["id"]: row for row in report["cases"]}
    assert rows["zz-stuck"]["label"] == "drop" and sum(row["label"] != "drop" for row in report["cases"]) > 0
    assert pins_path(repo.workspace).read_bytes() == pins


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf", "1e3", "1_0", "ten", "5s", "0.0"])
def test_max_run_time_input_is_a_positive_number_of_seconds(value: str) -> None:
    from envelope_ci.action.inputs import InputError, read_inputs

    with pytest.raises(InputError, match=rf"input 'max-run-time' must be a positive number of seconds \(e.g. 1200\), got {re.escape(repr(value))}"):
        read_inputs({"INPUT_MAX-RUN-TIME": value})
    assert read_inputs({}).max_run_time == 1800  # a run is bounded by default: 30 minutes
    for fine in ("1200", "0.5", "30.25"):
        assert read_inputs({"INPUT_MAX-RUN-TIME": fine}).max_run_time == float(fine)


def _stuck_grader(wd: Path) -> None:
    """A python grader whose import never returns: loading never runs it, so the run hangs grading its case."""
    (wd / "evals" / "graders").mkdir()
    (wd / "evals" / "graders" / "stuck.py").write_text("import time\nwhile True:\n    time.sleep(0.05)\n", "utf-8")
    (wd / "evals" / "stuck.yaml").write_text(
        "- id: zz-stuck\n  prompt: p\n  completion: hi\n  assert:\n    - type: python\n      value: graders/stuck.py:ok\n", "utf-8")


def test_a_stuck_grader_is_stopped_while_grading_and_the_comment_says_where(tmp_path: Path, stub: GitHubStub) -> None:
    repo = make_pr_repo(tmp_path, head=_stuck_grader)
    started = time.monotonic()
    run = run_action(repo, stub, inputs={"max-run-time": "1"})
    assert time.monotonic() - started < 60
    assert run.code == 3, run.stdout + run.stderr
    assert run.outputs["exit-code"] == "3" and run.outputs["verdict"] == "inconclusive"
    body = stub.comments(PR)[0]["body"]
    assert "while grading case zz-stuck" in body
