"""The answers the pins were made from: the pins keep digests, never answer text, so the text is read from the
suite's recorded answers (``FILE.recorded.jsonl``) as git holds them at the last commit that changed the pins file.

The one place a report reads git, and only when a format asks (report.html): plumbing commands, each with a
timeout. Nothing of the fixtures is run; a recording is read as data. When git cannot tell (no git, no repository,
a shallow clone, pins not committed or changed since), no answer is known and ``unknown`` says why.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from ..canonical import digest
from ..errors import UsageError
from ..grading.envelope import classify, spoken_text
from ..model import RECORDED_SUFFIX, Pin
from ..sources.history import Git, parser_of
from ..sources.parse import NotJSON, loads_strict, numbered_lines
from ..sources.recordings import envelope_from_raw
from .build import PREVIEW_CHARS
from .model import Report

GIT_TIMEOUT_S = 10.0
GitIn = Callable[[Path], Git]  # a git runner for one folder


@dataclass(frozen=True)
class PinnedAnswers:
    """Each pinned case's answer when it was pinned (cut as a row's preview is), and the commit it was read at."""

    texts: Mapping[str, str] = field(default_factory=dict)
    commit: str | None = None
    unknown: str | None = None  # why no answer could be read at all
    why: Mapping[str, str] = field(default_factory=dict)  # why one case's answer is not shown, when git told


class _Unknown(Exception):
    """Git cannot say which answers the pins were made from; the message says why, for the reader."""


def read_pinned_answers(report: Report) -> PinnedAnswers:
    """The pinned cases' answers as recorded beside their fixture files at the pins' commit."""
    git_in: GitIn = partial(Git, timeout=GIT_TIMEOUT_S)
    try:
        commit = pins_commit(Path(report.run.pins), git_in)
    except _Unknown as why:
        return PinnedAnswers(unknown=str(why))
    pins = {c.id: c.pin for c in report.cases if c.pin is not None}
    texts: dict[str, str] = {}
    reasons: dict[str, str] = {}
    for file in dict.fromkeys(c.file for c in report.cases if c.pin is not None):
        for cid, text, reason in _file_answers(Path(file), commit, pins, git_in):
            if text is not None:
                texts[cid] = text
            elif reason is not None:
                reasons[cid] = reason
    return PinnedAnswers(texts, commit, why=reasons)


def pins_commit(pins: Path, git_in: GitIn) -> str:
    """The last commit that changed the pins file, when the file is as that commit holds it."""
    if not pins.is_file():
        raise _Unknown(f"the pins file is not here ({pins.as_posix()}): no pins yet, or the repository is not checked "
                       "out where the report was written")
    commit = _text(git_in(pins.parent), "log", "-1", "--no-show-signature", "--format=%H", "--", pins.name)
    if commit is None:
        raise _Unknown("git could not read the pins file's history here (no git, or not a repository)")
    if not commit:
        raise _Unknown("the pins file is not committed")
    if commit in _shallow_boundary(pins.parent, git_in):
        raise _Unknown("the clone is shallow and stops before the pins' commit (clone with fetch-depth: 0)")
    if _blobs(git_in(pins.parent), commit, pins.name).get(pins.name) != pins.read_bytes():
        raise _Unknown(f"the pins file differs from its last commit ({commit[:12]}): pins not committed yet")
    return commit


def _shallow_boundary(folder: Path, git_in: GitIn) -> set[str]:
    """The commits a shallow clone stops at: git shows each as if it added every file, the pins too."""
    where = _text(git_in(folder), "rev-parse", "--git-path", "shallow")
    path = folder / where if where else None
    return set(path.read_text("ascii", "replace").split()) if path is not None and path.is_file() else set()


def _text(git: Git, *args: str) -> str | None:
    """A git command's stripped output (``sources.history.Git``, with this module's shorter timeout), or None when
    it fails, is missing or outlasts its timeout: the answers are only shown."""
    try:
        return git.text(*args)
    except UsageError:
        return None


def _blobs(git: Git, commit: str, *names: str) -> dict[str, bytes]:
    """The files ``names`` (in ``git``'s folder) as ``commit`` holds them, by name; one it does not hold is left
    out."""
    try:
        found = git.blobs(f"{commit}:./{name}" for name in names)
    except UsageError:
        return {}
    return {name: found[f"{commit}:./{name}"] for name in names if f"{commit}:./{name}" in found}


def _file_answers(fixture: Path, commit: str, pins: Mapping[str, Pin], git_in: GitIn
                  ) -> Iterator[tuple[str, str | None, str | None]]:
    """(id, answer, why none) of each pinned case a fixture file's recordings name at ``commit``."""
    sidecar = fixture.name + RECORDED_SUFFIX
    blobs = _blobs(git_in(fixture.parent), commit, fixture.name, sidecar)
    if sidecar not in blobs:
        return
    cases = _cases_at(fixture.name, blobs.get(fixture.name, b""))
    shown = f"{commit[:12]}:{fixture.parent.as_posix()}/{sidecar}"
    for number, line in numbered_lines(blobs[sidecar].decode("utf-8", "replace")):
        try:
            item = loads_strict(line) if line.strip() else None
            if isinstance(item, dict) and isinstance(item.get("id"), str) and item["id"] in pins:
                yield item["id"], *_pinned_text(item, pins[item["id"]], cases.get(item["id"]))
        except (NotJSON, ValueError, TypeError, OverflowError, AttributeError, RecursionError) as exc:
            cid = _id_of(line)  # the answer is only shown: a line that cannot be read is no answer, not an error
            if cid is not None and cid in pins:
                yield cid, None, f"line {number} of {shown} could not be read ({exc})"


def _id_of(line: str) -> str | None:
    """The case id a sidecar line names, when it can be read at all (for the reason on the page)."""
    try:
        item = json.loads(line)
    except (ValueError, RecursionError):
        return None
    cid = item.get("id") if isinstance(item, dict) else None
    return cid if isinstance(cid, str) else None


def _cases_at(name: str, blob: bytes) -> dict[str, Mapping[str, Any]]:
    """Each case of a fixture file's text at the pins' commit, as written, by id: to digest it as the pins did."""
    try:
        raws = parser_of(name)(blob.decode("utf-8-sig"), name)
    except (UsageError, UnicodeDecodeError):
        return {}
    return {raw.data["id"]: raw.data for raw in raws
            if isinstance(raw.data, dict) and isinstance(raw.data.get("id"), str)}


def _pinned_text(item: Mapping[str, Any], pin: Pin, case: Mapping[str, Any] | None) -> tuple[str | None, str | None]:
    """A recording's answer when it is the pinned one (the case as recorded then digests to its pin's ``hash``), or
    why it is not shown."""
    if case is None or digest({**case, "recorded": item.get("recorded")}) != pin.hash:
        return None, ("the answer recorded at the pins' commit is not the one its pin was made from (the case's digest "
                      "there is not its pin's: recordings committed apart from the pins, or a case that names files)")
    text = _answer_text(item.get("recorded"))
    if text is None:
        return None, "its recording at the pins' commit says no text"
    return text[:PREVIEW_CHARS], None


def _answer_text(recorded: Any) -> str | None:
    """What a recorded envelope (or the first of its repeats) says, read the way grading reads it."""
    first = recorded[0] if isinstance(recorded, list) and recorded else recorded
    if not isinstance(first, dict):
        return None
    reply = classify(envelope_from_raw(first)).reply
    return spoken_text(reply) if reply is not None else None
