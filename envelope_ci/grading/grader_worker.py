"""Where ``python`` graders run: a fresh interpreter that compiles them from their source and holds no secret.

The harness holds the endpoint key, the GitHub token and the runner's variables; a grader is
code from the pull request. So a grader never runs in the harness. It runs in one worker per
run (started at the first answer a python grader grades, reused, closed when the run ends):

- a new interpreter (``sys.executable -I -B``, never a fork: a fork would copy the harness's
  memory, secrets and all), with an environment of its own: ``PATH``, the locale variables,
  ``TZ`` and a temporary ``HOME``/``TMPDIR``, and nothing named like a secret (``*KEY*``,
  ``*TOKEN*``, ``*SECRET*``, ``GITHUB_*``, ``ACTIONS_*``, ``RUNNER_*``, …) nor any variable
  the settings name as holding one (``hide``);
- as user ``nobody`` when the harness runs as root (the Action's container), when that user
  can start this Python; otherwise as the harness's user, with a warning;
- with the harness made non-dumpable first (Linux, ``no_dumps``), so a worker of the same
  user cannot read ``/proc/<harness>/environ`` or its memory, nor attach a debugger to it;
- from the source bytes the fixtures hash digests, sent over the pipe with their digest and
  compiled there: no ``__pycache__`` is read (an unchecked-hash ``.pyc`` beside a grader has
  no effect) and none is written.

The worker answers with reasons only: one JSON line in (``Request``) and one out (``Reply``)
per answer, on its stdin and stdout (a grader's ``print`` goes to stderr). Calls from several
threads (a live run grades as answers arrive) take turns. A grader that hangs holds the run:
``--max-run-time`` kills the run's process group, the worker with it.
"""
from __future__ import annotations

import atexit
import contextlib
import ctypes
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import msgspec

from ..model import Data

# Variables a worker may inherit (by name), unless they look like a secret: what Python and the C library need.
_KEPT = re.compile(r"PATH|LANG|LANGUAGE|LC_[A-Z_]+|TZ|SYSTEMROOT|SYSTEMDRIVE|WINDIR|COMSPEC|PATHEXT", re.IGNORECASE)
# Never passed on, whatever the name above: the CI's own variables, and anything named like a secret.
_SECRET = re.compile(r"^(GITHUB|ACTIONS|RUNNER|INPUT)_|KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH", re.IGNORECASE)
_PR_SET_DUMPABLE = 4  # <linux/prctl.h>
_NOBODY = 65534  # nobody's uid and gid when the user database does not say

# The worker's first lines: find this very envelope_ci (an installed one is on sys.path already; a checkout is put
# first), and say why in one JSON line when it cannot (user nobody may not read the checkout).
_BOOT = """\
import sys
if sys.argv[1] not in sys.path:
    sys.path.insert(0, sys.argv[1])
try:
    from envelope_ci.grading.grader_worker import serve
except BaseException as exc:
    import json
    why = f"cannot import envelope_ci from {sys.argv[1]}: {type(exc).__name__}: {exc}"
    print(json.dumps({"problem": why}), flush=True)
    raise SystemExit(1) from None
serve()
"""


class Request(Data, frozen=True):
    """One answer to grade: the grader (as named, its file, its source's digest), the answer, the case."""

    ref: str  # graders/refund.py:check
    path: str  # the file, resolved: the grader's __file__ and the file name in its tracebacks
    digest: str  # of the source: the digest the fixtures hash holds
    function: str
    text: str
    case: dict[str, Any]  # what a grader sees of the case and the envelope (python_grader.case_view)
    source: bytes | None = None  # the file's bytes: sent with the first request for a digest, None after


class Reply(Data, frozen=True):
    """The grader's reasons (none: it passed), or why it could not grade (bad input: exit 2)."""

    reasons: tuple[str, ...] = ()
    problem: str | None = None
    loading: bool = False  # the problem is the grader's file or function (it would be the same for any answer)


class Hello(Data, frozen=True):
    """The worker's first line: it is ready, as which user; or why it could not start."""

    uid: int = -1  # os.getuid(), where there is one
    problem: str | None = None


_encode = msgspec.json.Encoder().encode


# --------------------------------------------------------------------------- the harness's side
class _Unstarted(Exception):
    """The worker could not start (as this user): why."""


def worker_env(environ: Mapping[str, str], home: str, hidden: Iterable[str] = ()) -> dict[str, str]:
    """The worker's environment: the few variables Python needs from ``environ`` (none that could hold a secret, none
    ``hidden``), and ``home`` as its HOME and temporary folder."""
    hidden = {name.upper() for name in hidden}
    env = {k: v for k, v in environ.items() if _KEPT.fullmatch(k) and not _SECRET.search(k) and k.upper() not in hidden}
    env.update(HOME=home, TMPDIR=home, PYTHONDONTWRITEBYTECODE="1", PYTHONNOUSERSITE="1")
    if os.name == "nt":
        env.update(TMP=home, TEMP=home, USERPROFILE=home)
    return env


_dumps_off = False


def no_dumps() -> None:
    """Linux: make this process non-dumpable (``prctl(PR_SET_DUMPABLE, 0)``), once: its ``/proc/<pid>/environ``,
    ``mem`` and the like become root's, and no process of the same user may ptrace it. Elsewhere: nothing."""
    global _dumps_off
    if _dumps_off or not sys.platform.startswith("linux"):
        return
    _dumps_off = True
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


def _unprivileged() -> tuple[int, int] | None:
    """``nobody``'s (uid, gid) when this process runs as root; None otherwise (the worker keeps this user)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return None
    try:
        import pwd

        found = pwd.getpwnam("nobody")
        return found.pw_uid, found.pw_gid
    except (ImportError, KeyError):
        return _NOBODY, _NOBODY


class _Worker:
    """The harness's handle on its worker: started lazily, restarted after a crash, one call at a time."""

    warned = False  # that the worker could not drop root

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.proc: subprocess.Popen[bytes] | None = None
        self.home: str | None = None
        self.uid: int | None = None  # the worker's user, as it said
        self.sent: set[tuple[str, str]] = set()  # (path, digest) of the sources the worker has
        self.hidden: set[str] = set()

    def grade(self, request: Request) -> Reply:
        with self.lock:
            proc = self.proc if self.proc is not None else self._start()
            assert proc.stdin is not None and proc.stdout is not None
            key = (request.path, request.digest)
            if key in self.sent:
                request = msgspec.structs.replace(request, source=None)
            try:
                proc.stdin.write(_encoded(request) + b"\n")
                proc.stdin.flush()
                line = proc.stdout.readline()
            except OSError:
                line = b""
            if not line:  # the grader ended the process (os._exit, a crash, a kill): a new worker for the next call
                code = self._stop()
                return Reply(problem=f"{request.ref} ended the grader process (exit code {code}) while grading case "
                                     f"{request.case.get('id')}")
            try:
                reply = msgspec.json.decode(line, type=Reply)
            except msgspec.DecodeError:  # something wrote into the replies: this worker is not to be trusted again
                self._stop()
                return Reply(problem=f"{request.ref} wrote into the grader worker's replies while grading case "
                                     f"{request.case.get('id')}")
            self.sent.add(key)
            return reply

    def _start(self) -> subprocess.Popen[bytes]:
        no_dumps()  # before any worker exists
        self.home = tempfile.mkdtemp(prefix="envelope-ci-grader-")
        env = worker_env(os.environ, self.home, self.hidden)
        user = _unprivileged()
        if user is not None:
            try:
                os.chown(self.home, *user)
                return self._spawn(env, user)
            except (OSError, _Unstarted) as exc:
                os.chown(self.home, os.getuid(), os.getgid())
                if not _Worker.warned:  # once a process: a run, or a test session
                    _Worker.warned = True
                    print(f"envelope-ci: warning: python graders run as root: user nobody (uid {user[0]}) cannot "
                          f"start {sys.executable} ({exc}); see SECURITY.md", file=sys.stderr)
        try:
            return self._spawn(env, None)
        except _Unstarted as exc:
            self._stop()
            raise RuntimeError(f"the python grader worker could not start: {exc}") from None

    def _spawn(self, env: dict[str, str], user: tuple[int, int] | None) -> subprocess.Popen[bytes]:
        """Start the worker (as ``user``) and wait for its hello; ``_Unstarted`` says why it did not say it."""
        root = str(Path(__file__).resolve().parents[2])  # the folder holding this envelope_ci
        as_user: dict[str, Any] = {} if user is None else {"user": user[0], "group": user[1], "extra_groups": []}
        try:
            proc = subprocess.Popen([sys.executable, "-I", "-B", "-c", _BOOT, root], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, env=env, close_fds=True, **as_user)
        except OSError as exc:
            raise _Unstarted(f"{type(exc).__name__}: {exc.strerror or exc}") from None
        assert proc.stdout is not None
        line = proc.stdout.readline()
        try:
            hello = msgspec.json.decode(line, type=Hello)
        except msgspec.DecodeError:
            hello = Hello(problem=f"it ended with exit code {_ended(proc)}")
        if hello.problem is not None:
            _ended(proc)
            raise _Unstarted(hello.problem)
        self.proc, self.uid = proc, hello.uid
        return proc

    def _stop(self) -> int | None:
        """End the worker (it leaves when its stdin closes) and remove its home; its exit code."""
        proc, self.proc = self.proc, None
        self.sent.clear()
        code = None
        if proc is not None:
            code = _ended(proc)
        if self.home is not None:
            shutil.rmtree(self.home, ignore_errors=True)
            self.home = None
        return code

    def close(self) -> None:
        if self.lock.acquire(timeout=5):
            try:
                self._stop()
            finally:
                self.lock.release()
        elif self.proc is not None:  # a call still waits on a grader that hangs: end it, so the run can end
            self.proc.kill()


def _ended(proc: subprocess.Popen[bytes]) -> int | None:
    """Close the worker's stdin, give it a moment to leave, kill it otherwise; its exit code."""
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
    try:
        return proc.wait(timeout=2)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def _encoded(request: Request) -> bytes:
    """The request as one JSON line; a lone surrogate (JSON cannot carry one) becomes U+FFFD."""
    try:
        return _encode(request)
    except UnicodeEncodeError:
        return _encode(msgspec.convert(_no_surrogates(msgspec.to_builtins(request)), Request))


def _no_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, dict):
        return {_no_surrogates(k): _no_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_no_surrogates(v) for v in value]
    return value


_worker = _Worker()


def _forked() -> None:
    """In a forked child: the parent's worker is the parent's (its pipes closed here); a new one when needed."""
    global _worker
    old, _worker = _worker, _Worker()
    _worker.hidden = set(old.hidden)
    for stream in (old.proc.stdin, old.proc.stdout) if old.proc is not None else ():
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)
atexit.register(lambda: _worker.close())


def grade(request: Request) -> Reply:
    """Grade one answer in the worker (started now if need be)."""
    return _worker.grade(request)


def close() -> None:
    """End the worker, if there is one: at the end of a run (the next grade starts a new one)."""
    _worker.close()


def hide(names: Iterable[str], templates: Iterable[str] = ()) -> None:
    """Variables the worker must not inherit, whatever their names: those the settings name as holding a key
    (``api_key_env``), and the ``${NAME}``s of header ``templates``."""
    _worker.hidden.update(names)
    _worker.hidden.update(name for text in templates for name in re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", text))


# --------------------------------------------------------------------------- the worker's side
def serve() -> None:
    """The worker's life: one request in and one reply out per line, until its stdin closes."""
    sys.dont_write_bytecode = True
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the harness's to answer: it closes our stdin
    requests = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # a grader reads nothing of the requests
    os.close(null)
    os.dup2(2, 1)  # and what it prints goes to stderr, never among the replies
    sys.stdin, sys.stdout = open(os.devnull), sys.stderr
    _leave_with(os.getppid())
    replies.write(_encode(Hello(uid=os.getuid() if hasattr(os, "getuid") else -1)) + b"\n")
    replies.flush()
    graders = _Graders()
    for line in requests:
        try:
            reply = graders.grade(msgspec.json.decode(line, type=Request))
        except BaseException as exc:  # a grader's __str__ that raises, a KeyboardInterrupt it raised, ...
            reply = Reply(problem=f"the grader worker failed: {type(exc).__name__}")
        replies.write(_encode(reply) + b"\n")
        replies.flush()


def _leave_with(parent: int) -> None:
    """Exit when the harness has gone, even inside a grader that never returns (the harness killed outright)."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="harness-watch", daemon=True).start()


class _Graders:
    """The grader modules this worker has compiled, by (path, digest): the module, or why it failed to load."""

    def __init__(self) -> None:
        self.modules: dict[tuple[str, str], ModuleType | str] = {}

    def grade(self, r: Request) -> Reply:
        file = r.ref.rpartition(":")[0]
        key = (r.path, r.digest)
        if key not in self.modules:
            if r.source is None or "sha256:" + hashlib.sha256(r.source).hexdigest() != r.digest:
                return Reply(problem=f"{file}: its source did not reach the grader worker whole", loading=True)
            self.modules[key] = _compiled(file, r.path, r.source)
        module = self.modules[key]
        if isinstance(module, str):
            return Reply(problem=module, loading=True)
        fn = getattr(module, r.function, None)
        if not callable(fn):
            return Reply(problem=f"{file}: no function {r.function!r} (from {r.ref!r})", loading=True)
        case_id = r.case.get("id")  # before the grader may change its copy
        try:
            verdict = fn(r.text, r.case)
        except (Exception, SystemExit) as exc:
            where = _where(file, r.path, exc)
            return Reply(problem=f"{r.ref} raised {type(exc).__name__}: {exc} ({where}case {case_id})")
        if verdict is None:
            return Reply()
        if isinstance(verdict, str) and verdict.strip():
            return Reply(reasons=(f"{r.ref}: {verdict}",))
        return Reply(problem=f"{r.ref} returned {verdict!r} for case {case_id}: "
                             "a grader returns None (pass) or a reason string (fail)")


def _compiled(file: str, path: str, source: bytes) -> ModuleType | str:
    """The grader's module, compiled from ``source`` (never a .pyc) under a name of its own (two graders.py never
    clash), or why it failed."""
    name = "envelope_ci_grader_" + hashlib.sha256(path.encode()).hexdigest()[:16]
    module = ModuleType(name)
    module.__file__ = path
    sys.modules[name] = module  # dataclasses and pickling inside the grader look themselves up here
    try:
        exec(compile(source, path, "exec", dont_inherit=True), module.__dict__)
    except (Exception, SystemExit) as exc:
        del sys.modules[name]
        return f"{file}: importing it raised {type(exc).__name__}: {exc}"
    return module


def _where(file: str, path: str, exc: BaseException) -> str:
    """The grader's own line that raised, when the traceback passes through its file."""
    frames = traceback.StackSummary.extract(traceback.walk_tb(exc.__traceback__), lookup_lines=False)
    lines = [f.lineno for f in frames if f.filename == path]
    return f"{file} line {lines[-1]}, " if lines else ""


if __name__ == "__main__":
    serve()
