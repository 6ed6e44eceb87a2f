"""Canonical JSON, the text everything hashed goes through: exactly what ``json.dumps`` writes with sorted keys."""
from __future__ import annotations

import json

import pytest

from envelope_ci.canonical import canonical_json
from envelope_ci.model import Channel, Gate, Label, Outcome

VALUES = [
    {"id": "case-1", "label": Label.RIGHT, "channel": Channel.STABLE, "outcome": Outcome.NEW, "gate": Gate.PASS},
    {"text": "ünïcode ✓ \u2028 \"quoted\" \\ back\nslash\t\x01",
     "nested": {"list": [1, 2.5, None, True], "tuple": ("a", "b")}},
    {"floats": [0.1, 1e-7, 1e22, -0.0, 123456789.123456789], "empty": {}, "none": None},
    "a bare string",
    42,
]


@pytest.mark.parametrize("value", VALUES)
def test_the_canonical_encoder_writes_what_json_dumps_writes(value: object) -> None:
    expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    assert canonical_json(value) == expected
