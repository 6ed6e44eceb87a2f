"""Every file envelope-ci writes is readable by the next step of a job: mode ``0666 & ~umask``, as any new file.

``tempfile.mkstemp`` made every atomically written file 0600 whatever the umask, so a later
step run as another user (an upload, a container, a reviewer's tool) could not read the
reports, ``comment.md`` or the pins. Each writer runs in a child process under umask 022 and
077: reports, pins, ``--record`` recordings, ``import`` sidecars, ``init``'s files and the
Action's ``comment.md``.
"""
from __future__ import annotations

import os
import shlex
import stat
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.action.test_entrypoint import ENTRYPOINT, make_pr_repo, planted_regression, runner_env
from tests.support.fake_openai import Behaviour, FakeOpenAI
from tests.support.suites import _subprocess_env, case, make_suite

pytestmark = [pytest.mark.usefixtures("clean_env"),
              pytest.mark.skipif(os.name != "posix", reason="file modes and umask are POSIX")]

MODES = [("022", 0o644), ("077", 0o600)]


def under_umask(umask: str, args: Sequence[str | Path], cwd: Path,
                env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``args`` in a child process whose umask is ``umask`` (set by the shell: no preexec_fn beside server threads)."""
    command = f"umask {umask} && exec {shlex.join(str(a) for a in args)}"
    return subprocess.run(["/bin/sh", "-c", command], cwd=cwd, env=env or _subprocess_env(None),
                          capture_output=True, text=True, encoding="utf-8", timeout=180, check=False)


def envelope_ci(umask: str, *args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return under_umask(umask, [sys.executable, "-m", "envelope_ci", *args], cwd)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def files_under(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


@pytest.mark.parametrize(("umask", "expected"), MODES)
def test_reports_pins_recordings_and_sidecars_get_the_umask_mode(tmp_path, umask, expected):
    suite = make_suite(tmp_path, [case("greet", prompt="[[greet]] hello", must_include=["Hello"])], name="evals")
    recordings = tmp_path / "run.jsonl"
    with FakeOpenAI() as srv:
        srv.plant("greet", Behaviour.ok("Hello!"))
        live = envelope_ci(umask, "run", suite, "--base-url", srv.url, "--model", "m", "--record", recordings,
                           "--out", tmp_path / "live", cwd=tmp_path)
    assert live.returncode == 0, live.stderr + live.stdout
    imported = envelope_ci(umask, "import", recordings, "--into", suite, cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    pinned = envelope_ci(umask, "run", suite, "--lane", "adjudication", "--write-pins", "--out", tmp_path / "pinned",
                         cwd=tmp_path)
    assert pinned.returncode == 0, pinned.stderr + pinned.stdout

    written = {
        "recordings": [recordings],
        "sidecar": [suite / "cases.yaml.recorded.jsonl"],
        "pins": [suite / "envelope-pins.json"],
        "live reports": files_under(tmp_path / "live"),
        "pinning reports": files_under(tmp_path / "pinned"),
    }
    assert {p.name for p in written["live reports"]} >= {"report.json", "report.md", "junit.xml"}
    assert {what: {p.name: oct(mode(p)) for p in paths} for what, paths in written.items()} == \
        {what: {p.name: oct(expected) for p in paths} for what, paths in written.items()}
    assert not [p for p in tmp_path.rglob("*.tmp")]  # no temporary left behind


@pytest.mark.parametrize(("umask", "expected"), MODES)
def test_init_files_get_the_umask_mode(tmp_path, umask, expected):
    made = envelope_ci(umask, "init", "evals", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    files = files_under(tmp_path)
    assert any(p.name == "envelope-ci.yml" for p in files) and any(p.parent.name == "evals" for p in files)
    assert {p.relative_to(tmp_path).as_posix(): oct(mode(p)) for p in files} == \
        {p.relative_to(tmp_path).as_posix(): oct(expected) for p in files}


@pytest.mark.parametrize(("umask", "expected"), MODES)
def test_the_actions_comment_and_reports_get_the_umask_mode(tmp_path, stub, umask, expected):
    repo = make_pr_repo(tmp_path, head=planted_regression)
    env = runner_env(repo, stub, inputs={"comment": "false", "replay": "recordings/pr.jsonl"})
    ran = under_umask(umask, [sys.executable, ENTRYPOINT], repo.workspace, env)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    out = files_under(repo.workspace / ".envelope-ci")
    assert "comment.md" in {p.name for p in out} and "report.json" in {p.name for p in out}
    assert {p.name: oct(mode(p)) for p in out} == {p.name: oct(expected) for p in out}


def test_an_existing_0600_file_is_replaced_with_the_umask_mode(tmp_path):
    script = (
        "import os, sys\n"
        "from pathlib import Path\n"
        "from envelope_ci import atomic\n"
        "target = Path(sys.argv[1])\n"
        "atomic.write_text(target, 'new\\n')\n"
        "print(oct(os.stat(target).st_mode & 0o777))\n"
    )
    target = tmp_path / "report.md"
    target.write_text("old\n", "utf-8")
    target.chmod(0o600)
    ran = under_umask("022", [sys.executable, "-c", script, target], tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "0o644" and target.read_text("utf-8") == "new\n"
