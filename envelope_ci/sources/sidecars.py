"""Recorded envelopes kept beside their fixture file (``cases.yaml`` -> ``cases.yaml.recorded.jsonl``).

``envelope-ci import`` writes them rather than editing the user's YAML, which would lose its
comments and layout. The loader gives each case its line's envelopes as if the case said
``recorded:``, so they are part of the case's digest and of the fixtures hash: re-recording
is a fixture change that the pins must accept, like any other.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from msgspec.structs import replace

from ..errors import Problem, UsageError
from ..model import RECORDED_SUFFIX
from .files import read_text
from .parse import NotJSON, RawCase, json_problem, loads_strict
from .recordings import envelope_problem

_LINE_SHAPE = 'expected {"id": CASE_ID, "recorded": ENVELOPE or [ENVELOPE, ...]}'


def sidecar_of(case_file: Path) -> Path:
    """Where a fixture file's recorded envelopes are kept."""
    return case_file.with_name(case_file.name + RECORDED_SUFFIX)


@dataclass(frozen=True)
class Entry:
    """One case's line of a sidecar: its envelope, or its repeats as a list."""

    line: int
    recorded: Any


def read_sidecar(path: Path, shown: str) -> dict[str, Entry]:
    """A sidecar's lines by case id; a malformed line, a bad envelope or an id given twice is a problem on its line."""
    entries: dict[str, Entry] = {}
    problems: list[Problem] = []
    for number, text in enumerate(read_text(path, shown).splitlines(), start=1):
        if not text.strip():
            continue
        try:
            item = loads_strict(text)
        except json.JSONDecodeError as exc:
            problems.append(json_problem(shown, exc, number - 1))
            continue
        except NotJSON as exc:
            problems.append(Problem(shown, number, None, str(exc)))
            continue
        if not isinstance(item, dict) or set(item) != {"id", "recorded"} or not isinstance(item["id"], str):
            problems.append(Problem(shown, number, None, _LINE_SHAPE))
        elif item["id"] in entries:
            problems.append(Problem(shown, number, "id",
                                    f"{item['id']!r} is already on line {entries[item['id']].line}: one line per case, "
                                    "its repeats as a list"))
        elif (found := envelope_problem(item["recorded"])) is not None:
            problems.append(Problem(shown, number, found[0], found[1]))
        else:
            entries[item["id"]] = Entry(number, item["recorded"])
    if problems:
        raise UsageError(problems)
    return entries


def attach_recorded(raws: Iterable[RawCase], path: Path, shown: str) -> Iterable[RawCase]:
    """A fixture file's cases, each given its sidecar line as ``recorded`` (``raws`` themselves, as given, when it
    has no sidecar).

    A line for a case that records its own answer (``recorded`` or ``completion``) would leave
    two answers to grade, and a line for no case of the file would be silently dropped: both
    are problems on the sidecar's line.
    """
    sidecar = sidecar_of(path)
    if not sidecar.is_file():
        return raws
    side_shown = shown + RECORDED_SUFFIX
    entries = read_sidecar(sidecar, side_shown)
    out: list[RawCase] = []
    problems: list[Problem] = []
    for raw in raws:
        case_id = raw.data.get("id") if isinstance(raw.data, dict) else None
        entry = entries.pop(case_id, None) if isinstance(case_id, str) else None
        own = [key for key in ("recorded", "completion") if entry is not None and key in raw.data]
        if entry is None:
            out.append(raw)
        elif own:
            problems.append(Problem(side_shown, entry.line, "id", f"case {case_id!r} has its own {own[0]!r} "
                                    f"({raw.file}:{raw.line_of(own[0])}): keep one of the two"))
        else:
            # the sidecar is another text
            out.append(replace(raw, data={**raw.data, "recorded": entry.recorded}, plain=False))
    problems += [Problem(side_shown, e.line, "id", f"{case_id!r} is not a case of {shown}")
                 for case_id, e in entries.items()]
    if problems:
        raise UsageError(problems)
    return out


def render_sidecar(order: Sequence[str], recorded: Mapping[str, Any]) -> str:
    """A sidecar's text: one line per case in the fixture file's order, ASCII-escaped like ``--record``."""
    return "".join(json.dumps({"id": case_id, "recorded": recorded[case_id]}, ensure_ascii=True) + "\n"
                   for case_id in order if case_id in recorded)
