"""One canonical JSON encoding for every hash and every on-disk format.

Changing this function changes every fixture hash and every pins file: treat it as
part of the contract and bump the pins format version if you ever must.
"""
from __future__ import annotations

import hashlib
import json
import re
from typing import Any

# A lone UTF-16 surrogate (a JSON "\ud800" escape) is not Unicode text: it cannot be
# written as UTF-8, hashed canonically, or shown. Fixtures reject it; reports replace it.
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


# One encoder for every hash: made once, asked of every case of a suite and every request checked against its recording.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


def canonical_json(value: Any) -> str:
    """Sorted keys, no insignificant whitespace, UTF-8 kept as is."""
    return _CANONICAL(value)


def digest(value: Any) -> str:
    """sha256 of the canonical JSON of ``value``, prefixed with the algorithm."""
    return "sha256:" + hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


def digest_bytes(data: bytes) -> str:
    """sha256 of raw bytes, prefixed with the algorithm."""
    return "sha256:" + hashlib.sha256(data).hexdigest()
