"""The answers the pins were made from: the pins keep digests, never answer text, so the text is read from the
suite's recorded answers (``FILE.recorded.jsonl``) as git holds them at the last commit that changed the pins file.

The one place a report reads git, and only when a format asks (report.html): plumbing commands, each with a
timeout. Nothing of the fixtures is run; a recording is read as data. When git cannot tell (no git, no repository,
a shallow clone, pins not committed or changed since), no answer is known and ``unknown`` says why.
"""
from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..grading.envelope import classify, spoken_text
from ..model import RECORDED_SUFFIX
from ..sources.recordings import envelope_from_raw
from .build import PREVIEW_CHARS
from .model import Report

GIT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class PinnedAnswers:
    """Each pinned case's answer when it was pinned (cut as a row's preview is), and the commit it was read at."""

    texts: Mapping[str, str] = field(default_factory=dict)
    commit: str | None = None
    unknown: str | None = None  # why no answer could be read at all


class _Unknown(Exception):
    """Git cannot say which answers the pins were made from; the message says why, for the reader."""


def read_pinned_answers(report: Report) -> PinnedAnswers:
    """The pinned cases' answers as recorded beside their fixture files at the pins' commit."""
    try:
        commit = pins_commit(Path(report.run.pins))
    except _Unknown as why:
        return PinnedAnswers(unknown=str(why))
    pinned = {c.id for c in report.cases if c.pin is not None}
    texts: dict[str, str] = {}
    for file in dict.fromkeys(c.file for c in report.cases if c.pin is not None):
        sidecar = Path(file + RECORDED_SUFFIX)
        blob = _git(sidecar.parent, "cat-file", "blob", f"{commit}:./{sidecar.name}")
        if blob is not None:
            texts.update(_answers(blob, pinned))
    return PinnedAnswers(texts, commit)


def pins_commit(pins: Path) -> str:
    """The last commit that changed the pins file, when the file is as that commit holds it."""
    if not pins.is_file():
        raise _Unknown("there is no pins file")
    found = _git(pins.parent, "log", "-1", "--no-show-signature", "--format=%H", "--", pins.name)
    if found is None:
        raise _Unknown("git could not read the pins file's history here (no git, or not a repository)")
    commit = found.decode("ascii", "replace").strip()
    if not commit:
        raise _Unknown("the pins file is not committed")
    if commit in _shallow_boundary(pins.parent):
        raise _Unknown("the clone is shallow and stops before the pins' commit (clone with fetch-depth: 0)")
    if _git(pins.parent, "cat-file", "blob", f"{commit}:./{pins.name}") != pins.read_bytes():
        raise _Unknown(f"the pins file differs from its last commit ({commit[:12]}): pins not committed yet")
    return commit


def _shallow_boundary(folder: Path) -> set[str]:
    """The commits a shallow clone stops at: git shows each as if it added every file, the pins too."""
    where = _git(folder, "rev-parse", "--git-path", "shallow")
    path = folder / where.decode("utf-8", "replace").strip() if where else None
    return set(path.read_text("ascii", "replace").split()) if path is not None and path.is_file() else set()


def _git(folder: Path, *args: str) -> bytes | None:
    """A git command's output in ``folder``, or None when it fails, is missing or outlasts its timeout."""
    try:
        done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, timeout=GIT_TIMEOUT_S,
                              check=False, stdin=subprocess.DEVNULL,
                              env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"})
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _answers(sidecar: bytes, wanted: Collection[str]) -> Iterator[tuple[str, str]]:
    """(id, answer) of each wanted case a sidecar's text records: its first repeat's answer, cut as a preview is."""
    for line in sidecar.decode("utf-8", "replace").splitlines():
        try:
            item = json.loads(line)
        except (ValueError, RecursionError):
            continue  # the answer is only shown: a line that cannot be read is no answer, not an error
        if isinstance(item, dict) and item.get("id") in wanted:
            text = _answer_text(item.get("recorded"))
            if text is not None:
                yield item["id"], text[:PREVIEW_CHARS]


def _answer_text(recorded: Any) -> str | None:
    """What a recorded envelope (or the first of its repeats) says, read the way grading reads it."""
    first = recorded[0] if isinstance(recorded, list) and recorded else recorded
    if not isinstance(first, dict):
        return None
    try:
        reply = classify(envelope_from_raw(first)).reply
    except (TypeError, ValueError, AttributeError):
        return None
    return spoken_text(reply) if reply is not None else None
