"""Issue 27 item 1: the fixtures directory (envelope-ci.yaml is pull-request content) never chooses where a secret goes.

On a live run an endpoint the settings file names (an llm-rubric judge) is called only at a host
the operator allowed (its URL given with ``--endpoint`` / the Action's ``endpoints`` input, or the
``--base-url`` origin), with a key only from a variable the operator allowed (``--allow-key-env`` /
``allow-key-env``; ``EVAL_API_KEY`` only at the ``--base-url`` origin); ``${NAME}`` in ``headers``
expands only allowed variables. Anything else is exit 2 before any request. Hosts are origins:
scheme, host name as written (no DNS) and port. Only 127.0.0.1 and localhost are used.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from envelope_ci.action.inputs import InputError, read_inputs
from envelope_ci.action.suite import locate, run_config
from envelope_ci.model import Thresholds
from envelope_ci.sources.endpoints import Endpoint, key_refusal, untrusted_endpoints
from envelope_ci.sources.settings import FileConfig
from envelope_ci.urls import origin
from tests.support.fake_openai import Behaviour, FakeOpenAI
from tests.support.github_stub import BOT_LOGIN, WRITE_TOKEN, GitHubStub
from tests.support.suites import make_suite, run_cli

pytestmark = pytest.mark.usefixtures("clean_env")

ROOT = Path(__file__).resolve().parents[2]
ANSWER = "Sorry about that! You can get a refund within 30 days."
EVAL_KEY = "sk-eval-key-of-the-base-url-4d1c"
RUNNER_TOKEN = "ghs-runner-token-never-leaves-7f20"  # a runner secret a PR would like to steal
JUDGE_KEY = "sk-judge-key-the-operator-allows-93ab"
HINT = "(give it with --endpoint judge=URL or the Action input endpoints, or use the --base-url host)"


def verdict(passed: bool = True) -> Behaviour:
    return Behaviour.ok(json.dumps({"pass": passed, "reason": "apologises once, names 30 days"}), model="judge-model")


def judge_suite(tmp_path: Path, judge: Mapping[str, Any], headers: Mapping[str, str] | None = None,
                name: str = "suite") -> Path:
    """One case the ``judge`` endpoint grades: the answer planted on [[model-refund]], the verdict on [[judge-ok]]."""
    case = {"id": "refund", "prompt": "How do I get a refund? [[model-refund]]",
            "assert": [{"type": "llm-rubric", "value": "Mentions the refund window and apologises once [[judge-ok]]",
                        "endpoint": "judge"}]}
    config: dict[str, Any] = {"endpoints": {"judge": {"model": "gpt-judge", **judge}}}
    if headers is not None:
        config["headers"] = dict(headers)
    return make_suite(tmp_path, [case], config=config, name=name)


@pytest.fixture
def model() -> Any:
    """The operator's --base-url server: it answers the case and, when it is the judge too, the rubric."""
    with FakeOpenAI() as server:
        server.plant("model-refund", Behaviour.ok(ANSWER))
        server.plant("judge-ok", verdict())
        yield server
    assert server.errors == []


@pytest.fixture
def foreign() -> Any:
    """A second server, another origin (another port): the host a pull request would like to send a key to."""
    with FakeOpenAI(default=verdict()) as server:
        yield server
    assert server.errors == []


def live(suite: Path, out: Path, base_url: str, *args: str, env: Mapping[str, str | None] | None = None) -> Any:
    return run_cli(["run", suite, "--out", out, "--base-url", base_url, "--model", "m", *args],
                   env={"EVAL_API_KEY": EVAL_KEY, "ENVCI_RUNNER_TOKEN": RUNNER_TOKEN, "ENVCI_JUDGE_KEY": JUDGE_KEY,
                        **(env or {})})


# -- origins ---------------------------------------------------------------------------------------


def test_hosts_are_compared_as_origins_without_dns() -> None:
    assert origin("http://127.0.0.1:8000/v1") == origin("HTTP://127.0.0.1:8000/other") == ("http", "127.0.0.1", 8000)
    assert origin("https://Host.Example/v1") == origin("https://host.example:443/") == ("https", "host.example", 443)
    assert origin("http://user:pw@host.example/v1") == ("http", "host.example", 80)  # the password is not the host
    assert origin("http://localhost:8000/v1") != origin("http://127.0.0.1:8000/v1")  # names, never resolved
    assert origin("http://127.0.0.1:8001/v1") != origin("http://127.0.0.1:8000/v1")  # another port
    assert origin("http://host.example/v1") != origin("https://host.example/v1")  # another scheme
    assert origin("not a url") is None and origin("http://host:99999/") is None and origin(None) is None


def test_eval_api_key_goes_only_to_the_base_url_origin() -> None:
    base = "https://llm.example/v1"
    assert key_refusal("EVAL_API_KEY", "https://llm.example/judge/v1", base, ()) is None
    # Listing it does not send it anywhere else.
    why = key_refusal("EVAL_API_KEY", "https://evil.example/v1", base, ("EVAL_API_KEY",))
    assert why == ("the settings file asks for $EVAL_API_KEY at host evil.example, but that key goes only to the "
                   "--base-url host (llm.example)")
    assert "http://llm.example" in (key_refusal("EVAL_API_KEY", "http://llm.example/v1", base, ()) or "")
    assert key_refusal("JUDGE_KEY", "https://evil.example/v1", base, ("JUDGE_KEY",)) is None
    assert "--allow-key-env GITHUB_TOKEN" in (key_refusal("GITHUB_TOKEN", "https://llm.example/v1", base, ()) or "")


def test_only_the_endpoints_the_cases_use_are_checked_and_both_reasons_are_named() -> None:
    endpoints = {"judge": Endpoint("judge", "https://evil.example/v1", "m", "GITHUB_TOKEN"),
                 "spare": Endpoint("spare", "https://other.example/v1", "m", "AWS_SECRET_ACCESS_KEY")}
    problems = untrusted_endpoints(endpoints, {"judge"}, "https://llm.example/v1", (), "evals/envelope-ci.yaml", 3)
    assert [str(p) for p in problems] == [
        "evals/envelope-ci.yaml:3: endpoints.judge: the settings file names host evil.example, which the operator "
        f"did not allow {HINT}",
        "evals/envelope-ci.yaml:3: endpoints.judge.api_key_env: the settings file asks for $GITHUB_TOKEN, which the "
        "operator did not allow (allow it with --allow-key-env GITHUB_TOKEN, or the Action input allow-key-env)",
    ]
    given = {"judge": Endpoint("judge", "https://evil.example/v1", "m", None, given=True)}
    assert untrusted_endpoints(given, {"judge"}, "https://llm.example/v1", (), "s", None) == []


def test_header_variables_expand_only_when_allowed() -> None:
    settings = FileConfig(Thresholds(), {"x-leak": "${GITHUB_TOKEN}", "api-key": "${EVAL_API_KEY}", "x-ok": "v-${OK}"},
                          Path("evals/envelope-ci.yaml"), 4)
    environ = {"GITHUB_TOKEN": RUNNER_TOKEN, "EVAL_API_KEY": EVAL_KEY, "OK": "fine"}
    [refused] = settings.header_refusals({"OK"})
    assert str(refused) == ("evals/envelope-ci.yaml:4: headers.x-leak: ${GITHUB_TOKEN} is a variable the operator did "
                            "not allow (allow it with --allow-key-env GITHUB_TOKEN, or the Action input allow-key-env)")
    assert settings.header_refusals({"OK", "GITHUB_TOKEN"}) == []
    # EVAL_API_KEY needs no listing: headers go to the --base-url host only, which has that key already.
    assert settings.resolved_headers(environ, {"OK", "GITHUB_TOKEN"})["api-key"] == EVAL_KEY


# -- the command line ------------------------------------------------------------------------------


def test_a_foreign_judge_host_and_key_are_refused_before_any_request(tmp_path: Path, model: FakeOpenAI,
                                                                      foreign: FakeOpenAI) -> None:
    suite = judge_suite(tmp_path, {"base_url": foreign.url, "api_key_env": "ENVCI_RUNNER_TOKEN"})
    result = live(suite, tmp_path / "out", model.url)
    assert result.code == 2, result.err
    settings = (suite / "envelope-ci.yaml").as_posix()
    assert result.err_lines == [
        f"error: {settings}:1: endpoints.judge: the settings file names host 127.0.0.1:{foreign.port}, which the "
        f"operator did not allow {HINT}",
        f"error: {settings}:1: endpoints.judge.api_key_env: the settings file asks for $ENVCI_RUNNER_TOKEN, which the "
        "operator did not allow (allow it with --allow-key-env ENVCI_RUNNER_TOKEN, or the Action input allow-key-env)",
    ]
    assert foreign.all_requests == [] and model.all_requests == []
    assert RUNNER_TOKEN not in result.out + result.err


def test_localhost_is_another_host_than_127_0_0_1(tmp_path: Path, model: FakeOpenAI) -> None:
    suite = judge_suite(tmp_path, {"base_url": f"http://localhost:{model.port}/v1"})
    result = live(suite, tmp_path / "out", model.url)
    assert result.code == 2 and f"names host localhost:{model.port}, which the operator did not allow" in result.err
    assert model.all_requests == []


def test_offline_runs_need_no_key_and_are_not_refused(tmp_path: Path, foreign: FakeOpenAI) -> None:
    suite = judge_suite(tmp_path, {"base_url": foreign.url, "api_key_env": "ENVCI_RUNNER_TOKEN"},
                        headers={"x-leak": "${ENVCI_RUNNER_TOKEN}"})
    result = run_cli(["run", suite, "--out", tmp_path / "out"])
    assert "operator did not allow" not in result.err  # (exit 2 for another reason: the case has no recording)
    assert "has no 'completion' or 'recorded'" in result.err and foreign.all_requests == []


def test_the_base_url_origin_is_allowed_and_gets_eval_api_key(tmp_path: Path, model: FakeOpenAI) -> None:
    suite = judge_suite(tmp_path, {"base_url": model.url, "api_key_env": "EVAL_API_KEY"})
    result = live(suite, tmp_path / "out", model.url)
    assert result.code in (0, 1, 3), result.err  # graded: the verdict depends on pins, not on trust
    [judged] = model.requests("judge-ok")
    assert judged.headers["authorization"] == f"Bearer {EVAL_KEY}"


def test_eval_api_key_is_never_sent_to_another_host_even_when_listed(tmp_path: Path, model: FakeOpenAI,
                                                                   foreign: FakeOpenAI) -> None:
    suite = judge_suite(tmp_path, {"base_url": "http://127.0.0.1:9/v1", "api_key_env": "EVAL_API_KEY"})
    result = live(suite, tmp_path / "out", model.url, "--endpoint", f"judge={foreign.url}",
                  "--allow-key-env", "EVAL_API_KEY")
    assert result.code == 2
    assert (f"endpoints.judge.api_key_env: the settings file asks for $EVAL_API_KEY at host 127.0.0.1:{foreign.port}, "
            f"but that key goes only to the --base-url host (127.0.0.1:{model.port})") in result.err
    assert foreign.all_requests == [] and model.all_requests == []


def test_the_operators_endpoint_and_variable_are_allowed(tmp_path: Path, model: FakeOpenAI,
                                                         foreign: FakeOpenAI) -> None:
    suite = judge_suite(tmp_path, {"base_url": "http://127.0.0.1:9/v1", "api_key_env": "ENVCI_JUDGE_KEY"})
    refused = live(suite, tmp_path / "no", model.url, "--endpoint", f"judge={foreign.url}")
    assert refused.code == 2 and "$ENVCI_JUDGE_KEY, which the operator did not allow" in refused.err
    assert "names host" not in refused.err and foreign.all_requests == []
    result = live(suite, tmp_path / "out", model.url, "--endpoint", f"judge={foreign.url}",
                  "--allow-key-env", "ENVCI_JUDGE_KEY")
    assert result.code in (0, 1, 3), result.err
    [judged] = foreign.all_requests
    assert judged.headers["authorization"] == f"Bearer {JUDGE_KEY}"
    assert JUDGE_KEY not in result.out + result.err + (tmp_path / "out" / "report.json").read_text("utf-8")


def test_a_header_variable_must_be_allowed(tmp_path: Path, model: FakeOpenAI) -> None:
    suite = judge_suite(tmp_path, {"base_url": model.url}, headers={"x-leak": "${ENVCI_RUNNER_TOKEN}"})
    result = live(suite, tmp_path / "out", model.url)
    assert result.code == 2 and model.all_requests == []
    settings = suite / "envelope-ci.yaml"
    line = settings.read_text("utf-8").splitlines().index("headers:") + 1
    assert result.err_lines == [f"error: {settings.as_posix()}:{line}: headers.x-leak: ${{ENVCI_RUNNER_TOKEN}} "
                                "is a variable the operator did not allow "
                                "(allow it with --allow-key-env ENVCI_RUNNER_TOKEN, or the Action input allow-key-env)"]
    allowed = live(suite, tmp_path / "out2", model.url, "--allow-key-env", "ENVCI_RUNNER_TOKEN")
    assert allowed.code in (0, 1, 3), allowed.err
    [answered] = model.requests("model-refund")
    assert answered.headers["x-leak"] == RUNNER_TOKEN


def test_allow_key_env_takes_variable_names_only(tmp_path: Path) -> None:
    suite = judge_suite(tmp_path, {"base_url": "http://127.0.0.1:9/v1"})
    result = run_cli(["run", suite, "--out", tmp_path / "out", "--allow-key-env", "A-B"])
    assert result.code == 2 and "--allow-key-env" in result.err
    assert "expected the name of an environment variable" in result.err


def test_the_settings_file_cannot_allow_a_variable_itself(tmp_path: Path, model: FakeOpenAI) -> None:
    suite = judge_suite(tmp_path, {"base_url": model.url, "api_key_env": "ENVCI_RUNNER_TOKEN"})
    text = (suite / "envelope-ci.yaml").read_text("utf-8")
    (suite / "envelope-ci.yaml").write_text(text + "allow_key_env: [ENVCI_RUNNER_TOKEN]\n", "utf-8")
    result = live(suite, tmp_path / "out", model.url)
    assert result.code == 2 and "allow_key_env" in result.err and model.all_requests == []


# -- the Action's inputs ---------------------------------------------------------------------------


def test_the_action_inputs_map_to_the_flags(tmp_path: Path) -> None:
    inputs = read_inputs({"INPUT_ENDPOINTS": "judge=http://127.0.0.1:9/v1\n  grader=https://llm.example/v1 ,",
                          "INPUT_ALLOW-KEY-ENV": "ENVCI_JUDGE_KEY, OTHER_KEY\nTHIRD"})
    assert inputs.endpoints == (("judge", "http://127.0.0.1:9/v1"), ("grader", "https://llm.example/v1"))
    assert inputs.allow_key_env == ("ENVCI_JUDGE_KEY", "OTHER_KEY", "THIRD")
    config = run_config(inputs, locate(inputs, tmp_path), {})
    assert config.endpoint_urls == inputs.endpoints and config.allow_key_env == inputs.allow_key_env
    assert read_inputs({}).endpoints == () and read_inputs({}).allow_key_env == ()
    with pytest.raises(InputError, match=r"input 'endpoints': expected NAME=URL, got 'judge'.*input 'allow-key-env'"):
        read_inputs({"INPUT_ENDPOINTS": "judge", "INPUT_ALLOW_KEY_ENV": "NOT-A-NAME"})


def runner_env(workspace: Path, stub: GitHubStub, inputs: Mapping[str, str]) -> dict[str, str]:
    """The environment a runner gives the container on a pull_request run: every input (defaults too), event, files."""
    files = workspace.parent / "runner"
    files.mkdir()
    repo = {"full_name": stub.repo}
    event = {"number": 7, "repository": repo, "pull_request": {
        "number": 7, "head": {"sha": "b" * 40, "ref": "feature", "repo": repo},
        "base": {"sha": "a" * 40, "ref": "main", "repo": repo}}}
    (files / "event.json").write_text(json.dumps(event), "utf-8")
    for name in ("summary.md", "output"):
        (files / name).write_text("", "utf-8")
    action = yaml.safe_load((ROOT / "action.yml").read_text("utf-8"))
    values = {name: str(spec.get("default", "")) for name, spec in action["inputs"].items()}
    values.update({"github-token": WRITE_TOKEN, **inputs})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INPUT_", "GITHUB_", "EVAL_", "RUNNER_", "CI"))}
    env.update({f"INPUT_{name.upper()}": value for name, value in values.items()})
    env.update({"CI": "true", "GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(workspace),
                "GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": str(files / "event.json"),
                "GITHUB_REPOSITORY": stub.repo, "GITHUB_API_URL": stub.url, "GITHUB_SHA": "c" * 40,
                "GITHUB_STEP_SUMMARY": str(files / "summary.md"), "GITHUB_OUTPUT": str(files / "output"),
                "HOME": str(files), "PYTHONIOENCODING": "utf-8",
                "EVAL_API_KEY": EVAL_KEY, "ENVCI_RUNNER_TOKEN": RUNNER_TOKEN, "ENVCI_JUDGE_KEY": JUDGE_KEY})
    return env


def run_action(tmp_path: Path, stub: GitHubStub, judge: Mapping[str, Any],
               inputs: Mapping[str, str]) -> tuple[int, str, str]:
    """entrypoint.py as the runner starts it, on a PR whose evals/envelope-ci.yaml names ``judge``.

    Returns the exit status, the log (stdout), and everything else written: stderr, summary, outputs, comments.
    """
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    judge_suite(workspace, judge, name="evals")
    env = runner_env(workspace, stub, inputs)
    proc = subprocess.run([sys.executable, str(ROOT / "entrypoint.py")], cwd=workspace, env=env, capture_output=True,
                          text=True, encoding="utf-8", timeout=180, check=False)
    files = workspace.parent / "runner"
    written = "\n".join([proc.stderr, (files / "summary.md").read_text("utf-8"), (files / "output").read_text("utf-8"),
                         *(c["body"] for c in stub.comments(7))])
    return proc.returncode, proc.stdout, written


def test_action_live_mode_never_sends_a_runner_secret_to_a_host_the_pr_names(
        tmp_path: Path, stub: GitHubStub, model: FakeOpenAI, foreign: FakeOpenAI) -> None:
    """The end-to-end case: the PR's settings name a second local server and a runner variable; nothing reaches it."""
    code, log, written = run_action(tmp_path, stub, {"base_url": foreign.url, "api_key_env": "ENVCI_RUNNER_TOKEN"},
                                    {"base-url": model.url, "model": "m"})
    assert code == 2, log + written
    assert foreign.all_requests == [] and model.all_requests == []  # refused before any request
    everything = log + written
    host = f"endpoints.judge: the settings file names host 127.0.0.1:{foreign.port}, which the operator did not allow"
    assert host in everything
    assert "the settings file asks for $ENVCI_RUNNER_TOKEN, which the operator did not allow" in everything
    masked = "".join(line for line in everything.splitlines(keepends=True) if not line.startswith("::add-mask::"))
    assert "exit-code" in written and RUNNER_TOKEN not in everything and EVAL_KEY not in masked
    [comment] = [c for c in stub.comments(7) if c["user"]["login"] == BOT_LOGIN]
    assert "ENVCI_RUNNER_TOKEN" in comment["body"]  # the PR's author sees why, in the comment


def test_action_inputs_endpoints_and_allow_key_env_let_the_operator_choose(
        tmp_path: Path, stub: GitHubStub, model: FakeOpenAI, foreign: FakeOpenAI) -> None:
    """The same PR with the operator's word (the workflow's inputs): the judge is called there, with the allowed key."""
    judge = {"base_url": "http://127.0.0.1:9/v1", "api_key_env": "ENVCI_JUDGE_KEY"}
    code, log, written = run_action(tmp_path, stub, judge,
                                    {"base-url": model.url, "model": "m", "endpoints": f"judge={foreign.url}",
                                     "allow-key-env": "ENVCI_JUDGE_KEY"})
    assert code != 2, log + written
    [judged] = foreign.all_requests
    assert judged.headers["authorization"] == f"Bearer {JUDGE_KEY}"
    assert f"::add-mask::{JUDGE_KEY}" in log.splitlines()[:3]  # an allowed variable is a secret of the log too
    assert model.all_requests and all(r.headers["authorization"] == f"Bearer {EVAL_KEY}" for r in model.all_requests)
