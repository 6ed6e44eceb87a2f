"""Hostile input and careless setups: nothing leaked, nothing half-written, every bad input a
clean exit 2 before any request."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from envelope_ci import atomic
from envelope_ci.action.suite import slug
from envelope_ci.formats.escape import cell, inline
from envelope_ci.github.comment import marker_for
from envelope_ci.urls import endpoint_secrets, redact
from tests.support.suites import REPO_ROOT, case, make_suite, run_cli, run_report

pytestmark = pytest.mark.usefixtures("clean_env")


def test_passwords_in_urls_are_never_printed(tmp_path):
    url = "http://alice:s3cret-pw@127.0.0.1:9/v1"
    assert redact(url) == "http://***@127.0.0.1:9/v1"
    assert set(endpoint_secrets(url, {"HTTPS_PROXY": "http://bob:proxy-pw@proxy:3128"})) == {"alice:s3cret-pw", "s3cret-pw", "bob:proxy-pw", "proxy-pw"}
    suite = make_suite(tmp_path, [case("a", must_include=["x"])])
    bad_port = run_cli(["run", suite, "--out", tmp_path / "o1", "--base-url", "http://alice:s3cret-pw@127.0.0.1:99999/v1", "--model", "m"])
    assert bad_port.code == 2 and "s3cret" not in bad_port.err and "http://***@127.0.0.1:99999/v1" in bad_port.err
    result, report = run_report(suite, tmp_path / "o2", "--base-url", url, "--model", "m", "--max-attempts", "1", "--timeout", "2")
    assert result.code == 3
    written = "".join(p.read_text("utf-8") for p in (tmp_path / "o2").iterdir())
    assert "s3cret" not in result.out + result.err + written


@pytest.mark.parametrize("name", ["bad\nkey", "::warning::pwned", "x\r::add-mask::y"])
def test_no_workflow_command_injection_from_fixture_text(tmp_path, name):
    suite = make_suite(tmp_path, files={"c.json": json.dumps([{"id": "a", "prompt": "p", name: 1}])})
    result = run_cli(["run", suite, "--out", tmp_path / "out"], env={"GITHUB_ACTIONS": "true"})
    assert result.code == 2
    assert all(not line.startswith("::") for line in result.err.splitlines()), result.err
    assert len(result.err_lines) == 1


def test_a_symlink_out_of_the_fixtures_is_bad_input(tmp_path):
    suite = make_suite(tmp_path, [case("a", completion="x")])
    (suite / "secrets.txt").symlink_to("/etc/passwd")
    result = run_cli(["run", suite, "--out", tmp_path / "out"])
    assert result.code == 2 and "secrets.txt: a symlink out of the fixtures directory (to /etc/passwd)" in result.err
    assert run_cli(["hash", suite]).code == 2
    (suite / "secrets.txt").unlink()
    (suite / "elsewhere").symlink_to(tmp_path, target_is_directory=True)
    assert run_cli(["run", suite, "--out", tmp_path / "out"]).code == 2
    (suite / "elsewhere").unlink()
    (suite / "same.txt").symlink_to(suite / "cases.yaml")  # inside: fine
    assert run_cli(["run", suite, "--out", tmp_path / "out"]).code == 0


def test_an_unreadable_folder_is_bad_input(tmp_path, monkeypatch):
    suite = make_suite(tmp_path, [case("a", completion="x")])
    (suite / "locked").mkdir()
    real_walk = os.walk

    def walk(top, onerror=None, **kwargs):  # root reads everything: plant the error os.walk reports
        if onerror is not None:
            onerror(PermissionError(13, "Permission denied", str(suite / "locked")))
        yield from real_walk(top, onerror=onerror, **kwargs)

    monkeypatch.setattr(os, "walk", walk)
    result = run_cli(["run", suite, "--out", tmp_path / "out"])
    assert result.code == 2 and "locked: cannot read this folder of the fixtures: Permission denied" in result.err


def test_comment_markers_and_report_folders_are_unique_per_suite():
    keys = ["evals/a b", "evals/a-b", "evals/a+b", "evals/ä", "evals/ö"]
    assert len({marker_for(k) for k in keys}) == len(keys)
    assert len({slug(k) for k in keys}) == len(keys)
    assert marker_for("evals/chat") == "<!-- envelope-ci:evals/chat -->"  # clean keys keep their marker
    assert "--" not in marker_for("evals/a b")[4:-3]


def test_gh_references_are_neutralised():
    assert "GH\u200d-12" in inline("fixed in GH-12")
    assert "gh\u200d-7" in cell("see gh-7")
    assert inline("AGH-1") == "AGH-1"  # not a reference, left alone


@pytest.mark.parametrize(("args", "words"), [
    (["--base-url", "localhost:8000/v1"], "--base-url 'localhost:8000/v1' needs http:// or https://"),
    (["--base-url", "http://127.0.0.1:99999/v1"], "has a port that is not a number from 1 to 65535"),
    (["--base-url", "htps://host/v1"], "needs http:// or https:// (got htps://)"),
    (["--timeout", "nan"], "--timeout must be a positive finite number"),
    (["--max-retry-after", "nan"], "--max-retry-after must be a finite number"),
    (["--max-rate-limit-wait", "inf"], "--max-rate-limit-wait must be a finite number"),
    (["--temperature", "nan"], "--temperature must be a number from 0 to 2"),
])
def test_malformed_flags_are_exit_2_before_any_request(tmp_path, args, words):
    suite = make_suite(tmp_path, [case("a", must_include=["x"])])
    live = [] if "--base-url" in args else ["--base-url", "http://127.0.0.1:9/v1"]
    started = time.monotonic()
    result = run_cli(["run", suite, "--out", tmp_path / "out", "--model", "m", *live, *args])
    assert result.code == 2 and words in result.err, result.err
    assert time.monotonic() - started < 5 and not (tmp_path / "out").exists()


def test_writes_are_atomic(tmp_path, monkeypatch):
    target = tmp_path / "envelope-pins.json"
    target.write_text("old pins\n", "utf-8")

    def crash(*_args):
        raise KeyboardInterrupt  # a kill between writing and renaming

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        atomic.write_text(target, "new pins\n")
    assert target.read_text("utf-8") == "old pins\n"
    assert [p.name for p in tmp_path.iterdir()] == ["envelope-pins.json"]  # no temporary left behind
    monkeypatch.undo()
    atomic.write_text(target, "new pins\n")
    assert target.read_text("utf-8") == "new pins\n"


def test_a_kill_during_a_pins_rewrite_never_leaves_an_empty_pins_file(tmp_path):
    suite = make_suite(tmp_path, [case(f"c{i}", completion="y" * 50, must_include=["y"], stratum="easy") for i in range(3000)])
    first = run_cli(["run", suite, "--out", tmp_path / "o", "--lane", "adjudication", "--write-pins"])
    assert first.code in (0, 1), first.err
    pins = suite / "envelope-pins.json"
    good = pins.read_text("utf-8")
    code = "from envelope_ci.cli import main; raise SystemExit(main(%r))" % [
        "run", str(suite), "--out", str(tmp_path / "o2"), "--lane", "adjudication", "--write-pins"]
    for delay in (0.4, 0.8, 1.2):
        proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert pins.read_text("utf-8") == good  # whole: the old pins or the same new ones
    # A kill between writing and renaming can leave a hidden temporary, which is never read as fixtures.
    assert run_cli(["run", suite, "--out", tmp_path / "o3"]).code in (0, 1)


def test_the_urllib3_floor_is_declared():
    text = (REPO_ROOT / "pyproject.toml").read_text("utf-8")
    assert '"urllib3>=2.6"' in text
    import urllib3

    assert tuple(int(x) for x in urllib3.__version__.split(".")[:2]) >= (2, 6)


# Handlers go in ~0.2 s after exec here (0.14 s of it is the interpreter starting); before, only once the live
# phase began (after loading the fixtures), so these windows killed the run without a report.
@pytest.mark.parametrize("delay_s", [0.5, 0.8, 1.2])
def test_an_early_sigterm_still_ends_with_reports(tmp_path, delay_s):
    from tests.support.fake_openai import serve_fixed_delay

    suite = make_suite(tmp_path, [case(f"c{i}", must_include=["ok"]) for i in range(20)])
    out = tmp_path / "out"
    with serve_fixed_delay(300) as srv:
        env = {k: v for k, v in os.environ.items() if k not in ("CI", "GITHUB_ACTIONS", "EVAL_API_KEY")}
        env["PYTHONPATH"] = str(REPO_ROOT)
        proc = subprocess.Popen([sys.executable, "-m", "envelope_ci", "run", str(suite), "--out", str(out), "--base-url", srv.url,
                                 "--model", "m", "--concurrency", "1"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(delay_s)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err.decode()
    report = json.loads((out / "report.json").read_text("utf-8"))
    assert report["verdict"] == "inconclusive" and len(report["cases"]) == 20
