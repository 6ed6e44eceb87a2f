"""The provider seam from outside: the example plug-in (examples/provider-ollama) installed for real and chosen by
name, against a local stand-in for its server."""
from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.suites import REPO_ROOT
from tests.test_plugins import _env

PLUGIN = REPO_ROOT / "examples" / "provider-ollama"


@pytest.fixture(scope="module")
def provider_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the example provider installed into it from its source folder (no network)."""
    site = tmp_path_factory.mktemp("provider-site")
    install = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index",
               "--disable-pip-version-check", "--target", str(site), str(PLUGIN)]
    done = subprocess.run(install, capture_output=True, text=True, env=_env(), timeout=300)
    assert done.returncode == 0, done.stderr
    return site


class _Generate(http.server.BaseHTTPRequestHandler):
    """Ollama's /api/generate, answering "Paris" and keeping what it was sent."""

    seen: list[tuple[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append((self.path, body))
        data = json.dumps({"model": body["model"], "response": "Paris", "done": True, "done_reason": "stop",
                           "prompt_eval_count": 12, "eval_count": 2}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture()
def ollama() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Generate)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Generate.seen = []
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _run(*args: str | Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "envelope_ci", "run", PLUGIN / "evals", *map(str, args)],
                          capture_output=True, text=True, env=_env(**env), timeout=120)


def test_an_installed_provider_is_chosen_by_name_and_grades_its_answers(provider_site: Path, ollama: str,
                                                                         tmp_path: Path) -> None:
    done = _run("--out", tmp_path / "out", "--base-url", ollama, "--model", "llama3.2", "--provider",
                "ollama-generate", "--record", tmp_path / "rec.jsonl", PYTHONPATH=str(provider_site))
    report = json.loads((tmp_path / "out" / "report.json").read_text("utf-8"))
    row = report["cases"][0]
    assert (row["label"], row["tokens"], row["tokens_estimated"]) == ("right", 2, False), done.stderr
    assert _Generate.seen == [("/api/generate", {"model": "llama3.2", "prompt": "Capital of France?", "stream": False,
                                                 "options": {"temperature": 0.0, "num_predict": 8},
                                                 "system": "Answer in one word."})]
    assert report["fingerprint"]["provider"] == "ollama-generate"
    replayed = _run("--out", tmp_path / "replayed", "--replay", tmp_path / "rec.jsonl", PYTHONPATH=str(provider_site))
    assert json.loads((tmp_path / "replayed" / "report.json").read_text("utf-8"))["cases"][0]["label"] == "right", \
        replayed.stderr


def test_without_the_plugin_its_name_is_bad_usage_listing_the_known_ones(ollama: str, tmp_path: Path) -> None:
    done = _run("--out", tmp_path / "out", "--base-url", ollama, "--model", "m", "--provider", "ollama-generate")
    assert done.returncode == 2 and _Generate.seen == []
    assert ("--provider 'ollama-generate' is not a provider; known: anthropic-messages, openai-chat, openai-responses"
            in done.stderr)
