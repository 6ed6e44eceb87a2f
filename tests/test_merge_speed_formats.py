"""The fast paths a 100k-case merge writes its reports with say exactly what the general ones say."""
from __future__ import annotations

import json

import pytest

from envelope_ci.formats.markdown import _fmt_tenths, _fmt_whole, fmt_num
from envelope_ci.model import Channel, Gate, Label, Outcome

NUMBERS = [None, 0, 7, -3, 10**12, 0.0, 0.05, 0.15, 2.5, 3.5, 329.84999, -1.25, 1e16, True, False]


@pytest.mark.parametrize("value", NUMBERS)
def test_whole_and_tenths_are_fmt_num(value: object) -> None:
    assert _fmt_whole(value) == fmt_num(value)
    assert _fmt_tenths(value) == fmt_num(value, 1)


ROWS = [
    {"id": "case-1", "label": Label.RIGHT, "channel": Channel.STABLE, "outcome": Outcome.NEW, "gate": Gate.PASS},
    {"text": "ünïcode ✓ \u2028 \"quoted\" \\ back\nslash\t\x01", "nested": {"list": [1, 2.5, None, True], "tuple": ("a", "b")}},
    {"floats": [0.1, 1e-7, 1e22, -0.0, 123456789.123456789], "empty": {}, "none": None},
    "a bare string",
    42,
]


@pytest.mark.parametrize("value", ROWS)
def test_the_canonical_encoder_writes_what_json_dumps_writes(value: object) -> None:
    from envelope_ci.canonical import canonical_json

    assert canonical_json(value) == json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
