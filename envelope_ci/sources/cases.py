"""Raw cases -> validated, frozen ``Case`` objects: the case schema, its errors, the assertions.

The case schema is assembled from ``case_schema.json`` and every assertion type's
fragment, so a new assertion needs no edit here.
"""
from __future__ import annotations

import copy
import difflib
import json
import math
from collections.abc import Mapping
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from ..canonical import LONE_SURROGATE, digest
from ..errors import Problem, UsageError
from ..formats.escape import invisible_in, reveal
from ..grading.assertions.base import AssertionType, Expectation
from ..grading.assertions.registry import NEGATION_PREFIX, lookup, schema_fragments, shorthands
from ..model import STRATA, Case
from .files import CASE_SUFFIXES, case_files
from .parse import RawCase, parse_file
from .recordings import envelope_problem
from .refs import FileRefs
from .sidecars import attach_recorded
from .templates import FILE_KEYS, Matrices, render
from .untimed import answer_digest
from .validate import FileSchema

if TYPE_CHECKING:
    import jsonschema

_REQUEST_KEYS = ("max_tokens", "temperature", "seed", "stop", "response_format", "tools", "tool_choice")
# What ``_each_file`` makes of each file's cases: the cases themselves, or their digests.
_Taken = TypeVar("_Taken")
# Two ways of giving one message: a case uses one of each pair (``messages`` replaces prompt and system).
_EITHER = (("system", "system_file"), ("prompt", "prompt_file"), ("messages", "system_file"),
           ("messages", "prompt_file"))


@lru_cache(maxsize=1)
def case_schema() -> dict[str, Any]:
    """The fixture case format: ``case_schema.json`` plus every assertion's keys, published for editors too."""
    schema: dict[str, Any] = json.loads(resources.files("envelope_ci").joinpath("case_schema.json").read_text("utf-8"))
    schema = copy.deepcopy(schema)
    schema["properties"]["stratum"] = {"enum": list(STRATA),
                                       "description": "Difficulty band; absent means held to the easy floor."}
    schema["properties"].update(schema_fragments())
    return schema


CASE_SCHEMA = FileSchema(case_schema)


def _pointer(key: str) -> str:
    """A key as one step of a JSON pointer (RFC 6901): a plug-in's shorthand key may hold ``/`` or ``~``."""
    return key.replace("~", "~0").replace("/", "~1")


@lru_cache(maxsize=1)
def fixture_schema() -> dict[str, Any]:
    """A whole fixture file, in every form ``parse.py`` reads (one case, a list, ``{cases}``, ``{defaults, cases}``):
    what ``envelope-ci schema`` gives editors, so that they accept every file ``init`` writes."""
    case = {k: v for k, v in case_schema().items() if k not in ("$schema", "$id", "$defs")}
    keys = {name: {"$ref": f"#/$defs/case/properties/{_pointer(name)}"} for name in case["properties"]}
    # In {defaults, cases} a case may take its prompt from the defaults; the defaults give any key but the id.
    partial = {"type": "object", "additionalProperties": False, "required": ["id"], "properties": keys,
               "not": case["not"]}
    defaults = {"type": "object", "additionalProperties": False, "not": case["not"],
                "properties": {k: v for k, v in keys.items() if k != "id"}}
    return {
        "$schema": case_schema()["$schema"],
        "$id": "https://github.com/envelope-ci/envelope-ci/fixture.schema.json",
        "title": "envelope-ci fixture file",
        "description": "A fixture file: one case, a list of cases, {cases: [...]}, or {defaults: {...}, cases: [...]} "
                       "(defaults: any case key but id, applied to every case of the file). JSONL: a case per line.",
        "anyOf": [
            {"$ref": "#/$defs/case"},
            {"type": "array", "items": {"$ref": "#/$defs/case"}},
            {"type": "object", "additionalProperties": False, "required": ["cases"],
             "properties": {"cases": {"type": "array", "items": {"$ref": "#/$defs/case"}}}},
            {"type": "object", "additionalProperties": False, "required": ["defaults", "cases"],
             "properties": {"defaults": {"$ref": "#/$defs/defaults"},
                            "cases": {"type": "array", "items": {"$ref": "#/$defs/partial_case"}}}},
        ],
        "$defs": {"case": case, "partial_case": partial, "defaults": defaults, **case_schema()["$defs"]},
    }


def _field_path(error: jsonschema.ValidationError) -> str:
    return ".".join(str(p) for p in error.absolute_path)


def _unknown_keys(error: jsonschema.ValidationError) -> list[tuple[str, str | None]]:
    """Each key an ``additionalProperties`` error found unexpected (shown safely), and the known key it is most like."""
    known = [str(k) for k in error.schema.get("properties", {})]
    keys = (LONE_SURROGATE.sub("\ufffd", str(k)) for k in error.instance)
    return [(key, next(iter(difflib.get_close_matches(key, known, n=1)), None)) for key in keys if key not in known]


def unknown_key_problems(raw: RawCase, error: jsonschema.ValidationError) -> list[Problem]:
    """One problem per unexpected key, on the key's own line, with a did-you-mean."""
    path = [str(p) for p in error.absolute_path]
    out = []
    for key, guess in _unknown_keys(error):
        hint = f" (did you mean {guess!r}?)" if guess else ""
        where = ".".join(path + [key])
        out.append(Problem(raw.file, raw.line_of(where), where, f"unknown key{hint}"))
    return out


def enum_message(error: jsonschema.ValidationError) -> str:
    """A value that is none of the choices, with a did-you-mean; an assertion type is named as one, not listed in
    full."""
    value, choices = error.instance, [c for c in error.validator_value if isinstance(c, str)]
    if not isinstance(value, str):
        return error.message
    guess = difflib.get_close_matches(value, choices, n=1)
    hint = f" (did you mean {guess[0]!r}?)" if guess else ""
    path = list(error.absolute_path)
    if len(path) != 3 or path[0] != "assert" or path[2] != "type":
        return error.message + hint
    if value.startswith(NEGATION_PREFIX) and value[len(NEGATION_PREFIX):] in choices:
        return f"{value!r} is not one of the assertion types: {value[len(NEGATION_PREFIX):]!r} has no not- form"
    return f"{value!r} is not one of the assertion types" + (hint or f": {', '.join(choices)}")


def _explained(error: jsonschema.ValidationError, guessed: Mapping[tuple[str, ...], set[str]]) -> bool:
    """Whether a missing key is the one an unknown key beside it was a typo for (``tpye`` for ``type``): said once."""
    near = guessed.get(tuple(map(str, error.absolute_path)), set())
    if not near:
        return False
    if error.validator == "required" and isinstance(error.instance, dict):
        return {k for k in error.validator_value if k not in error.instance} <= near
    # the case's own anyOf: a prompt, a prompt_file or messages
    return error.validator == "anyOf" and not error.absolute_path and any(
        set(branch.get("required", ())) <= near for branch in error.validator_value)


def _message(error: jsonschema.ValidationError) -> str:
    """What a schema error means, in the words of the fixture format."""
    path = list(error.absolute_path)
    if error.validator == "pattern" and path == ["id"]:
        return f"{error.instance!r} has whitespace: ids are single words (use - or _)"
    if error.validator == "pattern" and path == ["vars"]:
        return f"{error.instance!r} is not a variable name: letters, digits and _, not starting with a digit"
    if error.validator == "minItems" and len(path) == 2 and path[0] == "vars":
        return "an empty list: a matrix makes one case per value, so this one would make none"
    if error.validator == "type" and len(path) == 2 and path[0] == "vars":
        return (f"{error.instance!r} is not a variable's value: a string, number or boolean, a list of them (a matrix: "
                "one case per value), or {value: [...]} (a list sent as a list)")
    if error.validator == "anyOf" and not path:
        return "a case needs a 'prompt' or 'messages'"
    if error.validator == "not" and not path:
        return "give either 'completion' or 'recorded', not both"
    if error.validator == "enum":
        return enum_message(error)
    return error.message


def _schema_problems(raw: RawCase) -> list[Problem]:
    """The case against the case schema, one problem per mistake: a mistyped key is named with what it was meant to
    be, not also as that key missing (nor as every assertion type's demands on an entry without a type)."""
    errors = CASE_SCHEMA.errors(raw.data)
    if not errors:
        return []
    import jsonschema.exceptions  # only to word a problem: the fast check found one

    # the likeliest branch's own complaint; `recorded` is worded by its own validator
    errors = [jsonschema.exceptions.best_match([e]) if e.validator in ("oneOf", "anyOf") and e.absolute_path else e
              for e in errors if not (e.absolute_path and e.absolute_path[0] == "recorded")]
    unknown = [e for e in errors if e.validator == "additionalProperties" and isinstance(e.instance, dict)]
    guessed = {tuple(map(str, e.absolute_path)): {g for _, g in _unknown_keys(e) if g} for e in unknown}
    problems = []
    for error in errors:
        if any(error is e for e in unknown):
            problems += unknown_key_problems(raw, error)
        elif not _explained(error, guessed):
            field_name = _field_path(error)
            problems.append(Problem(raw.file, raw.line_of(field_name), field_name or None, _message(error)))
    return problems


_SURROGATE_WHY = "text holds a lone UTF-16 surrogate escape (e.g. \\ud800), which is not valid Unicode"


def not_json(value: Any, path: str = "") -> tuple[str, str] | None:
    """Where a loaded value is not plain JSON, and why: lone surrogates, NaN/Infinity, YAML-only types, non-text
    keys."""
    found = _not_json(value)
    if found is None:
        return None
    keys, why = found
    for key in reversed(keys):
        path = LONE_SURROGATE.sub("\ufffd", f"{path}.{key}" if path else str(key))
    return path, why


def _has_surrogate(text: str) -> bool:
    return not text.isascii() and LONE_SURROGATE.search(text) is not None


def _not_json(value: Any) -> tuple[list[Any], str] | None:
    """Why a value is not plain JSON, with the keys down to it innermost first: a path is only spelled out for a
    finding."""
    if isinstance(value, str):
        return ([], _SURROGATE_WHY) if _has_surrogate(value) else None
    if isinstance(value, float):
        return None if math.isfinite(value) else ([], f"{value} is not a JSON number (use null or a finite number)")
    if value is None or isinstance(value, (bool, int)):
        return None
    is_dict = isinstance(value, dict)
    if not is_dict and not isinstance(value, list):
        return [], f"a YAML {type(value).__name__} is not JSON: quote it"
    for key, item in value.items() if is_dict else enumerate(value):
        if is_dict and (type(key) is not str or not key.isascii()):  # an ASCII text key, the commonest, settled at once
            if not isinstance(key, str):
                return [key], f"key {key!r} is not text: quote it"
            if _has_surrogate(key):
                return [key], _SURROGATE_WHY
        kind = type(item)
        if kind is int or kind is bool or item is None or (kind is str and item.isascii()):
            continue  # the commonest leaves, settled without a call
        found = _not_json(item)
        if found is not None:
            found[0].append(key)
            return found
    return None


def _validated(raw: RawCase) -> tuple[list[Problem], list[tuple[str, Written]] | None]:
    """Problems with one case (the format schema, then each assertion's own value: a JSON Schema that is not one, say),
    and its assertions as written (``_raw_expectations``) when it read them."""
    if not isinstance(raw.data, dict):
        return [Problem(raw.file, raw.line, None, f"a case must be a mapping, got {type(raw.data).__name__}")], None
    if "recorded" in raw.data and set(raw.data) <= {"id", "recorded", "attempt_log"} and "attempt_log" in raw.data:
        return [Problem(raw.file, raw.line, None, f"{_RECORDINGS_LINE}: keep recordings outside the fixtures directory "
                        "and grade them with --replay FILE")], None
    problems = []
    recorded_problem = envelope_problem(raw.data["recorded"]) if "recorded" in raw.data else None
    if recorded_problem is not None:  # the envelope's own validator words it better than a failed oneOf
        problems.append(Problem(raw.file, raw.line_of("recorded"), recorded_problem[0], recorded_problem[1]))
    problems += _schema_problems(raw)
    case_id = raw.data.get("id")
    hidden = invisible_in(case_id) if isinstance(case_id, str) else []
    if hidden:  # two ids that differ by a zero-width space read the same in every report
        shown = reveal(str(case_id))
        why = f"'{shown}' holds invisible characters ({', '.join(hidden)}): an id must read as what it is"
        problems.append(Problem(raw.file, raw.line_of("id"), "id", why + "; write it with visible characters"))
    problems += [Problem(raw.file, raw.line_of(b), b, f"give either {a!r} or {b!r}, not both")
                 for a, b in _EITHER if a in raw.data and b in raw.data]
    found_not_json = None if raw.plain else not_json(raw.data)
    if found_not_json is not None:
        where, why = found_not_json
        problems.append(Problem(raw.file, raw.line_of(where), where or None, why))
        return problems, None  # such a case cannot be hashed or its schema checked
    written = _raw_expectations(raw.data)
    for where, expectation in written:
        check = expectation.kind.value_problem
        found = check(expectation.value) if check is not None and expectation.value is not None else None
        if found:
            inner, message = found
            problems.append(Problem(raw.file, raw.line_of(where), where + (f".{inner}" if inner else ""), message))
    return problems, written


def _raw_expectations(data: dict[str, Any]) -> list[tuple[str, Written]]:
    """A validated case's assertions, unprepared, each with where it is written: shorthands first, then ``assert``."""
    found = [(key, Written(kind, data[key], negated)) for key, (kind, negated) in shorthands().items() if key in data]
    items = data.get("assert")
    for index, item in enumerate(items if isinstance(items, list) else ()):
        kind_negated = lookup(item["type"]) if isinstance(item, dict) and isinstance(item.get("type"), str) else None
        if kind_negated is None:  # the schema has reported it already
            continue
        kind = kind_negated[0]
        value = ({"value": item.get("value"), **{k: item.get(k) for k in kind.entry_keys}} if kind.entry_keys
                 else item.get("value"))
        found.append((f"assert.{index}.value", Written(kind, value, kind_negated[1])))
    return found


def expectations_of(raw: RawCase, refs: FileRefs, written: list[tuple[str, Written]]) -> tuple[Expectation, ...]:
    """The case's assertions (``written``: as ``_raw_expectations`` found them) with their values prepared (schemas
    compiled, graders loaded) once; a value that cannot be is a problem on its line."""
    out = []
    for where, e in written:
        if e.kind.prepare is None or e.value is None:
            out.append(Expectation(e.kind, e.value, e.negated))  # nothing to prepare: as written
            continue
        try:
            prepared = e.kind.prepare(e.value, refs.path)
        except UsageError as exc:
            raise UsageError([Problem(raw.file, raw.line_of(where), where, p.message) for p in exc.problems]) from None
        out.append(Expectation(e.kind, prepared, e.negated))
    return tuple(out)


def references_of(data: dict[str, Any], written: list[tuple[str, Written]]) -> list[tuple[str, str]]:
    """(field, path) of every file a validated case names: its prompt files, its assertions' files (``written``)."""
    found = [(key, data[key]) for key in FILE_KEYS if key in data]
    for where, e in written:
        if e.kind.references is not None and e.value is not None:
            found += [(where, ref) for ref in e.kind.references(e.value)]
    return found


def _named_files(raw: RawCase, refs: FileRefs, written: list[tuple[str, Written]]) -> dict[str, str]:
    """The digest of each file the case names, by its fixtures-hash key; a missing file is a problem on its line."""
    files: dict[str, str] = {}
    problems = []
    for where, ref in references_of(raw.data, written):
        try:
            files[refs.key(ref)] = refs.digest(ref)
        except UsageError as exc:
            problems.append(Problem(raw.file, raw.line_of(where), where, str(exc)))
    if problems:
        raise UsageError(problems)
    return dict(sorted(files.items()))


def _messages(raw: RawCase, refs: FileRefs) -> tuple[dict[str, Any], ...]:
    """What the case sends, prompt files read and ``{{ name }}`` filled; every template problem on its line."""
    messages, found = render(raw.data, refs, raw.default_vars, raw.written_id)
    if found:
        raise UsageError([Problem(raw.file, raw.line_of(where), where, message) for where, message in found])
    return messages


class Written(NamedTuple):
    """An assertion as a case writes it, before its value is prepared: its type (the seam's own), value and form."""

    kind: AssertionType
    value: Any
    negated: bool


class Checked(NamedTuple):
    """What ``checked`` found of a case, for ``build_case``."""

    problems: list[Problem]
    digest: str | None  # when it has no problems
    written: list[tuple[str, Written]] | None  # its assertions as written


def checked(raw: RawCase) -> Checked:
    """A case's problems, its digest when it has none, and its assertions as validating read them."""
    problems, written = _validated(raw)
    return Checked(problems, None if problems else digest(raw.data), written)


def build_case(raw: RawCase, case_digest: str | None = None, refs: FileRefs | None = None,
               written: list[tuple[str, Written]] | None = None) -> Case:
    """A validated raw case as a frozen Case; the files it names are part of its digest.

    ``written``: its assertions as ``_raw_expectations`` reads them, when read already.
    ``case_digest``: the digest of its data, None to work it out here.
    """
    data = raw.data
    refs = refs or FileRefs.for_fixtures(Path(raw.file).parent)
    if written is None:
        written = _raw_expectations(data)  # read once: the files they name, then their prepared values
    files = _named_files(raw, refs, written)
    if files:  # the files it names are part of its digest: worked out here, where they were read
        case_digest = digest([data, files])
    elif case_digest is None:
        case_digest = digest(data)
    messages = _messages(raw, refs)
    recorded = data.get("recorded")
    untimed = answer_digest(data, files)
    if isinstance(recorded, dict):
        recorded = [recorded]
    return Case(
        id=data["id"],
        stratum=data.get("stratum"),
        messages=messages,
        file=raw.file,
        line=raw.line,
        digest=case_digest,
        expectations=expectations_of(raw, refs, written),
        timeout_s=data.get("timeout_s"),
        completion=data.get("completion"),
        recorded=tuple(recorded) if recorded else None,
        request={k: data[k] for k in _REQUEST_KEYS if k in data},
        files=files,
        tags=tuple(data.get("tags", ())),
        sources={role: data[key] for role, key in (("system", "system_file"), ("user", "prompt_file")) if key in data},
        answer_digest=untimed,
    )


_RECORDINGS_LINE = "this is a recordings line (--record output), not a case"


def _one_per_recordings_file(problems: list[Problem]) -> list[Problem]:
    """A recordings file left among the fixtures is one problem, not one per line."""
    counts: dict[str, int] = {}
    for p in problems:
        if p.message.startswith(_RECORDINGS_LINE):
            counts[p.file] = counts.get(p.file, 0) + 1
    out = [p for p in problems if not p.message.startswith(_RECORDINGS_LINE)]
    for file, count in counts.items():
        out.append(Problem(file, None, None,
                           f"this is a recordings file (--record output, {count} line(s)), not fixtures: "
                           "keep recordings outside the fixtures directory and grade them with --replay FILE, "
                           "or make them the fixtures' own answers with: envelope-ci import FILE --into DIR"))
    return out


def raw_cases(root: Path, exclude: set[Path], shown_root: str | None = None) -> tuple[list[RawCase], list[Problem]]:
    """Every case under ``root`` as read, in order, and the problems of the files that could not be read.

    Each file is parsed whole before its sidecar is read (``parse_file``): a file and its sidecar
    both broken report the file's problems.
    """
    problems: list[Problem] = []
    taken: list[RawCase] = []
    matrices = Matrices()  # a vars matrix is one case per combination from here on: sidecars and pins name each
    for path in case_files(root, exclude):
        shown = (Path(shown_root) / path.relative_to(root)).as_posix() if shown_root else path.as_posix()
        try:
            taken += attach_recorded(matrices.expand(parse_file(path, shown)), path, shown)
        except UsageError as exc:
            problems += exc.problems
    return taken, problems


def load_cases(root: Path, exclude: set[Path], shown_root: str | None = None) -> list[Case]:
    """Every case under ``root``, validated; all problems raised together."""
    if not root.is_dir():
        raise UsageError(f"{root}: not a directory of fixtures")
    cases: list[Case] = []
    first_seen: dict[str, str] = {}
    refs = FileRefs.for_fixtures(root)
    raws, problems = raw_cases(root, exclude, shown_root)
    raws.reverse()
    while raws:  # each raw case let go once built: held to the end beside the cases, they would double the peak
        raw = raws.pop()
        found, case_digest, written = checked(raw)
        if found:
            problems += found
            continue
        try:
            case = build_case(raw, case_digest, refs, written)
        except UsageError as exc:
            problems += exc.problems
            continue
        if case.id in first_seen:
            problems.append(Problem(raw.file, raw.line, "id",
                                    f"duplicate id {case.id!r} (first defined at {first_seen[case.id]})"))
            continue
        first_seen[case.id] = f"{raw.file}:{raw.line}" if raw.line else raw.file
        cases.append(case)
    if problems:
        # Once each: a problem in a file's defaults is found again in every case of the file.
        problems = list(dict.fromkeys(problems))
        # stable: file order, then as found
        raise UsageError(sorted(_one_per_recordings_file(problems), key=lambda p: p.file))
    if not cases:
        raise UsageError([Problem(root.as_posix(), None, None,
                                  f"no cases found (looked for {', '.join(CASE_SUFFIXES)} files)")])
    return cases
