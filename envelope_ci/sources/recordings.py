"""Recorded envelopes, both directions: read (fixture ``recorded``, ``--replay`` files) and write (``--record``).

A recordings file is JSONL, one line per envelope: ``{"id": CASE_ID, "recorded": ENVELOPE,
"attempt_log": [...]}``; lines with the same id are repeats. The writer flushes each line
as it arrives, so a crash loses nothing already received.
"""
from __future__ import annotations

import difflib
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple

import jsonschema

from ..errors import Problem, UsageError
from ..grading.envelope import Gradable, ReadAhead, packed_ahead, read_ahead, unpacked_ahead
from ..grading.fastschema import Check, compile_check, errors_of
from ..model import Case, Envelope
from ..parallel import Packing
from .files import read_text
from .parse import NotJSON, json_problem, loads_checked, loads_strict, numbered_lines


def envelope_from_raw(data: Mapping[str, Any]) -> Envelope:
    """A recorded envelope (fixture ``recorded`` or a recordings line) as plain data."""
    judgements = data.get("judgements")
    return Envelope(
        http_status=data.get("http_status"),
        elapsed_ms=data.get("elapsed_ms"),
        ttft_ms=data.get("ttft_ms"),
        headers=dict(data.get("headers") or {}),
        body=data.get("body"),
        error=data.get("error"),
        attempts=int(data.get("attempts", 1)),
        stream_complete=data.get("stream_complete"),
        notes=tuple(data.get("notes") or ()),
        request=request_of(data),
        judgements={rubric: envelope_from_raw(j) for rubric, j in judgements.items()} if judgements else {},
    )


def request_of(data: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The request a recorded envelope says it answered (``sources.requests``), if it says."""
    request = data.get("request")
    return request if isinstance(request, dict) else None


def iter_recordings(path: Path) -> Iterator[tuple[int, Any]]:
    """Each line of a recordings file parsed, with its number."""
    for number, _, item in _lines_of(path):
        yield number, item


def _lines_of(path: Path) -> Iterator[tuple[int, str, Any]]:
    """Each line of a recordings file: its number, its text and its value."""
    text = read_text(path, path.as_posix())
    for number, line in numbered_lines(text):
        if line.strip():
            try:
                yield number, line, loads_strict(line)
            except json.JSONDecodeError as exc:
                raise UsageError([json_problem(path.as_posix(), exc, number - 1)]) from None
            except NotJSON as exc:
                raise UsageError([Problem(path.as_posix(), number, None, str(exc))]) from None


@lru_cache(maxsize=1)
def _envelope_validator() -> jsonschema.protocols.Validator:
    """One recorded envelope, validated directly (no oneOf/$ref): replays can be 100k lines."""
    return jsonschema.Draft202012Validator(ENVELOPE_SCHEMA)


ENVELOPE_SCHEMA: dict[str, Any] = json.loads(resources.files("envelope_ci").joinpath("case_schema.json").read_text("utf-8"))["$defs"]["envelope"]
_ENVELOPE_KEYS = frozenset(ENVELOPE_SCHEMA["properties"])


@lru_cache(maxsize=1)
def _envelope_check() -> Check | None:
    """The envelope schema compiled to a yes/no check: replays can be 100k lines, jsonschema costs ~40 µs each and runs only to word an error."""
    return compile_check(ENVELOPE_SCHEMA)


def repeats(recorded: Any) -> list[Any]:
    """A ``recorded`` value's envelopes: one, or a list of repeats."""
    return recorded if isinstance(recorded, list) else [recorded]


def envelope_problem(recorded: Any) -> tuple[str, str] | None:
    """The first problem with a ``recorded`` value (one envelope or a list of repeats)."""
    items = repeats(recorded)
    if isinstance(recorded, list) and not recorded:
        return "recorded", "a list of repeats needs at least one envelope"
    validator, check = _envelope_validator(), _envelope_check()
    for index, env in enumerate(items):
        prefix = f"recorded[{index}]" if isinstance(recorded, list) else "recorded"
        errors = errors_of(check, validator, env)
        if errors:
            return _envelope_error(prefix, env, errors)
        found = _judgement_problem(prefix, env)
        if found:
            return found
    return None


def _judgement_problem(prefix: str, env: Mapping[str, Any]) -> tuple[str, str] | None:
    """The first problem with the judge envelopes an envelope carries: each is an envelope like any other."""
    for rubric, judged in (env.get("judgements") or {}).items():
        found = envelope_problem(judged)
        if found is not None:
            return f"{prefix}.judgements[{rubric[:40]!r}]{found[0].removeprefix('recorded')}", found[1]
    return None


def _envelope_error(prefix: str, env: Any, errors: list[jsonschema.ValidationError]) -> tuple[str, str]:
    """The one error to show for an envelope: a misspelled key first (with a did-you-mean), else the likeliest."""
    if isinstance(env, dict):
        unknown = sorted(str(k) for k in env if k not in _ENVELOPE_KEYS)
        if unknown:
            guess = difflib.get_close_matches(unknown[0], sorted(_ENVELOPE_KEYS), n=1)
            return f"{prefix}.{unknown[0]}", "unknown key" + (f" (did you mean {guess[0]!r}?)" if guess else "")
    error = jsonschema.exceptions.best_match(errors) or errors[0]
    where = ".".join(str(p) for p in error.absolute_path)
    return prefix + (f".{where}" if where else ""), error.message


@dataclass(frozen=True)
class Replay:
    """A ``--replay`` file, checked: what is held of each case's lines until the case is graded.

    A line's envelopes judged ahead (``ReadAhead``, on the core that read the file), or, for one
    whose envelopes carry judge envelopes, its text, parsed only when its case is graded. Held
    judged, 100,000 bench lines take ~920 B each in memory against ~530 B as text (~40 MB more);
    they are let go once graded, before the run's peak (writing the reports). Parsed whole, a
    recorded answer would be about four times its line. The requests the envelopes answered are
    kept as read: the staleness check needs nothing else.
    """

    held: Mapping[str, list[str | tuple[ReadAhead, ...]]]  # case id -> what is held of each of its lines, in file order (repeats)
    requests: Mapping[str, list[Mapping[str, Any] | None]]  # case id -> each envelope's recorded request

    def envelopes(self, case_id: str) -> list[Gradable]:
        """A case's envelopes: judged ahead, or built now from a line's text (checked when read)."""
        out: list[Gradable] = []
        for held in self.held[case_id]:
            if isinstance(held, str):
                out += [envelope_from_raw(env) for env in repeats(loads_checked(held)["recorded"])]
            else:
                out += held
        return out


class ReplayLine(NamedTuple):
    """One line of a ``--replay`` file as read, before it is held against the fixtures' case ids."""

    number: int
    case_id: str | None  # None: not a {"id", "recorded"} line
    held: str | tuple[ReadAhead, ...]  # its envelopes judged ahead, else its text (a judge's envelope is graded with the case)
    problem: tuple[str, str] | None  # its envelope's first problem: (field, message)
    requests: list[Mapping[str, Any] | None]  # each envelope's recorded request


def _packed_line(line: ReplayLine) -> tuple[Any, ...]:
    number, case_id, held, problem, requests = line
    return number, case_id, held if isinstance(held, str) else tuple([packed_ahead(a) for a in held]), problem, requests


def _unpacked_line(data: tuple[Any, ...]) -> ReplayLine:
    number, case_id, held, problem, requests = data
    if isinstance(held, str):  # a line kept as its text: nothing in it to rebuild
        return tuple.__new__(ReplayLine, data)
    return tuple.__new__(ReplayLine, (number, case_id, tuple([unpacked_ahead(a) for a in held]), problem, requests))


# A big replay's lines cross from the child that reads them as plain tuples.
REPLAY_PACKING = Packing(_packed_line, _unpacked_line)


def iter_replay(path: Path) -> Iterator[ReplayLine]:
    """Each line of a ``--replay`` file, its envelopes checked and judged: the work that needs no case, so it can run while they load.

    One at a time: a forked reader sends them on in parts and lets each part go (``parallel.in_background``).
    """
    if not path.is_file():
        raise UsageError(f"{path}: recordings file not found")
    for number, line, item in _lines_of(path):
        if not isinstance(item, dict) or not isinstance(item.get("id"), str) or "recorded" not in item:
            yield ReplayLine(number, None, line, None, [])
            continue
        envelopes = repeats(item["recorded"])
        found = envelope_problem(item["recorded"])
        if found is not None:
            yield ReplayLine(number, item["id"], line, found, [])
            continue
        ahead = [read_ahead(envelope_from_raw(env)) for env in envelopes]
        judged = tuple(a for a in ahead if a is not None)
        yield ReplayLine(number, item["id"], judged if len(judged) == len(ahead) else line, None, list(map(request_of, envelopes)))


def replay_of(read: Sequence[ReplayLine], shown: str, case_ids: set[str]) -> Replay:
    """The lines of a ``--replay`` file (``shown``) held against the fixtures' case ids: every problem at once, in line order."""
    held: dict[str, list[str | tuple[ReadAhead, ...]]] = {}
    requests: dict[str, list[Mapping[str, Any] | None]] = {}
    problems: list[Problem] = []
    for number, case_id, what, problem, asked in read:
        if case_id is None:
            problems.append(Problem(shown, number, None, 'expected {"id": CASE_ID, "recorded": ENVELOPE}'))
        elif case_id not in case_ids:
            problems.append(Problem(shown, number, "id", f"{case_id!r} matches no case in the fixtures"))
        elif problem is not None:
            problems.append(Problem(shown, number, *problem))
        elif case_id in held:  # a repeat of a case seen before
            held[case_id].append(what)
            requests[case_id] = requests[case_id] + asked
        else:
            held[case_id] = [what]
            requests[case_id] = asked
    if problems:
        raise UsageError(problems)
    return Replay(held, requests)


def envelope_to_raw(env: Envelope) -> dict[str, Any]:
    """An envelope in the fixture ``recorded`` shape (only the fields that are set)."""
    if env.error is not None:
        out: dict[str, Any] = {"error": env.error}
    else:
        out = {"http_status": env.http_status, "headers": dict(env.headers), "body": env.body}
    for key in ("elapsed_ms", "ttft_ms", "stream_complete"):
        value = getattr(env, key)
        if value is not None:
            out[key] = value
    out["attempts"] = env.attempts
    if env.notes:
        out["notes"] = list(env.notes)
    if env.request is not None:
        out["request"] = dict(env.request)
    if env.judgements:
        out["judgements"] = {rubric: envelope_to_raw(j) for rubric, j in env.judgements.items()}
    return out


class RecordingWriter:
    """Appends and flushes one line per finished envelope; safe across worker threads."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = path.open("w", encoding="utf-8")
        self._lock = threading.Lock()

    def write(self, case_id: str, env: Envelope, attempt_log: Sequence[dict[str, Any]] = ()) -> None:
        # ASCII escapes: a server's lone surrogate ("\\ud800") round-trips instead of failing to encode as UTF-8.
        line = json.dumps({"id": case_id, "recorded": envelope_to_raw(env), "attempt_log": list(attempt_log)}, ensure_ascii=True)
        with self._lock:
            if self._fh.closed:  # a call that outlived an interrupted run: the report has moved on
                return
            self._fh.write(line + "\n")
            self._fh.flush()

    def close(self) -> None:
        with self._lock:
            self._fh.close()


@dataclass(frozen=True, eq=False)
class Recorded(Mapping[str, list[Gradable]]):
    """The envelopes to grade offline by case id, each case's given only when asked for (as it is graded): built then, or judged ahead.

    ``ids`` are the cases', in order; ``own`` are the cases the replay does not hold, whose
    envelopes their fixtures give. ``requests`` are what each case's recordings answered, for
    the staleness check: a bare ``completion`` is a hand-written answer, not a recording, and
    has none. ``replayed``: how many of the cases the replay holds.
    """

    ids: tuple[str, ...]
    own: Mapping[str, Case]
    replay: Replay | None
    requests: Mapping[str, list[Mapping[str, Any] | None]]
    replayed: int = 0

    def __getitem__(self, case_id: str) -> list[Gradable]:
        case = self.own.get(case_id)
        if case is not None:
            return [envelope_from_raw(e) for e in case.recorded] if case.recorded else [Envelope(completion=case.completion)]
        if self.replay is None:
            raise KeyError(case_id)
        return self.replay.envelopes(case_id)  # a KeyError too for a case it does not hold

    def __iter__(self) -> Iterator[str]:
        return iter(self.ids)

    def __len__(self) -> int:
        return len(self.ids)


def offline_envelopes(cases: Sequence[Case], replay: Replay | None) -> Recorded:
    """Recorded envelopes: a replay file first, then what each fixture embeds; every case must have one.

    A replay that holds every case, the commonest big run, is told in C (``map``, ``sum``): a
    pass over the cases in Python for each question cost 0.3-0.4 s of a 100,000-case run.
    """
    ids = tuple(c.id for c in cases)
    held = replay.held if replay else {}
    replayed = sum(map(held.__contains__, ids))
    own = {c.id: c for c in cases if c.id not in held} if replayed < len(ids) else {}
    missing = [Problem(case.file, case.line, "completion",
                       f"case {case.id!r} has no 'completion' or 'recorded' to grade offline"
                       f"{' and it is not in the --replay file either' if replay is not None else ''} "
                       "(record one, run it live with --base-url, or replay a recordings file that holds it)")
               for case in own.values() if not case.recorded and case.completion is None]
    if missing:
        raise UsageError(missing)
    requests: Mapping[str, list[Mapping[str, Any] | None]]
    if replay is not None and replayed == len(ids) == len(replay.requests):
        requests = replay.requests  # it holds these cases and no other
    else:
        requests = {case_id: [request_of(e) for e in case.recorded or ()] for case_id, case in own.items()}
        if replay is not None:
            requests.update((case_id, replay.requests[case_id]) for case_id in ids if case_id in held)
    return Recorded(ids, own, replay, requests, replayed)
