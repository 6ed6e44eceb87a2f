"""The pins file's history on one branch, read with git: the pins and the cases' strata at each first-parent commit
that changed the pins.

git runs here and nowhere else for ``envelope-ci history``: a list argv (never a shell), a timeout, a ref
checked before use, and output that no commit message can confuse (``-z`` records, blob sizes from
``cat-file --batch``). The fixtures at each commit are read as data by the parsers a run uses; nothing in
them is run, and no grader is imported.
"""
from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..errors import UsageError
from ..model import RECORDED_SUFFIX, STRATA, Pins
from .files import is_hidden, is_read
from .parse import RawCase, parse_json, parse_jsonl, parse_yaml
from .pins import parse_pins

GIT_TIMEOUT_S = 60
# No prompt for a password, messages git's own way, and paths taken as written (a folder named `:(glob)*` is a name).
# No transport at all (GIT_ALLOW_PROTOCOL, empty: no config can allow one back, as protocol.<name>.allow could).
_GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "GIT_LITERAL_PATHSPECS": "1", "GIT_OPTIONAL_LOCKS": "0",
            "GIT_ALLOW_PROTOCOL": ""}
# What git keeps of the environment: where programs and the user's own git config are, and the locale; no key,
# token or GIT_* variable reaches it.
_KEPT_ENV = re.compile(r"PATH|HOME|TZ|LANG|LANGUAGE|LC_[A-Z]+|SYSTEMROOT|TMPDIR|XDG_CONFIG_HOME")
# Nothing fetched (a promisor remote's lazy fetch would run its config's ssh command), no fsmonitor hook, no
# repository taken from a folder that only looks like one, and no signature checked (a user's log.showSignature
# would put gpg's words into the log records, and run its gpg.program).
_LOCKED_DOWN = ("-c", "protocol.allow=never", "-c", "core.fsmonitor=false", "-c", "safe.bareRepository=explicit",
                "-c", "log.showSignature=false")
# A merge commit GitHub writes, and a squash merge's title: the PR number a point is known by.
_MERGE_PR = re.compile(r"^Merge pull request #([0-9]{1,9}) ")
_SQUASH_PR = re.compile(r"\(#([0-9]{1,9})\)\s*$")
_ISO_DATE = r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:Z|[+-][0-9]{2}:[0-9]{2})"
_LOG_RECORD = re.compile(rf"([0-9a-f]{{40}}|[0-9a-f]{{64}}) ({_ISO_DATE}) (.*)", re.S)
_TREE_ENTRY = re.compile(rb"(100644|100755) blob ([0-9a-f]{40}|[0-9a-f]{64})\t(.*)", re.S)
_SHORT = 12


@dataclass(frozen=True)
class Snapshot:
    """The pins at one commit, and the stratum each case had in the fixtures there (None: no stratum, or no case)."""

    commit: str
    date: str  # the committer date, ISO 8601
    subject: str  # untrusted text: escape it wherever it is shown
    pr: int | None
    pins: Pins
    strata: Mapping[str, str | None]


@dataclass(frozen=True)
class PinsHistory:
    """What ``git log`` found for the pins file, oldest first, and what a reader should know about it."""

    ref: str
    commit: str  # what the ref named when it was read
    pins: str  # the pins file's path in the repository
    fixtures: str  # the fixtures directory's path in the repository ("." at its top)
    last: int
    shallow: bool
    snapshots: tuple[Snapshot, ...]
    notes: tuple[str, ...]


def pr_number(subject: str) -> int | None:
    """The pull request a commit's subject names: GitHub's merge commit, or a squash merge's ``(#N)`` title."""
    match = _MERGE_PR.match(subject) or _SQUASH_PR.search(subject)
    return int(match.group(1)) if match else None


class Git:
    """git in one repository, called with a list argv and a timeout; a failure to start or finish is bad usage.

    Shared by ``envelope-ci history``, report.html's pinned answers (``report.pinned_answers``) and the Action's
    base pins: one place that says how git is run. The folders it runs in are pull-request content, so git
    is pointed at the repository (``--git-dir``, ``--work-tree``: the nearest ``.git`` above, which no
    commit can hold) and never left to search: a fixtures folder laid out as a repository (``HEAD``,
    ``config``, ``objects/``, ``refs/`` committed as plain files) would otherwise be the one git reads,
    and its config obeyed. It may fetch nothing (``GIT_ALLOW_PROTOCOL`` empty), and no key or token is in its
    environment (``git_environment``).
    """

    def __init__(self, directory: Path, timeout: float = GIT_TIMEOUT_S) -> None:
        # Named, not found, the repository needs no safe.directory either: git checks the ownership of a repository
        # it searched for, so the Action's root reads the runner's checkout as it is.
        self.top = repository_top(directory)
        where = ["--git-dir", str(self.top / ".git"), "--work-tree", str(self.top)] if self.top else []
        self.argv = ["git", *_LOCKED_DOWN, *where, "-C", str(directory)]
        self.timeout = timeout

    def run(self, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        """One git command; its exit status is the caller's to read (128, running nothing, outside a repository)."""
        if self.top is None:
            return subprocess.CompletedProcess(self.argv, 128, b"", b"not a git repository (no .git above)")
        try:
            return subprocess.run([*self.argv, *args], input=b"" if stdin is None else stdin, capture_output=True,
                                  timeout=self.timeout, check=False, env=git_environment(os.environ))
        except FileNotFoundError:
            raise UsageError("git is not installed: history reads the pins file's commits with git") from None
        except OSError as exc:
            raise UsageError(f"git could not start: {exc.strerror or exc}") from None
        except subprocess.TimeoutExpired:
            raise UsageError(f"git {args[0]} took longer than {self.timeout:g} s") from None

    def text(self, *args: str) -> str | None:
        """A command's output as stripped text, or None when it failed."""
        proc = self.run(*args)
        return proc.stdout.decode("utf-8", "replace").strip() if proc.returncode == 0 else None

    def blobs(self, objects: Iterable[str]) -> dict[str, bytes]:
        """Each object's bytes (a blob id, or ``COMMIT:PATH``), from one ``cat-file --batch``: its sizes, not a
        separator, tell where each ends; one git names no blob is left out."""
        wanted = sorted(set(objects))
        if not wanted:
            return {}
        proc = self.run("cat-file", "--batch", stdin="".join(f"{name}\n" for name in wanted).encode())
        if proc.returncode != 0:
            raise UsageError(f"git cat-file failed: {_said(proc)}")
        out, blobs, at = proc.stdout, {}, 0
        for name in wanted:
            end = out.find(b"\n", at)
            if end < 0:
                break
            header = out[at:end].split()
            at = end + 1
            if len(header) == 3 and header[1] == b"blob":
                size = int(header[2])
                blobs[name] = out[at:at + size]
                at += size + 1
        return blobs


def repository_top(directory: Path) -> Path | None:
    """The nearest folder at or above ``directory`` that holds ``.git`` (a folder, or a worktree's file); None
    outside any repository."""
    here = directory.resolve()
    return next((folder for folder in (here, *here.parents) if (folder / ".git").exists()), None)


def git_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment git runs in: ``environ``'s few harmless variables (``_KEPT_ENV``) and ``_GIT_ENV``."""
    return {**{k: v for k, v in environ.items() if _KEPT_ENV.fullmatch(k)}, **_GIT_ENV}


def read_history(fixtures: Path, pins: Path, ref: str, last: int) -> PinsHistory:
    """The last ``last`` commits on ``ref``'s first-parent line that changed the pins file, oldest first."""
    top, git = _repository(fixtures)
    pins_rel, fixtures_rel = _inside(pins, top), _inside(fixtures, top)
    commit = _commit_of(git, ref)
    shallow = git.text("rev-parse", "--is-shallow-repository") == "true"
    listed = _commits(git, commit, pins_rel, last)
    trees = {sha: _tree(git, sha, fixtures_rel, pins_rel) for sha, _, _ in listed}
    blobs = git.blobs({oid for tree in trees.values() for oid in tree.values()})
    reader = _Reader(blobs)
    snapshots = [snap for sha, date, subject in reversed(listed)
                 if (snap := reader.snapshot(sha, date, subject, trees[sha], pins_rel)) is not None]
    notes = [*reader.notes, *_history_notes(len(snapshots), len(listed), last, shallow, ref, pins_rel)]
    return PinsHistory(ref, commit, pins_rel, fixtures_rel or ".", last, shallow, tuple(snapshots), tuple(notes))


def _repository(fixtures: Path) -> tuple[Path, Git]:
    """The top of the repository that holds the fixtures, and git there."""
    start = fixtures if fixtures.is_dir() else Path.cwd()
    top = Git(start).text("rev-parse", "--show-toplevel")
    if not top:
        raise UsageError(f"{fixtures.as_posix()}: not inside a git repository (history reads the pins file's "
                         "commits with git log)")
    return Path(top).resolve(), Git(Path(top))


def _inside(path: Path, top: Path) -> str:
    """``path`` as git names it in the repository at ``top`` ("" for the top itself)."""
    try:
        rel = path.resolve().relative_to(top)
    except ValueError:
        raise UsageError(f"{path.as_posix()} is outside the git repository at {top.as_posix()}") from None
    return "" if rel == Path() else rel.as_posix()


def _commit_of(git: Git, ref: str) -> str:
    """The commit ``ref`` names; a ref that could be read as an option, or names no commit, is bad usage."""
    if not ref or ref.startswith("-") or not ref.isprintable():
        raise UsageError(f"--ref {ref!r} is not a branch, tag or commit")
    commit = git.text("rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}")
    if not commit:
        raise UsageError(f"{ref!r} names no commit in this repository: a branch that was not fetched? (git fetch "
                         "origin; in the Action, actions/checkout with fetch-depth: 0)")
    return commit


def _commits(git: Git, commit: str, pins_rel: str, last: int) -> list[tuple[str, str, str]]:
    """(commit, committer date, subject) of each first-parent commit that changed the pins, newest first."""
    proc = git.run("log", "--first-parent", "-z", "--format=%H %cI %s", f"--max-count={last}", commit, "--",
                   pins_rel)
    if proc.returncode != 0:
        raise UsageError(f"git log failed: {_said(proc)}")
    records = (_LOG_RECORD.fullmatch(r) for r in proc.stdout.decode("utf-8", "replace").split("\0") if r)
    return [(m.group(1), m.group(2), m.group(3)) for m in records if m]


def _tree(git: Git, commit: str, fixtures_rel: str, pins_rel: str) -> dict[str, str]:
    """Path → blob id of the pins and of every file that holds cases under the fixtures directory, at ``commit``."""
    proc = git.run("ls-tree", "-r", "-z", "--full-tree", commit, "--", fixtures_rel or ".", pins_rel)
    if proc.returncode != 0:
        raise UsageError(f"git ls-tree {commit[:_SHORT]} failed: {_said(proc)}")
    entries = (_TREE_ENTRY.fullmatch(e) for e in proc.stdout.split(b"\0") if e)
    found = {m.group(3).decode("utf-8", "surrogateescape"): m.group(2).decode() for m in entries if m}
    return {path: oid for path, oid in found.items() if path == pins_rel or _holds_cases(path, fixtures_rel)}


def _holds_cases(path: str, fixtures_rel: str) -> bool:
    """Whether a run would read cases from this file (``files.case_files``), by its path alone."""
    if fixtures_rel and not PurePosixPath(path).is_relative_to(fixtures_rel):
        return False
    rel = PurePosixPath(path).relative_to(fixtures_rel) if fixtures_rel else PurePosixPath(path)
    return not is_hidden(Path(rel)) and is_read(rel.name) and not rel.name.endswith(RECORDED_SUFFIX)


class _Reader:
    """Parses each blob once (most files are the same at many commits) and keeps what it could not read."""

    def __init__(self, blobs: Mapping[str, bytes]) -> None:
        self.blobs = blobs
        self.strata: dict[str, dict[str, str | None]] = {}
        self.pins: dict[str, Pins | None] = {}
        self.notes: list[str] = []

    def snapshot(self, sha: str, date: str, subject: str, tree: Mapping[str, str], pins_rel: str) -> Snapshot | None:
        """The pins and strata at one commit, or None (with a note) when its pins cannot be read."""
        oid = tree.get(pins_rel)
        pins = self._pins(f"{sha[:_SHORT]}:{pins_rel}", oid) if oid else None
        if oid is None:
            self.notes.append(f"{sha[:_SHORT]} removed {pins_rel}: no point there")
        if pins is None:
            return None
        written: dict[str, str | None] = {}
        for path, blob in sorted(tree.items()):
            if path != pins_rel:
                written.update(self._strata(sha, path, blob))
        return Snapshot(sha, date, subject, pr_number(subject), pins, _pinned_strata(pins, written))

    def _pins(self, shown: str, oid: str) -> Pins | None:
        if oid not in self.pins:
            try:
                self.pins[oid] = parse_pins(self._text(oid, shown), shown)
            except UsageError as exc:
                self.pins[oid] = None
                self.notes.append(f"{shown} could not be read, no point there: {exc.problems[0]}")
        return self.pins[oid]

    def _strata(self, sha: str, path: str, oid: str) -> dict[str, str | None]:
        if oid not in self.strata:
            shown = f"{sha[:_SHORT]}:{path}"
            try:
                raws = parser_of(path)(self._text(oid, shown), shown)
            except UsageError as exc:
                raws = []
                self.notes.append(f"{shown} could not be read, its cases count as unstratified: {exc.problems[0]}")
            self.strata[oid] = {raw.data["id"]: _stratum(raw.data.get("stratum")) for raw in raws
                                if isinstance(raw.data, dict) and isinstance(raw.data.get("id"), str)}
        return self.strata[oid]

    def _text(self, oid: str, shown: str) -> str:
        try:
            return self.blobs.get(oid, b"").decode("utf-8-sig")
        except UnicodeDecodeError:
            raise UsageError(f"{shown}: not UTF-8 text") from None


def _said(proc: subprocess.CompletedProcess[bytes]) -> str:
    """What a failed git command said, on one line and short."""
    return " ".join(proc.stderr.decode("utf-8", "replace").split())[:300] or f"exit {proc.returncode}"


def parser_of(path: str) -> Callable[[str, str], list[RawCase]]:
    """The parser a run would read this file with, by its suffix (``parse.parse_file``)."""
    suffix = PurePosixPath(path).suffix
    return parse_jsonl if suffix == ".jsonl" else parse_json if suffix == ".json" else parse_yaml


def _pinned_strata(pins: Pins, written: Mapping[str, str | None]) -> dict[str, str | None]:
    """Each pinned case's stratum; a vars matrix's case (``id[var=value]``) has the stratum of the case as written."""
    return {cid: written.get(cid, written.get(cid[:cid.rfind("[")]) if cid.endswith("]") else None)
            for cid in pins.cases}


def _stratum(value: object) -> str | None:
    """A case's stratum as the report names it; anything else (none, or a value the schema refuses) is None."""
    return value if isinstance(value, str) and value in STRATA else None


def _history_notes(found: int, listed: int, last: int, shallow: bool, ref: str, pins_rel: str) -> list[str]:
    """Why the history is shorter than asked: a shallow clone (then fetch more), or no change of the pins at all."""
    if shallow and listed < last:
        points = f"{found} point" + ("" if found == 1 else "s")
        return [f"the clone is shallow: {points} found; fetch with fetch-depth: 0 for the full history"]
    if listed == 0:
        return [f"no commit on {ref} changed {pins_rel}"]
    return []
