"""Read and write the pins file: versioned canonical JSON, one case per line (docs/pins.md)."""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from ..canonical import canonical_json
from ..errors import Problem, UsageError
from ..model import Channel, Fingerprint, Label, Pin, Pins
from .files import read_text, resolve_link
from .parse import NotJSON, loads_strict
from .validate import FileSchema

PINS_FORMAT = "envelope-ci/pins"
PINS_VERSION = 1

_FINGERPRINT_SCHEMA = {
    "type": ["object", "null"],
    "properties": {
        "lane": {"type": "string"},
        "endpoint_class": {"type": "string"},
        "model_id": {"type": ["string", "null"]},
        "temperature": {"type": "number"},
        "grader_version": {"type": "string"},
        "judge": {"type": "string"},
    },
}
# The shape the code reads: a hand-edited or merged pins file fails here, not deep in a comparison.
PINS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "fixtures_hash": {"type": "string"},
        "files": {"type": "object", "additionalProperties": {"type": "string"}},
        "fingerprint": _FINGERPRINT_SCHEMA,
        "cases": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "properties": {
                    "hash": {"type": "string"},
                    "label": {"enum": [label.value for label in Label]},
                    "channel": {"enum": [channel.value for channel in Channel]},
                    "chars": {"type": ["integer", "null"], "minimum": 0},
                    "tokens": {"type": ["integer", "null"], "minimum": 0},
                    "tokens_estimated": {"type": "boolean"},
                    "ms": {"type": ["number", "null"], "minimum": 0},
                    "ms_p95": {"type": ["number", "null"], "minimum": 0},
                    "fingerprint": _FINGERPRINT_SCHEMA,
                    "level_ms": {"type": "number", "minimum": 0},
                    "answer": {"type": "string"},
                    "passes": {"type": "array", "prefixItems": [{"type": "integer", "minimum": 0},
                                                                {"type": "integer", "minimum": 1}],
                               "minItems": 2, "maxItems": 2},
                },
            },
        },
    },
}


_PINS = FileSchema(lambda: PINS_SCHEMA)


def pin_from_dict(data: Mapping[str, Any]) -> Pin:
    fp = data.get("fingerprint")
    return Pin(
        hash=str(data.get("hash", "")),
        label=str(data.get("label", "")),
        channel=str(data.get("channel", "")),
        chars=data.get("chars"),
        tokens=data.get("tokens"),
        tokens_estimated=bool(data.get("tokens_estimated", False)),
        ms=data.get("ms"),
        ms_p95=data.get("ms_p95"),
        fingerprint=Fingerprint.from_dict(fp) if isinstance(fp, dict) else None,
        level_ms=data.get("level_ms"),
        passes=_passes(data.get("passes")),
        answer=data.get("answer"),
    )


def _passes(value: Any) -> tuple[int, int] | None:
    """A pin's right repeats out of delivered ones (checked by ``parse_pins``), or None when it does not say."""
    return None if value is None else (int(value[0]), int(value[1]))


def _count_problems(data: Mapping[str, Any], text: str, shown: str) -> list[Problem]:
    """Pins that claim more right repeats than repeats: a count the schema's types cannot refuse."""
    return [Problem(shown, _case_line(text, ["cases", cid]), f"cases.{cid}.passes",
                    f"{p['passes'][0]} right out of {p['passes'][1]} repeats: more right than repeats")
            for cid, p in data["cases"].items()
            if isinstance(p, dict) and isinstance(p.get("passes"), list) and len(p["passes"]) == 2
            and p["passes"][0] > p["passes"][1]]


def unknown_keys(data: Mapping[str, Any]) -> tuple[str, ...]:
    """Keys a newer release may have added (docs/pins.md, "How the format evolves"): read past, each named once."""
    top = sorted(str(k) for k in data if k not in _TOP_KEYS)
    fingerprints = [data.get("fingerprint"),
                    *(p.get("fingerprint") for p in data["cases"].values() if isinstance(p, dict))]
    in_pins = sorted({f"cases.*.{k}" for p in data["cases"].values() if isinstance(p, dict)
                      for k in p if k not in _PIN_KEYS})
    in_fingerprints = sorted({f"fingerprint.{k}" for fp in fingerprints if isinstance(fp, dict)
                              for k in fp if k not in _FINGERPRINT_KEYS})
    return (*top, *in_pins, *in_fingerprints)


_TOP_KEYS = frozenset({"format", "version", *PINS_SCHEMA["properties"]})
_PIN_KEYS = frozenset(PINS_SCHEMA["properties"]["cases"]["additionalProperties"]["properties"])
_FINGERPRINT_KEYS = frozenset(_FINGERPRINT_SCHEMA["properties"])


def parse_pins(text: str, shown: str) -> Pins:
    """Pins from the text of a pins file (the head's, or the base branch's)."""
    try:
        data = loads_strict(text)
    except json.JSONDecodeError as exc:
        raise UsageError([Problem(shown, exc.lineno, None, f"malformed JSON: {exc.msg}")]) from None
    except NotJSON as exc:  # NaN in a hand-edited pin would end as a traceback when the pins are next written
        raise UsageError([Problem(shown, exc.line, None, str(exc))]) from None
    if not isinstance(data, dict) or data.get("format") != PINS_FORMAT or not isinstance(data.get("cases"), dict):
        raise UsageError([Problem(shown, None, "format",
                                  f"not an envelope-ci pins file (expected format {PINS_FORMAT!r})")])
    if data.get("version") != PINS_VERSION:
        raise UsageError([Problem(shown, None, "version",
                                  f"pins version {data.get('version')!r} is not supported (this is {PINS_VERSION})")])
    problems = []
    for error in _PINS.errors(data):
        path = [str(p) for p in error.absolute_path]
        problems.append(Problem(shown, _case_line(text, path), ".".join(path) or None, error.message))
    problems = problems or _count_problems(data, text, shown)
    if problems:
        raise UsageError(problems)
    fp = data.get("fingerprint")
    return Pins(
        fixtures_hash=str(data.get("fixtures_hash", "")),
        fingerprint=Fingerprint.from_dict(fp) if isinstance(fp, dict) else None,
        cases={cid: pin_from_dict(p) for cid, p in data["cases"].items() if isinstance(p, dict)},
        files=dict(data.get("files") or {}),
        unknown=unknown_keys(data),
    )


def _case_line(text: str, path: list[str]) -> int | None:
    """The line of a case's pin (the file holds one case per line), or None."""
    if len(path) < 2 or path[0] != "cases":
        return None
    match = re.search("^" + re.escape(json.dumps(path[1], ensure_ascii=False)) + r"\s*:", text, re.M)
    return text.count("\n", 0, match.start()) + 1 if match else None


def read_pins(path: Path) -> Pins | None:
    """The pins at ``path``, or None when there are none yet.

    The pins file is a PR's content like the fixtures, held to the same symlink rule: a symlink
    out of its folder (to ``/dev/zero``), a loop, a link to nothing, and anything but a regular
    file are bad input naming it, never "no pins yet" (which would pass a run with no baseline).
    """
    shown = path.as_posix()
    if path.is_symlink():
        resolved = resolve_link(path)
        if path.parent.resolve() not in resolved.parents:
            raise UsageError([Problem(shown, None, None, f"a symlink out of the pins file's folder "
                                      f"(to {resolved.as_posix()}): keep the pins a file of their own")])
        if not resolved.exists():
            raise UsageError([Problem(shown, None, None, f"a symlink to nothing (to {resolved.as_posix()}): "
                                      "delete it to start without pins, or point it at the pins")])
    elif not path.exists():
        return None
    if not path.is_file():
        raise UsageError([Problem(shown, None, None, "not a regular file: the pins are a JSON file (docs/pins.md)")])
    return parse_pins(read_text(path, shown), shown)


def render_pins(pins: Pins) -> str:
    """Canonical JSON, one case per line so a review diff shows which pins moved."""
    head = {
        "format": PINS_FORMAT,
        "version": PINS_VERSION,
        "fixtures_hash": pins.fixtures_hash,
        "fingerprint": msgspec.to_builtins(pins.fingerprint),
    }
    lines = [canonical_json(head)[:-1] + ',"files":{']
    files = sorted(pins.files.items())
    lines += [f"{canonical_json(path)}:{canonical_json(value)}" + ("," if i < len(files) - 1 else "")
              for i, (path, value) in enumerate(files)]
    lines.append('},"cases":{')
    items = sorted(pins.cases.items())
    for i, (cid, pin) in enumerate(items):
        lines.append(f"{canonical_json(cid)}:{canonical_json(msgspec.to_builtins(pin))}"
                     + ("," if i < len(items) - 1 else ""))
    lines.append("}}")
    return "\n".join(lines) + "\n"
