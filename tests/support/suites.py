"""Plain helpers the tests share (the fixtures are in ``tests/conftest.py``).

Imported as ``from tests.support.suites import ...``:

- response bodies in the shapes real OpenAI-compatible servers send (OpenAI, Azure,
  vLLM, llama.cpp, as their API references document them): ``chat_body``, ``tool_call``,
  ``recorded``, ``transport_error`` and ``ERROR_BODIES``;
- suites on disk: ``case``, ``write_cases``, ``make_suite``, ``copy_example``, ``write_replay``,
  and the pinned gate suite (``answer_case``, ``pinned_gate_suite``, ``write_pins``);
- the command line in-process (``run_cli``, ``run_report``) and as a subprocess
  (``run_module``, ``run_console_script``), always with a hermetic environment:
  ``CI``/``GITHUB_ACTIONS``/``EVAL_*`` are cleared unless a test sets them, because
  this suite itself runs in CI with ``CI=true``;
- the pure core: ``make_case`` and ``grade``;
- typed data and the plain JSON data report.json holds: ``to_json``, ``from_json``;
- the bundled examples' reports, made once per test session: ``example_report_text``.
"""
from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from envelope_ci.grading.grade import grade as grade_envelope
from envelope_ci.model import Case, Envelope, Grade
from envelope_ci.sources.cases import build_case, checked
from envelope_ci.sources.parse import RawCase
from envelope_ci.sources.recordings import envelope_from_raw

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = REPO_ROOT / "fixtures_example"
MODEL = "gpt-4o-mini-2024-07-18"
OTHER_MODEL = "gpt-4.1-nano-2025-04-14"
# Every variable the CLI reads from the environment: tests start with none of them.
ENV_VARS = ("CI", "GITHUB_ACTIONS", "EVAL_BASE_URL", "EVAL_MODEL", "EVAL_API_KEY")


# ---------------------------------------------------------------------------------------
# Response bodies, as servers send them
# ---------------------------------------------------------------------------------------

_UNSET: Any = object()


def chat_body(
    content: Any = "Hello!",
    *,
    finish_reason: str | None = "stop",
    model: str | None = MODEL,
    refusal: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    usage: tuple[int, int] | None | Any = _UNSET,
    message_extra: Mapping[str, Any] | None = None,
    choice_extra: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A non-streaming chat.completion in OpenAI's shape (openai-python test_completions.py).

    ``usage`` is ``(prompt_tokens, completion_tokens)``, None for a body without usage;
    by default completion_tokens is a plausible count for ``content``.
    """
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": refusal}
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    message.update(message_extra or {})
    choice: dict[str, Any] = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}
    choice.update(choice_extra or {})
    body: dict[str, Any] = {
        "id": "chatcmpl-ABfvaueLEMLNYbT8YzpJxsmiQ6HSY",
        "object": "chat.completion",
        "created": 1727346142,
        "model": model,
        "choices": [choice],
        "system_fingerprint": "fp_b40fb1c6fb",
    }
    if usage is _UNSET:
        text = content if isinstance(content, str) else ""
        usage = (14, max(1, len(text) // 4))
    if usage is not None:
        prompt, completion = usage
        body["usage"] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "completion_tokens_details": {"reasoning_tokens": 0},
        }
    body.update(extra or {})
    return body


def tool_call(
    name: str = "GetWeatherArgs",
    arguments: str | Mapping[str, Any] = '{"city":"Edinburgh","country":"UK","units":"c"}',
) -> dict[str, Any]:
    """One entry of ``message.tool_calls`` (openai-python test_completions.py:634)."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": "call_Y6qJ7ofLgOrBnMD5WbVAeiRV", "type": "function",
            "function": {"name": name, "arguments": args}}


def recorded(
    body: Any, status: int = 200, elapsed_ms: float = 412.0, headers: Mapping[str, str] | None = None, **extra: Any
) -> dict[str, Any]:
    """A recorded envelope ``{http_status, elapsed_ms, headers, body}`` as fixtures and recordings hold it."""
    if headers is None:
        headers = {"content-type": "application/json" if isinstance(body, (dict, list)) else "text/html"}
    env = {"http_status": status, "elapsed_ms": elapsed_ms, "headers": dict(headers), "body": body}
    env.update(extra)
    return env


def transport_error(
    message: str = "ConnectionRefusedError: [Errno 111] Connection refused", elapsed_ms: float = 1.2
) -> dict[str, Any]:
    """A connection that produced no HTTP response at all."""
    return {"error": message, "elapsed_ms": elapsed_ms}


# Verbatim (or nearly) error bodies from the reference, by the name tests use.
ERROR_BODIES: dict[str, Any] = {
    "context_length": {"error": {
        "message": "This model's maximum context length is 4097 tokens. However, your messages resulted in 4294 "
                   "tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}},
    "rate_limit": {"error": {
        "message": "Rate limit reached for 10KTPM-200RPM in organization org-... on tokens per min. "
                   "Limit: 10000 / min. Please try again in 6ms.",
        "type": "tokens", "param": None, "code": "rate_limit_exceeded"}},
    "quota": {"error": {
        "message": "You exceeded your current quota, please check your plan and billing details.",
        "type": "insufficient_quota", "param": None, "code": None}},
    "unauthorized": {"error": "Unauthorized"},
    "vllm_flat": {"object": "error", "message": "max_tokens must be at least 1, got -186.", "type": "BadRequestError",
                  "param": None, "code": 400},
    "vllm_500": {"error": {"message": "EngineCore encountered an issue.", "type": "InternalServerError", "param": None,
                           "code": 500}},
    "llamacpp_loading": {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}},
    "ollama_not_found": {"error": {"message": 'model "gemma3:12b" not found, try pulling it first', "type": "api_error",
                                   "param": None, "code": None}},
    "bad_gateway_html": "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
                        "<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n"
                        "</body>\r\n</html>\r\n",
}

AZURE_FILTER_RESULTS = {
    "hate": {"filtered": False, "severity": "safe"},
    "self_harm": {"filtered": False, "severity": "safe"},
    "sexual": {"filtered": False, "severity": "safe"},
    "violence": {"filtered": False, "severity": "safe"},
}


# ---------------------------------------------------------------------------------------
# The pure core
# ---------------------------------------------------------------------------------------

def case(case_id: str = "c1", **fields: Any) -> dict[str, Any]:
    """A fixture case as written in a file; a prompt unless ``messages`` is given."""
    data: dict[str, Any] = {"id": case_id}
    if "messages" not in fields:
        data["prompt"] = f"Prompt for {case_id}."
    data.update(fields)
    return data


def make_case(**fields: Any) -> Case:
    """A validated ``Case`` (through the real validator, so fixtures stay honest)."""
    data = case(fields.pop("id", "c1"), **fields)
    raw = RawCase(data, "cases.yaml", 1, {})
    problems = checked(raw).problems
    assert not problems, [str(p) for p in problems]
    return build_case(raw)


def grade(source: Mapping[str, Any] | Envelope | str, kase: Case | None = None, **case_fields: Any) -> Grade:
    """Classify one envelope: a recorded-envelope dict, an ``Envelope``, or a completion text."""
    kase = kase or make_case(**case_fields)
    if isinstance(source, Envelope):
        env = source
    elif isinstance(source, str):
        env = Envelope(completion=source)
    else:
        env = envelope_from_raw(source)
    return grade_envelope(env, kase)


# ---------------------------------------------------------------------------------------
# Suites on disk
# ---------------------------------------------------------------------------------------

def dump_cases(path: Path, cases: Sequence[Mapping[str, Any]] | Mapping[str, Any]) -> Path:
    """Write cases in the format the suffix names (.yaml/.yml, .json, .jsonl)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".jsonl":
        items = [cases] if isinstance(cases, Mapping) else list(cases)
        path.write_text("".join(json.dumps(c) + "\n" for c in items), "utf-8")
    elif path.suffix == ".json":
        path.write_text(json.dumps(cases, indent=2) + "\n", "utf-8")
    else:
        data = dict(cases) if isinstance(cases, Mapping) else [dict(c) for c in cases]
        path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), "utf-8")
    return path


write_cases = dump_cases


def make_suite(
    tmp_path: Path,
    cases: Sequence[Mapping[str, Any]] = (),
    files: Mapping[str, str | bytes | Sequence[Mapping[str, Any]]] | None = None,
    config: Mapping[str, Any] | str | None = None,
    name: str = "suite",
) -> Path:
    """A fixtures directory under ``tmp_path``: ``cases`` in cases.yaml, ``files`` as given.

    A ``files`` value that is a str or bytes is written verbatim (for malformed input);
    a list of case dicts is dumped in the format its name's suffix says.
    """
    root = tmp_path / name
    root.mkdir(parents=True, exist_ok=True)
    if cases:
        dump_cases(root / "cases.yaml", cases)
    for rel, content in (files or {}).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        elif isinstance(content, str):
            path.write_text(content, "utf-8")
        else:
            dump_cases(path, content)
    if config is not None:
        text = config if isinstance(config, str) else yaml.safe_dump(dict(config))
        (root / "envelope-ci.yaml").write_text(text, "utf-8")
    return root


def copy_example(tmp_path: Path, name: str) -> Path:
    """A private copy of ``fixtures_example/NAME`` that a test may edit."""
    dest = tmp_path / Path(name).name
    shutil.copytree(EXAMPLES / name, dest)
    return dest


def write_replay(path: Path, lines: Sequence[tuple[str, Any]]) -> Path:
    """A recordings JSONL: one ``{"id", "recorded"}`` object per (id, envelope) pair."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"id": cid, "recorded": env}) + "\n" for cid, env in lines), "utf-8")
    return path


# ---------------------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------------------

@dataclass
class CliResult:
    """Exit code and captured output of one invocation."""

    code: int
    out: str
    err: str

    @property
    def err_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.strip()]


@contextlib.contextmanager
def hermetic_env(env: Mapping[str, str | None] | None = None) -> Iterator[None]:
    """os.environ without CI/EVAL_* variables, plus ``env`` (None deletes); restored after."""
    saved = dict(os.environ)
    try:
        for name in ENV_VARS:
            os.environ.pop(name, None)
        for name, value in (env or {}).items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def run_cli(argv: Sequence[str | Path], env: Mapping[str, str | None] | None = None) -> CliResult:
    """``envelope_ci.cli.main`` in-process, stdout and stderr captured, environment hermetic."""
    from envelope_ci.cli import main

    out, err = io.StringIO(), io.StringIO()
    with hermetic_env(env), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return CliResult(int(code), out.getvalue(), err.getvalue())


def run_report(
    suite: Path,
    out: Path,
    *args: str | Path,
    env: Mapping[str, str | None] | None = None,
) -> tuple[CliResult, dict[str, Any] | None]:
    """``envelope-ci run SUITE --out OUT ARGS`` and the report.json it wrote (None if none)."""
    result = run_cli(["run", suite, "--out", out, *args], env=env)
    report_path = Path(out) / "report.json"
    report = json.loads(report_path.read_text("utf-8")) if report_path.is_file() else None
    return result, report


def _subprocess_env(env: Mapping[str, str | None] | None) -> dict[str, str]:
    full = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
    for name, value in (env or {}).items():
        if value is None:
            full.pop(name, None)
        else:
            full[name] = value
    full["PYTHONIOENCODING"] = "utf-8"
    return full


def run_module(
    args: Sequence[str | Path], env: Mapping[str, str | None] | None = None, cwd: Path | None = None
) -> CliResult:
    """``python -m envelope_ci ARGS`` in a child process."""
    proc = subprocess.run(
        [sys.executable, "-m", "envelope_ci", *map(str, args)],
        capture_output=True, text=True, encoding="utf-8", env=_subprocess_env(env), cwd=cwd, timeout=60,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def console_script() -> str | None:
    """The installed ``envelope-ci`` entry point, beside this interpreter if possible."""
    beside = Path(sys.executable).with_name("envelope-ci")
    return str(beside) if beside.is_file() else shutil.which("envelope-ci")


def run_console_script(
    args: Sequence[str | Path], env: Mapping[str, str | None] | None = None, cwd: Path | None = None
) -> CliResult:
    """``envelope-ci ARGS`` (the console script) in a child process."""
    script = console_script()
    if script is None:
        pytest.skip("the envelope-ci console script is not installed")
    proc = subprocess.run(
        [script, *map(str, args)],
        capture_output=True, text=True, encoding="utf-8", env=_subprocess_env(env), cwd=cwd, timeout=60,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


@functools.cache
def example_report_text(suite: str) -> str:
    """report.json of an offline run of ``fixtures_example/SUITE``: run once per test session, then shared."""
    out = Path(tempfile.mkdtemp(prefix="envelope-ci-example-")) / "out"
    result, report = run_report(EXAMPLES / suite, out)
    assert report is not None, result.err
    return (out / "report.json").read_text("utf-8")


# ---------------------------------------------------------------------------------------
# A pinned suite for gate, pins and lanes tests
# ---------------------------------------------------------------------------------------

ANSWER_SCHEMA = {"type": "object", "required": ["answer"], "properties": {"answer": {"type": "integer"}}}
RIGHT_JSON = '{"answer": 42, "note": "Douglas Adams"}'
WRONG_JSON = '{"answer": 7}'


def answer_envelope(
    content: str = RIGHT_JSON, *, elapsed_ms: float = 400.0, model: str | None = MODEL, tokens: int = 12,
    finish_reason: str = "stop",
) -> dict[str, Any]:
    """A recorded 200 answering the ``answer`` cases (real usage, so tokens are not estimated)."""
    body = chat_body(content, model=model, usage=(30, tokens), finish_reason=finish_reason)
    return recorded(body, elapsed_ms=elapsed_ms)


def answer_case(
    case_id: str, content: str = RIGHT_JSON, *, stratum: str | None = "stretch", **envelope_args: Any
) -> dict[str, Any]:
    """A JSON case (schema + expect_json ``{"answer": 42}``) with one recorded envelope."""
    fields: dict[str, Any] = {"schema": ANSWER_SCHEMA, "expect_json": {"answer": 42},
                              "recorded": answer_envelope(content, **envelope_args)}
    if stratum is not None:
        fields["stratum"] = stratum
    return case(case_id, **fields)


# One stretch case pinned right and stable, two pinned wrong: the stretch rate (1/3) is far
# from every bar, so any failure a test provokes is the regression it planted, not an alert.
GATE_CASES = (
    lambda: answer_case("s-right"),
    lambda: answer_case("s-wrong-1", WRONG_JSON, elapsed_ms=300.0),
    lambda: answer_case("s-wrong-2", WRONG_JSON, elapsed_ms=350.0),
)


def write_pins(suite: Path, out: Path, *args: str, env: Mapping[str, str | None] | None = None) -> CliResult:
    """An adjudication run that writes the pins (outside CI), from the hand-written recordings these tests use.

    Their ``recorded:`` envelopes carry no request record, so the person re-pinning vouches for them on
    the command line (``--allow-unverified-recordings``), as a real one would after reviewing them.
    """
    return run_cli(["run", suite, "--out", out, "--lane", "adjudication", "--write-pins", "--allow-unverified-recordings",
                    *args], env=env)


def pinned_gate_suite(tmp_path: Path) -> Path:
    """The gate suite with pins written by an adjudication run; asserts that run passed."""
    suite = make_suite(tmp_path, [make() for make in GATE_CASES], name="gate")
    result = write_pins(suite, tmp_path / "pins-out")
    assert result.code == 0, result.err + result.out
    assert (suite / "envelope-pins.json").is_file()
    return suite


# ---------------------------------------------------------------------------------------
# Typed data <-> plain JSON data, as report.json and the pins hold it (msgspec)
# ---------------------------------------------------------------------------------------

def to_json(value: Any) -> Any:
    """A struct (or any value) as the plain data its JSON is: arrays as lists (``msgspec.to_builtins`` keeps tuples)."""
    return _lists(msgspec.to_builtins(value))


def _lists(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _lists(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_lists(v) for v in value]
    return value


def from_json(kind: Any, data: Any) -> Any:
    """Plain JSON data read back as ``kind``."""
    return msgspec.convert(data, kind)


def connected(server: socket.socket) -> bool:
    """Whether anything has connected to the ``listener`` fixture's port (each connection taken, and closed)."""
    try:
        server.accept()[0].close()
    except BlockingIOError:
        return False
    return True


def git(repo: Path, *args: str) -> str:
    """A git command in a test's own repository, as a fixed person, signing nothing; its output."""
    done = subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com",
                           "-c", "commit.gpgsign=false", *args], capture_output=True, text=True, check=True, timeout=60)
    return done.stdout
