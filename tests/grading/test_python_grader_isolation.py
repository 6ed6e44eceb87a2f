"""Issue #27 item 2: the code that grades is the code that is hashed, and it runs without secrets.

A ``python`` grader is compiled from its source (never a ``.pyc``) in a fresh worker process
whose environment holds no secret, as ``nobody`` when the harness is root, with the harness
non-dumpable; it answers with reasons only, and runs only when an answer needs it.
"""
from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import json
import os
import py_compile
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from envelope_ci.errors import UsageError
from envelope_ci.grading import grader_worker
from envelope_ci.grading.assertions.base import Answer
from envelope_ci.grading.grade import grade_all
from envelope_ci.model import Envelope, Label
from envelope_ci.sources.cases import load_cases
from tests.support.suites import make_suite, run_cli, run_module

pytestmark = pytest.mark.usefixtures("clean_env")

LINUX = sys.platform.startswith("linux")
ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
SECRET = "sk-planted-secret-0123456789"
# What the worker may inherit besides what it is given (HOME, TMPDIR, ...): grader_worker._KEPT.
KEPT = {"PATH", "LANG", "LANGUAGE", "TZ", "SYSTEMROOT", "SYSTEMDRIVE", "WINDIR", "COMSPEC", "PATHEXT"}
GIVEN = {"HOME", "TMPDIR", "PYTHONDONTWRITEBYTECODE", "PYTHONNOUSERSITE", "TMP", "TEMP", "USERPROFILE"}


@pytest.fixture(autouse=True)
def fresh_worker():
    """Each test starts its own worker (with the environment the test set) and leaves none behind."""
    grader_worker.close()
    yield
    grader_worker.close()


@pytest.fixture
def shared_tmp():
    """A folder a worker running as another user (nobody, under a root harness) can use: pytest's are 0700."""
    path = Path(tempfile.mkdtemp(prefix="envelope-ci-test-"))
    path.chmod(0o777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def grader_suite(tmp_path: Path, source: str, cases: list[dict] | None = None, **suite_args) -> Path:
    """A repository (``.git``) with a suite whose case ``g-1`` names ``graders/g.py:check``."""
    (tmp_path / ".git").mkdir(exist_ok=True)
    cases = cases if cases is not None else [py_case("g-1", "an answer")]
    return make_suite(tmp_path, cases, files={"graders/g.py": source}, **suite_args)


def py_case(case_id: str, answer: str, function: str = "check") -> dict:
    return {"id": case_id, "prompt": "Can I get my money back?", "completion": answer,
            "assert": [{"type": "python", "value": f"graders/g.py:{function}"}]}


def graded(suite: Path) -> dict[str, tuple[Label, tuple[str, ...]]]:
    cases = load_cases(suite, set())
    grades = grade_all(cases, {c.id: [Envelope(completion=c.completion)] for c in cases})
    return {cid: (g[0].label, g[0].reasons) for cid, g in grades.items()}


def reason_of(suite: Path, case_id: str = "g-1") -> str:
    label, reasons = graded(suite)[case_id]
    assert label is Label.WRONG and len(reasons) == 1, (label, reasons)
    return reasons[0].removeprefix("graders/g.py:check: ")


def nobody_can_run_python() -> bool:
    """Root only: whether user nobody can start this interpreter with msgspec (it may sit in a root-only folder)."""
    try:
        done = subprocess.run([sys.executable, "-I", "-c", "import msgspec"], user=65534, group=65534, extra_groups=[],
                              capture_output=True, timeout=30, cwd="/")
    except OSError:
        return False
    return done.returncode == 0


# --------------------------------------------------------------------------- source only
def test_grading_follows_the_source_not_an_unchecked_hash_pyc(tmp_path):
    suite = grader_suite(tmp_path, "def check(answer, case):\n    return 'from the source'\n")
    grader = suite / "graders" / "g.py"
    assert reason_of(suite) == "from the source"
    grader_worker.close()
    other = tmp_path / "other.py"
    other.write_text("def check(answer, case):\n    return 'from the pyc'\n", "utf-8")
    pyc = Path(importlib.util.cache_from_source(str(grader)))
    py_compile.compile(str(other), cfile=str(pyc), doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    # The planted .pyc is what the import system runs for this file (the old in-process import would have)...
    probe = ("import importlib.util, sys\nspec = importlib.util.spec_from_file_location('g', sys.argv[1])\n"
             "module = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(module)\n"
             "print(module.check('', {}))\n")
    imported = subprocess.run([sys.executable, "-c", probe, str(grader)], capture_output=True, text=True, timeout=60)
    assert imported.stdout.strip() == "from the pyc", imported.stderr
    # ...and grading ignores it: the worker compiles the bytes the fixtures hash digests.
    assert reason_of(suite) == "from the source"
    digest = "sha256:" + hashlib.sha256(grader.read_bytes()).hexdigest()
    assert load_cases(suite, set())[0].files == {"graders/g.py": digest}


def test_no_bytecode_is_written_into_the_tree(tmp_path, shared_tmp):
    """Not for the grader, nor for a module it imports from the repository itself."""
    repo = shared_tmp
    source = ("import os, sys\nsys.path.insert(0, os.path.dirname(__file__))\nimport helper\n\n"
              "def check(answer, case):\n    return helper.word()\n")
    suite = grader_suite(repo, source)
    (suite / "graders" / "helper.py").write_text("def word():\n    return 'helped'\n", "utf-8")
    result = run_cli(["run", suite, "--out", tmp_path / "out"])
    assert result.code == 1, result.err  # the one case is wrong: its reason is the helper's
    report = json.loads((tmp_path / "out" / "report.json").read_text("utf-8"))
    assert report["cases"][0]["reasons"] == ["graders/g.py:check: helped"]
    assert not list(repo.rglob("__pycache__")) and not list(repo.rglob("*.pyc"))


def test_a_source_that_does_not_match_its_digest_is_refused(tmp_path):
    request = grader_worker.Request(ref="graders/g.py:check", path=str(tmp_path / "g.py"), digest="sha256:" + "0" * 64,
                                    function="check", text="x", case={"id": "c"},
                                    source=b"def check(a, c):\n    return 'ran'\n")
    reply = grader_worker.grade(request)
    assert reply.problem == "graders/g.py: its source did not reach the grader worker whole" and reply.reasons == ()


# --------------------------------------------------------------------------- a worker that cannot reach a secret
def test_the_worker_is_a_fresh_isolated_interpreter_not_a_fork(tmp_path):
    source = ("import json, os, sys\n\ndef check(answer, case):\n"
              "    return json.dumps({'pid': os.getpid(), 'ppid': os.getppid(), 'isolated': sys.flags.isolated,\n"
              "                       'no_bytecode': sys.dont_write_bytecode, 'modules': sorted(sys.modules)})\n")
    seen = json.loads(reason_of(grader_suite(tmp_path, source)))
    assert seen["pid"] != os.getpid() and seen["ppid"] == os.getpid()
    assert seen["isolated"] == 1 and seen["no_bytecode"] is True
    harness = {"pytest", "envelope_ci.api", "envelope_ci.transport.http", "requests"}
    assert not harness & set(seen["modules"])  # a fork would have the harness's modules, and its memory


def test_the_worker_inherits_no_secret(tmp_path, monkeypatch):
    planted = {"EVAL_API_KEY": SECRET, "GITHUB_TOKEN": SECRET + "-gh", "ACTIONS_RUNTIME_TOKEN": SECRET + "-rt",
               "ACTIONS_ID_TOKEN_REQUEST_URL": "https://token.example/" + SECRET, "GITHUB_OUTPUT": "/tmp/out-" + SECRET,
               "GITHUB_ENV": "/tmp/env-" + SECRET, "RUNNER_TEMP": "/tmp/runner-" + SECRET,
               "MY_SERVICE_KEY": SECRET + "-svc",
               "DB_PASSWORD": SECRET + "-db", "A_SECRET_THING": SECRET + "-s", "LC_API_TOKEN": SECRET + "-lc",
               "INPUT_API-KEY": SECRET + "-in", "PYTHONPATH": "/tmp/" + SECRET, "PYTHONSTARTUP": "/tmp/" + SECRET}
    for name, value in planted.items():
        monkeypatch.setenv(name, value)
    source = "import json, os\n\ndef check(answer, case):\n    return json.dumps(dict(os.environ))\n"
    reason = reason_of(grader_suite(tmp_path, source))
    assert SECRET not in reason
    env = json.loads(reason)
    assert all(n.upper().startswith("LC_") for n in set(env) - KEPT - GIVEN), sorted(env)
    assert not set(planted) & set(env)
    assert env["PATH"] == os.environ["PATH"]
    assert env["HOME"] == env["TMPDIR"] != os.environ.get("HOME")
    assert Path(env["HOME"]).parent == Path(tempfile.gettempdir())
    grader_worker.close()  # its home goes with it
    assert not Path(env["HOME"]).exists()


def test_variables_the_settings_name_as_keys_are_hidden_too(tmp_path):
    """A judge's ``api_key_env`` and a header's ``${NAME}`` are secrets whatever they are called (here: locale-like)."""
    config = {"endpoints": {"judge": {"base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key_env": "LC_JUDGE"}},
              "headers": {"X-Extra": "Bearer ${LC_EXTRA}"}}
    source = "import os\n\ndef check(answer, case):\n    return ' '.join(sorted(os.environ))\n"
    suite = grader_suite(tmp_path, source, config=config)
    result = run_cli(["run", suite, "--out", tmp_path / "out"],
                     env={"LC_JUDGE": SECRET + "-judge", "LC_EXTRA": SECRET + "-hdr", "LC_PAPER": "en_GB.UTF-8"})
    report = json.loads((tmp_path / "out" / "report.json").read_text("utf-8"))
    (reason,) = report["cases"][0]["reasons"]
    names = reason.removeprefix("graders/g.py:check: ").split()
    assert "LC_PAPER" in names and "PATH" in names, (names, result.err)
    assert "LC_JUDGE" not in names and "LC_EXTRA" not in names


def test_worker_env_keeps_only_what_python_needs():
    environ = {"PATH": "/usr/bin", "LANG": "C.UTF-8", "LC_ALL": "C", "TZ": "UTC", "HOME": "/home/me", "USER": "me",
               "EVAL_API_KEY": SECRET, "GITHUB_TOKEN": SECRET, "GITHUB_WORKSPACE": "/w", "ACTIONS_CACHE_URL": "u",
               "RUNNER_OS": "Linux", "LC_SECRET": SECRET, "LC_JUDGE": SECRET, "SSH_AUTH_SOCK": "/tmp/agent"}
    env = grader_worker.worker_env(environ, "/tmp/h", {"LC_JUDGE"})
    windows = {"TMP": "/tmp/h", "TEMP": "/tmp/h", "USERPROFILE": "/tmp/h"} if os.name == "nt" else {}
    assert env == {"PATH": "/usr/bin", "LANG": "C.UTF-8", "LC_ALL": "C", "TZ": "UTC", "HOME": "/tmp/h",
                   "TMPDIR": "/tmp/h", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1", **windows}


@pytest.mark.skipif(not LINUX, reason="prctl(PR_SET_DUMPABLE) is Linux's; elsewhere the harness stays dumpable")
def test_the_harness_is_non_dumpable_once_a_worker_starts(tmp_path):
    reason_of(grader_suite(tmp_path, "def check(answer, case):\n    return 'ran'\n"))
    pr_get_dumpable = 3
    assert ctypes.CDLL(None).prctl(pr_get_dumpable, 0, 0, 0, 0) == 0


READ_PARENTS = '''\
import os


def _read(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return "read " + fh.read().decode("utf-8", "replace")
    except OSError as exc:
        return type(exc).__name__


def check(answer, case):
    parent = os.getppid()
    with open(f"/proc/{parent}/status") as fh:
        grandparent = int(next(line for line in fh if line.startswith("PPid:")).split()[1])
    return f"{os.getuid()}|{_read(parent)}|{_read(grandparent)}"
'''


@pytest.mark.skipif(not LINUX, reason="/proc/<pid>/environ is Linux's")
def test_a_grader_cannot_read_the_harness_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("EVAL_API_KEY", SECRET)
    uid, parent, _ = reason_of(grader_suite(tmp_path, READ_PARENTS)).split("|")
    if uid == "0":
        pytest.skip("the worker runs as root here (user nobody cannot start this Python): root reads every process")
    assert parent == "PermissionError" and SECRET not in parent


@pytest.mark.skipif(not LINUX, reason="/proc/<pid>/environ is Linux's")
def test_under_max_run_time_the_supervising_process_is_out_of_reach_too(tmp_path):
    """With --max-run-time the run is a forked child: the worker's grandparent holds the key as well."""
    suite = grader_suite(tmp_path, READ_PARENTS)
    done = run_module(["run", suite, "--out", tmp_path / "out", "--max-run-time", "60"], env={"EVAL_API_KEY": SECRET})
    report = json.loads((tmp_path / "out" / "report.json").read_text("utf-8"))
    (reason,) = report["cases"][0]["reasons"]
    uid, parent, grandparent = reason.removeprefix("graders/g.py:check: ").split("|")
    assert done.code == 1, done.err
    if uid == "0":
        pytest.skip("the worker runs as root here (user nobody cannot start this Python): root reads every process")
    assert (parent, grandparent) == ("PermissionError", "PermissionError")


@pytest.mark.skipif(not ROOT, reason="the harness is not root: the worker keeps its user")
def test_as_root_the_worker_runs_as_nobody(tmp_path):
    if not nobody_can_run_python():
        pytest.skip(f"user nobody cannot start {sys.executable} here (see the next test)")
    source = "import os\n\ndef check(answer, case):\n    return f'{os.getuid()} {os.getgid()} {os.getgroups()}'\n"
    assert reason_of(grader_suite(tmp_path, source)) == "65534 65534 []"


@pytest.mark.skipif(not ROOT, reason="the harness is not root: the worker keeps its user")
def test_as_root_when_nobody_cannot_start_python_it_says_so(tmp_path):
    if nobody_can_run_python():
        pytest.skip("user nobody can start this Python: the worker runs as nobody (the test above)")
    suite = grader_suite(tmp_path, "import os\n\ndef check(answer, case):\n    return str(os.getuid())\n")
    result = run_module(["run", suite, "--out", tmp_path / "out"])  # a process of its own: it warns once a process
    assert result.code == 1, result.err
    assert "envelope-ci: warning: python graders run as root: user nobody (uid 65534) cannot start" in result.err


def test_the_worker_answers_with_reasons_only_whatever_a_grader_prints_or_reads(tmp_path):
    source = ("import sys\n\ndef check(answer, case):\n    print('{\"reasons\": [\"forged\"]}')\n"
              "    sys.stdout.flush()\n    assert sys.stdin.read() == ''\n    return None\n")
    assert graded(grader_suite(tmp_path, source)) == {"g-1": (Label.RIGHT, ())}


def test_several_threads_share_one_worker(tmp_path):
    source = "import os\n\ndef check(answer, case):\n    return f'{os.getpid()} {answer}'\n"
    suite = grader_suite(tmp_path, source)
    grader = load_cases(suite, set())[0].expectations[0].value
    kase = load_cases(suite, set())[0]
    got: list[str] = []

    def work(n: int) -> None:
        for i in range(10):
            got.extend(grader(Answer(text=f"{n}-{i}"), kase))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    said = [g.removeprefix("graders/g.py:check: ").split() for g in got]
    assert len(said) == 80 and len({pid for pid, _ in said}) == 1
    assert sorted(text for _, text in said) == sorted(f"{n}-{i}" for n in range(8) for i in range(10))


# --------------------------------------------------------------------------- the old semantics, from the worker
def test_a_missing_function_is_bad_input_when_first_graded_naming_the_case(tmp_path):
    suite = grader_suite(tmp_path, "def check(answer, case):\n    return None\n", [py_case("g-1", "x", "absent")])
    load_cases(suite, set())  # loading runs nothing, so it cannot know yet
    with pytest.raises(UsageError) as err:
        graded(suite)
    where = (suite / "cases.yaml").as_posix()
    assert str(err.value) == f"{where}:1: graders/g.py: no function 'absent' (from 'graders/g.py:absent')"


@pytest.mark.parametrize(("source", "words"), [
    ("def check(answer, case)\n", "graders/g.py: importing it raised SyntaxError"),
    ("import no_such_module_anywhere\n", "graders/g.py: importing it raised ModuleNotFoundError"),
    ("raise SystemExit(1)\n", "graders/g.py: importing it raised SystemExit"),
    ("check = 3\n", "graders/g.py: no function 'check'"),
], ids=["syntax-error", "import-error", "exit-on-import", "not-callable"])
def test_a_grader_that_cannot_load_is_exit_2_naming_file_and_case(tmp_path, source, words):
    suite = grader_suite(tmp_path, source)
    result = run_cli(["run", suite, "--out", tmp_path / "out"])
    assert result.code == 2 and f"error: {(suite / 'cases.yaml').as_posix()}:1: {words}" in result.err, result.err


def test_a_raise_names_the_grader_its_line_and_the_case(tmp_path):
    source = "def check(answer, case):\n    x = 1\n    raise ValueError(f'cannot grade {answer!r}')\n"
    with pytest.raises(UsageError) as err:
        graded(grader_suite(tmp_path, source, [py_case("g-boom", "boom")]))
    assert str(err.value) == ("graders/g.py:check raised ValueError: cannot grade 'boom' "
                              "(graders/g.py line 3, case g-boom)")


def test_a_grader_that_ends_the_worker_is_bad_input_and_the_next_call_gets_a_new_worker(tmp_path):
    source = "import os\n\ndef check(answer, case):\n    if answer == 'die':\n        os._exit(3)\n    return 'alive'\n"
    suite = grader_suite(tmp_path, source, [py_case("g-die", "die"), py_case("g-live", "live")])
    cases = {c.id: c for c in load_cases(suite, set())}
    ended = r"^graders/g.py:check ended the grader process \(exit code 3\) while grading case g-die$"
    with pytest.raises(UsageError, match=ended):
        grade_all([cases["g-die"]], {"g-die": [Envelope(completion="die")]})
    again = grade_all([cases["g-live"]], {"g-live": [Envelope(completion="live")]})
    assert again["g-live"][0].reasons == ("graders/g.py:check: alive",)


# --------------------------------------------------------------------------- no grader code when it need not run
MARKED = "from pathlib import Path\nPath({marker!r}).write_text('ran')\n\ndef check(answer, case):\n    return None\n"


def marked_suite(shared: Path, cases: list[dict] | None = None) -> tuple[Path, Path]:
    """A suite whose grader leaves a marker file when its module runs (in ``shared``: the worker may be nobody)."""
    marker = shared / "marker"
    return grader_suite(shared, MARKED.format(marker=str(marker)), cases), marker


def test_hash_runs_no_grader_code(shared_tmp):
    suite, marker = marked_suite(shared_tmp)
    result = run_cli(["hash", suite])
    assert result.code == 0, result.err
    assert not marker.exists()


def test_import_runs_no_grader_code(tmp_path, shared_tmp):
    from tests.support.fake_openai import Behaviour, FakeOpenAI

    plain = {"id": "g-1", "prompt": "Money back? [[g-1]]"}
    suite, marker = marked_suite(shared_tmp, [plain])
    with FakeOpenAI() as srv:
        srv.plant("g-1", Behaviour.ok("A refund is on its way."))
        recorded = run_cli(["run", suite, "--out", tmp_path / "live", "--base-url", srv.url, "--model", "m",
                            "--record", tmp_path / "rec.jsonl"])
    assert recorded.code in (0, 1), recorded.err
    assert not marker.exists()
    graded_too = {**plain, "assert": [{"type": "python", "value": "graders/g.py:check"}]}
    suite = grader_suite(shared_tmp, MARKED.format(marker=str(marker)), [graded_too])
    result = run_cli(["import", tmp_path / "rec.jsonl", "--into", suite])
    assert result.code == 0, result.err
    assert not marker.exists()


def test_a_filter_that_leaves_the_case_out_runs_no_grader_code(tmp_path, shared_tmp):
    plain = {"id": "plain-1", "prompt": "Hi", "completion": "hi", "expect_fragment": "hi"}
    suite, marker = marked_suite(shared_tmp, [py_case("g-1", "x"), plain])
    result = run_cli(["run", suite, "--out", tmp_path / "out", "--filter", "plain-*"])
    assert result.code != 2 and "error" not in result.err, result.err
    assert not marker.exists()
    run_cli(["run", suite, "--out", tmp_path / "out2", "--filter", "g-*"])
    assert marker.read_text() == "ran"  # the control: selected, it runs


# --------------------------------------------------------------------------- bounded by --max-run-time
@pytest.mark.skipif(not hasattr(os, "fork"), reason="--max-run-time supervises a forked child")
def test_a_grader_that_hangs_is_ended_with_the_run_at_max_run_time(tmp_path, shared_tmp):
    pid_file = shared_tmp / "pid"
    source = (f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n\n"
              "def check(answer, case):\n    while True:\n        time.sleep(0.05)\n")
    suite = grader_suite(tmp_path, source)
    started = time.monotonic()
    done = run_module(["run", suite, "--out", tmp_path / "out", "--max-run-time", "2"])
    assert done.code == 3, done.err
    assert time.monotonic() - started < 30
    assert "while grading case g-1" in done.err
    pid = int(pid_file.read_text())
    for _ in range(50):  # killed with the run's process group (a zombie until its new parent reaps it)
        if not _alive(pid):
            break
        time.sleep(0.1)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it runs as nobody: it exists
        pass
    status = Path(f"/proc/{pid}/status")
    return not (status.is_file() and "\nState:\tZ" in status.read_text())
