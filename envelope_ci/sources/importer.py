"""``envelope-ci import``: a live run's recordings (``run --record``) become the fixtures' recorded envelopes.

Each fixture file's cases get their envelopes in a sidecar beside it (see ``sidecars``), so
offline fixtures come from a real run instead of being typed by hand, and the user's YAML is
never rewritten.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from .. import atomic
from ..errors import Problem, UsageError
from ..grading.grade import grade
from ..model import PINS_NAME, Case
from .cases import load_cases
from .recordings import envelope_from_raw, envelope_problem, iter_recordings, repeats
from .sidecars import read_sidecar, render_sidecar, sidecar_of


@dataclass(frozen=True)
class Imported:
    """What an import wrote: each sidecar with its number of cases, the envelope count, and cases recorded
    undelivered."""

    sidecars: tuple[tuple[Path, int], ...]
    envelopes: int
    undelivered: tuple[str, ...]


def read_envelopes(path: Path, cases: Mapping[str, Case]) -> dict[str, list[Any]]:
    """Each case's envelopes in the order recorded (several lines for one id are its repeats); every bad line is a
    problem."""
    if not path.is_file():
        raise UsageError(f"{path}: recordings file not found")
    shown = path.as_posix()
    out: dict[str, list[Any]] = {}
    problems: list[Problem] = []
    for number, item in iter_recordings(path):
        if not isinstance(item, dict) or not isinstance(item.get("id"), str) or "recorded" not in item:
            problems.append(Problem(shown, number, None,
                                    'expected {"id": CASE_ID, "recorded": ENVELOPE} (a line of run --record)'))
        elif item["id"] not in cases:
            problems.append(Problem(shown, number, "id", f"{item['id']!r} matches no case in the fixtures"))
        elif (found := envelope_problem(item["recorded"])) is not None:
            problems.append(Problem(shown, number, found[0], found[1]))
        else:
            out.setdefault(item["id"], []).extend(repeats(item["recorded"]))
    if problems:
        raise UsageError(problems)
    if not out:
        raise UsageError([Problem(shown, None, None, "holds no recorded envelopes")])
    return out


def _embedded(cases: Sequence[Case], imported: Mapping[str, Any], sidecar_ids: set[str]) -> list[Problem]:
    """Imported cases that record their own answer in the fixture file: the loader would find two answers."""
    return [Problem(c.file, c.line, "completion" if c.completion is not None else "recorded",
                    f"case {c.id!r} records its own answer here: "
                    f"delete its '{'completion' if c.completion is not None else 'recorded'}' "
                    "to import a recorded one (it goes beside the file, in a sidecar)")
            for c in cases if c.id in imported and c.id not in sidecar_ids and (c.completion is not None or c.recorded)]


def _without_graders(case: Case) -> Case:
    """The case without its ``python`` assertions: they never make an answer undelivered, and an import runs no
    grader."""
    return msgspec.structs.replace(case, expectations=tuple(e for e in case.expectations if e.kind.name != "python"))


def import_recordings(recordings: Path, fixtures: Path) -> Imported:
    """Write the recordings' envelopes into the sidecars of the fixture files holding their cases; nothing is
    written on any problem."""
    if recordings.resolve().is_relative_to(fixtures.resolve()):
        raise UsageError(f"{recordings} is inside the fixtures directory {fixtures}: it would be read as cases; "
                         "move it out first")
    cases = load_cases(fixtures, {(fixtures / PINS_NAME).resolve()})
    envelopes = read_envelopes(recordings, {c.id: c for c in cases})
    by_file: dict[str, list[Case]] = {}
    for case in cases:
        by_file.setdefault(case.file, []).append(case)
    planned: list[tuple[Path, str, int]] = []
    problems: list[Problem] = []
    for file, in_file in by_file.items():
        imported = {c.id: envelopes[c.id] for c in in_file if c.id in envelopes}
        if not imported:
            continue
        sidecar = sidecar_of(Path(file))
        kept = ({i: e.recorded for i, e in read_sidecar(sidecar, sidecar.as_posix()).items()} if sidecar.is_file()
                else {})
        problems += _embedded(in_file, imported, set(kept))
        merged = {**kept, **{i: envs[0] if len(envs) == 1 else envs for i, envs in imported.items()}}
        planned.append((sidecar, render_sidecar([c.id for c in in_file], merged), len(imported)))
    if problems:
        raise UsageError(problems)
    for sidecar, text, _ in planned:
        atomic.write_text(sidecar, text)
    undelivered = [c.id for c in cases
                   if c.id in envelopes and any(grade(envelope_from_raw(e), _without_graders(c)).label.is_transport
                                                for e in envelopes[c.id])]
    return Imported(tuple((s, n) for s, _, n in planned), sum(map(len, envelopes.values())), tuple(undelivered))
