"""Recorded envelopes, both directions: read (fixture ``recorded``, ``--replay`` files) and write (``--record``).

A recordings file is JSONL, one line per envelope: ``{"id": CASE_ID, "recorded": ENVELOPE,
"attempt_log": [...]}``; lines with the same id are repeats. The writer flushes each line
as it arrives, so a crash loses nothing already received.
"""
from __future__ import annotations

import difflib
import json
import threading
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import msgspec

from .. import atomic
from ..errors import Problem, UsageError
from ..model import DEFAULT_PROVIDER, NO_ENVELOPES, Case, Data, Envelope
from .files import read_text
from .parse import NotJSON, json_problem, loads_strict, numbered_lines, too_deep
from .validate import FileSchema

if TYPE_CHECKING:
    import jsonschema


def envelope_from_raw(data: Mapping[str, Any]) -> Envelope:
    """A recorded envelope (fixture ``recorded`` or a recordings line) as plain data."""
    judgements = data.get("judgements")
    embeddings = data.get("embeddings")
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
        level_ms=data.get("level_ms"),
        judgements={rubric: envelope_from_raw(j) for rubric, j in judgements.items()} if judgements else NO_ENVELOPES,
        embeddings={text: envelope_from_raw(e) for text, e in embeddings.items()} if embeddings else NO_ENVELOPES,
        provider=str(data.get("provider") or DEFAULT_PROVIDER),  # older recordings name none: openai-chat's
    )


def request_of(data: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The request a recorded envelope says it answered (``sources.requests``), if it says."""
    request = data.get("request")
    return request if isinstance(request, dict) else None


def iter_recordings(path: Path) -> Iterator[tuple[int, Any]]:
    """Each line of a recordings file parsed, with its number."""
    shown = path.as_posix()
    for number, line in numbered_lines(read_text(path, shown)):
        if line.strip():
            yield number, _loads_line(shown, number, line)


def _loads_line(shown: str, number: int, line: str) -> Any:
    """One line of a recordings file (``shown``) as JSON; a line that is not JSON is bad input on its line."""
    try:
        return loads_strict(line)
    except json.JSONDecodeError as exc:
        raise UsageError([json_problem(shown, exc, number - 1)]) from None
    except NotJSON as exc:
        raise UsageError([Problem(shown, number, None, str(exc))]) from None


ENVELOPE_SCHEMA: dict[str, Any] = json.loads(
    resources.files("envelope_ci").joinpath("case_schema.json").read_text("utf-8"))["$defs"]["envelope"]
_ENVELOPE_KEYS = frozenset(ENVELOPE_SCHEMA["properties"])
# One recorded envelope, checked directly (the schema has no oneOf or $ref around it).
_ENVELOPE = FileSchema(lambda: ENVELOPE_SCHEMA)


def repeats(recorded: Any) -> list[Any]:
    """A ``recorded`` value's envelopes: one, or a list of repeats."""
    return recorded if isinstance(recorded, list) else [recorded]


def envelope_problem(recorded: Any) -> tuple[str, str] | None:
    """The first problem with a ``recorded`` value (one envelope or a list of repeats)."""
    items = repeats(recorded)
    if isinstance(recorded, list) and not recorded:
        return "recorded", "a list of repeats needs at least one envelope"
    for index, env in enumerate(items):
        prefix = f"recorded[{index}]" if isinstance(recorded, list) else "recorded"
        errors = _ENVELOPE.errors(env)
        if errors:
            return _envelope_error(prefix, env, errors)
        found = _judgement_problem(prefix, env)
        if found:
            return found
    return None


def _judgement_problem(prefix: str, env: Mapping[str, Any]) -> tuple[str, str] | None:
    """The first problem with the judge and embeddings envelopes an envelope carries: each is an envelope like any
    other."""
    for key in ("judgements", "embeddings"):
        for said, judged in (env.get(key) or {}).items():
            found = envelope_problem(judged)
            if found is not None:
                return f"{prefix}.{key}[{said[:40]!r}]{found[0].removeprefix('recorded')}", found[1]
    return None


def _envelope_error(prefix: str, env: Any, errors: list[jsonschema.ValidationError]) -> tuple[str, str]:
    """The one error to show for an envelope: a misspelled key first (with a did-you-mean), else the likeliest."""
    if isinstance(env, dict):
        unknown = sorted(str(k) for k in env if k not in _ENVELOPE_KEYS)
        if unknown:
            guess = difflib.get_close_matches(unknown[0], sorted(_ENVELOPE_KEYS), n=1)
            return f"{prefix}.{unknown[0]}", "unknown key" + (f" (did you mean {guess[0]!r}?)" if guess else "")
    from jsonschema.exceptions import best_match  # only to word a problem the fast check found

    error = best_match(errors) or errors[0]
    where = ".".join(str(p) for p in error.absolute_path)
    return prefix + (f".{where}" if where else ""), error.message


class Replay(Data, frozen=True):
    """A ``--replay`` file, checked: each case's envelopes (repeats in file order) and the requests they answered."""

    envelopes: dict[str, list[Envelope]]  # given up to grading case by case (``Recorded``)
    requests: Mapping[str, list[Mapping[str, Any] | None]]


_Ms = Annotated[int, msgspec.Meta(ge=0)] | Annotated[float, msgspec.Meta(ge=0)] | None


class _Recorded(Data, frozen=True, forbid_unknown_fields=True):
    """One recorded envelope typed as ``$defs.envelope`` of case_schema.json has it: msgspec checks a line as it
    decodes it.

    As strict as that schema or stricter (an integer written ``1.0`` is refused here): a line it
    refuses is read again the schema's way, which accepts what the schema accepts and words why not.
    """

    http_status: Annotated[int, msgspec.Meta(ge=100, le=599)] | None | msgspec.UnsetType = msgspec.UNSET
    elapsed_ms: _Ms = None
    ttft_ms: _Ms = None
    headers: dict[str, str] = {}
    body: Any = None
    error: str | msgspec.UnsetType = msgspec.UNSET
    attempts: Annotated[int, msgspec.Meta(ge=1)] = 1
    stream: bool = False
    stream_complete: bool | None = None
    notes: tuple[str, ...] = ()
    request: dict[str, Any] | None = None
    judgements: dict[str, _Recorded] = {}
    embeddings: dict[str, _Recorded] = {}
    level_ms: _Ms = None
    provider: Annotated[str, msgspec.Meta(min_length=1)] = DEFAULT_PROVIDER

    def envelope(self) -> Envelope | None:
        """The envelope it records, or None when it gives both or neither of ``http_status`` and ``error`` (the
        schema's oneOf)."""
        judged = {rubric: j.envelope() for rubric, j in self.judgements.items()} if self.judgements else NO_ENVELOPES
        embedded = {text: e.envelope() for text, e in self.embeddings.items()} if self.embeddings else NO_ENVELOPES
        if ((self.http_status is msgspec.UNSET) == (self.error is msgspec.UNSET) or None in judged.values()
                or None in embedded.values()):
            return None
        return Envelope(http_status=None if self.http_status is msgspec.UNSET else self.http_status,
                        elapsed_ms=self.elapsed_ms, ttft_ms=self.ttft_ms, headers=self.headers, body=self.body,
                        error=None if self.error is msgspec.UNSET else self.error, attempts=self.attempts,
                        stream_complete=self.stream_complete, notes=self.notes, request=self.request,
                        level_ms=self.level_ms,
                        # None in neither: refused above
                        judgements=cast(Mapping[str, Envelope], judged),
                        embeddings=cast(Mapping[str, Envelope], embedded),
                        provider=self.provider)


class _Line(Data, frozen=True):
    """A recordings line: a case id, its envelope or repeats; other keys (``attempt_log``) are not read."""

    id: str
    recorded: _Recorded | list[_Recorded]


_LINE = msgspec.json.Decoder(_Line)


def _typed(line: str) -> tuple[str, list[Envelope]] | None:
    """A line's case id and envelopes, decoded and checked in one pass; None for a line to read the long way."""
    if too_deep(line) is not None:
        return None
    try:
        read = _LINE.decode(line)
    except (msgspec.MsgspecError, RecursionError):
        return None
    envelopes = [r.envelope() for r in (read.recorded if isinstance(read.recorded, list) else [read.recorded])]
    if not envelopes or None in envelopes:
        return None
    return read.id, [e for e in envelopes if e is not None]


def read_replay(path: Path, case_ids: set[str]) -> Replay:
    """The lines of a ``--replay`` file held against the fixtures' case ids: every problem at once, in line order."""
    if not path.is_file():
        raise UsageError(f"{path}: recordings file not found")
    shown = path.as_posix()
    envelopes: dict[str, list[Envelope]] = {}
    problems: list[Problem] = []
    for number, line in numbered_lines(read_text(path, shown)):
        if not line.strip():
            continue
        found = _typed(line)
        # the long way: the schema's reading, and the wording of what is wrong
        if found is None or found[0] not in case_ids:
            found = _checked(shown, number, line, case_ids, problems)
        if found is not None:
            envelopes.setdefault(found[0], []).extend(found[1])
    if problems:
        raise UsageError(problems)
    return Replay(envelopes, {case_id: [e.request for e in found] for case_id, found in envelopes.items()})


def _checked(shown: str, number: int, line: str, case_ids: set[str],
             problems: list[Problem]) -> tuple[str, list[Envelope]] | None:
    """A line the typed reading refused, read as the schema has it: its id and envelopes, or None with its problem
    added."""
    item = _loads_line(shown, number, line)
    if not isinstance(item, dict) or not isinstance(item.get("id"), str) or "recorded" not in item:
        problems.append(Problem(shown, number, None, 'expected {"id": CASE_ID, "recorded": ENVELOPE}'))
        return None
    found = (envelope_problem(item["recorded"]) if item["id"] in case_ids
             else ("id", f"{item['id']!r} matches no case in the fixtures"))
    if found is not None:
        problems.append(Problem(shown, number, *found))
        return None
    return item["id"], [envelope_from_raw(e) for e in repeats(item["recorded"])]


def envelope_to_raw(env: Envelope) -> dict[str, Any]:
    """An envelope in the fixture ``recorded`` shape (only the fields that are set)."""
    if env.error is not None:
        out: dict[str, Any] = {"error": env.error}
    else:
        out = {"http_status": env.http_status, "headers": dict(env.headers), "body": env.body}
    for key in ("elapsed_ms", "ttft_ms", "stream_complete", "level_ms"):
        value = getattr(env, key)
        if value is not None:
            out[key] = value
    out["attempts"] = env.attempts
    out["provider"] = env.provider
    if env.notes:
        out["notes"] = list(env.notes)
    if env.request is not None:
        out["request"] = dict(env.request)
    if env.judgements:
        out["judgements"] = {rubric: envelope_to_raw(j) for rubric, j in env.judgements.items()}
    if env.embeddings:
        out["embeddings"] = {text: envelope_to_raw(e) for text, e in env.embeddings.items()}
    return out


# Response body keys that differ on every call and that no rule reads: a re-record must not show them as changes.
_PER_CALL_BODY_KEYS = ("id", "created")


def as_recorded(env: Envelope, keep_headers: Collection[str] = ()) -> Envelope:
    """What a recording keeps of an envelope: what grading and the staleness check read, not what each call varies.

    Response headers go (``record_headers`` in envelope-ci.yaml names any to keep), but a
    redirect's ``Location``, which its label's reason names; so do the body's ``id`` and
    ``created``. A judge's envelopes are kept the same way.
    """
    kept = {k.lower() for k in keep_headers} | ({"location"} if env.http_status and 300 <= env.http_status < 400
                                                 else set())
    body = env.body
    if isinstance(body, dict) and any(k in body for k in _PER_CALL_BODY_KEYS):
        body = {k: v for k, v in body.items() if k not in _PER_CALL_BODY_KEYS}
    return msgspec.structs.replace(
        env, headers={k: v for k, v in env.headers.items() if k.lower() in kept}, body=body,
        judgements={rubric: as_recorded(j, keep_headers) for rubric, j in env.judgements.items()},
        embeddings={text: as_recorded(e, keep_headers) for text, e in env.embeddings.items()})


class RecordingWriter:
    """Appends and flushes one line per finished envelope; safe across worker threads."""

    def __init__(self, path: Path, keep_headers: Collection[str] = ()) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = path.open("w", encoding="utf-8")
        self._lock = threading.Lock()
        self._keep_headers = tuple(keep_headers)

    def write(self, case_id: str, env: Envelope, attempt_log: Sequence[dict[str, Any]] = ()) -> None:
        # ASCII escapes: a server's lone surrogate ("\\ud800") round-trips instead of failing to encode as UTF-8.
        recorded = envelope_to_raw(as_recorded(env, self._keep_headers))
        line = json.dumps({"id": case_id, "recorded": recorded, "attempt_log": list(attempt_log)}, ensure_ascii=True)
        with self._lock:
            if self._fh.closed:  # a call that outlived an interrupted run: the report has moved on
                return
            self._fh.write(line + "\n")
            self._fh.flush()

    def close(self) -> None:
        with self._lock:
            self._fh.close()


def stamp_level(path: Path, level_ms: float) -> None:
    """Write the recording run's level into each of its envelopes, once the run knows it (analysis.levels).

    Lines are written as answers arrive, before the run has a level; the file is rewritten
    whole (atomically) at the end, so an imported recording carries its level into the sidecars.
    """
    lines = []
    for _, item in iter_recordings(path):
        for env in repeats(item["recorded"]):
            env["level_ms"] = level_ms
        lines.append(json.dumps(item, ensure_ascii=True) + "\n")
    atomic.write_text(path, "".join(lines))


@dataclass(frozen=True, eq=False)
class Recorded(Mapping[str, list[Envelope]]):
    """The envelopes to grade offline by case id, each case's given once, when it is graded, and let go then.

    ``ids`` are the cases', in order; ``own`` are the cases the replay does not hold, whose
    envelopes their fixtures give. ``requests`` are what each case's recordings answered, for
    the staleness check: a bare ``completion`` is a hand-written answer, not a recording, and
    has none. ``replayed``: how many of the cases the replay holds. A replay's envelopes are
    the bulk of an offline run's memory, and grading asks for each case's once: the replay
    gives them up as they are asked for.
    """

    ids: tuple[str, ...]
    own: Mapping[str, Case]
    replay: Replay | None
    requests: Mapping[str, list[Mapping[str, Any] | None]]
    replayed: int = 0

    def __getitem__(self, case_id: str) -> list[Envelope]:
        case = self.own.get(case_id)
        if case is not None:
            return ([envelope_from_raw(e) for e in case.recorded] if case.recorded
                    else [Envelope(completion=case.completion)])
        if self.replay is None:
            raise KeyError(case_id)
        return self.replay.envelopes.pop(case_id)  # a KeyError too for a case it does not hold (or gave up already)

    def __iter__(self) -> Iterator[str]:
        return iter(self.ids)

    def __len__(self) -> int:
        return len(self.ids)


def offline_envelopes(cases: Sequence[Case], replay: Replay | None) -> Recorded:
    """Recorded envelopes: a replay file first, then what each fixture embeds; every case must have one."""
    ids = tuple(c.id for c in cases)
    held = replay.envelopes if replay else {}
    own = {c.id: c for c in cases if c.id not in held}
    replayed = len(ids) - len(own)
    missing = [Problem(case.file, case.line, "completion",
                       f"case {case.id!r} has no 'completion' or 'recorded' to grade offline"
                       f"{' and it is not in the --replay file either' if replay is not None else ''} "
                       "(record one, run it live with --base-url, or replay a recordings file that holds it)")
               for case in own.values() if not case.recorded and case.completion is None]
    if missing:
        raise UsageError(missing)
    requests = {case_id: [request_of(e) for e in case.recorded or ()] for case_id, case in own.items()}
    if replay is not None:
        requests.update((case_id, replay.requests[case_id]) for case_id in ids if case_id in held)
    return Recorded(ids, own, replay, requests, replayed)
