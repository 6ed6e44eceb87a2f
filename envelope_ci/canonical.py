"""One canonical JSON encoding for every hash and every on-disk format.

Changing this function changes every fixture hash and every pins file: treat it as
part of the contract and bump the pins format version if you ever must.
"""
from __future__ import annotations

import hashlib
import json
import json.encoder
import re
from collections.abc import Callable
from typing import Any

# A lone UTF-16 surrogate (a JSON "\ud800" escape) is not Unicode text: it cannot be
# written as UTF-8, hashed canonically, or shown. Fixtures reject it; reports replace it.
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def json_encoder(*, sort_keys: bool, separators: tuple[str, str]) -> Callable[[Any], str]:
    """``JSONEncoder(sort_keys, separators, ensure_ascii=False, allow_nan=False).encode``, its C encoder made once.

    ``json.dumps`` with options builds a new ``JSONEncoder`` on each call, and ``encode`` a new C
    encoder: a quarter to a third of the time of a small value (a case, its schema, a report
    row) asked for hundreds of thousands of times. The C encoder writes what ``encode`` writes,
    as ``iterencode`` makes it, but without the check for cycles: every value encoded here is
    acyclic (parsed JSON, YAML whose aliases may not contain themselves, dataclass data).
    Without the C module (not CPython), ``encode`` itself.
    """
    plain = json.JSONEncoder(sort_keys=sort_keys, separators=separators, ensure_ascii=False, allow_nan=False)
    make_encoder = getattr(json.encoder, "c_make_encoder", None)
    if make_encoder is None:
        return plain.encode
    encode = make_encoder(None, plain.default, json.encoder.encode_basestring, None, plain.key_separator, plain.item_separator,
                          sort_keys, False, False)
    return lambda value: "".join(encode(value, 0))


# Asked of every case of a suite (its digest) and of every request checked against its recording.
_CANONICAL = json_encoder(sort_keys=True, separators=(",", ":"))


def canonical_json(value: Any) -> str:
    """Sorted keys, no insignificant whitespace, UTF-8 kept as is."""
    return _CANONICAL(value)


def digest(value: Any) -> str:
    """sha256 of the canonical JSON of ``value``, prefixed with the algorithm."""
    return "sha256:" + hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


def digest_bytes(data: bytes) -> str:
    """sha256 of raw bytes, prefixed with the algorithm."""
    return "sha256:" + hashlib.sha256(data).hexdigest()
