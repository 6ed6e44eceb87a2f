"""Every fixtures hash, case digest and request digest of the bundled examples stays what it was before msgspec.

``tests/data/example_digests.json`` was written by the code before the move to msgspec (issue #23): the
same suites read now must give the same values, or every team's pins would say their fixtures changed.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from envelope_ci.model import PINS_NAME
from envelope_ci.sources.cases import load_cases
from envelope_ci.sources.files import hash_of_digests, suite_digests
from envelope_ci.sources.requests import request_record
from tests.support.suites import EXAMPLES

BEFORE = json.loads((Path(__file__).parents[1] / "data" / "example_digests.json").read_text("utf-8"))


@pytest.mark.parametrize("suite", sorted(BEFORE))
def test_an_example_suite_hashes_and_digests_as_before(suite: str) -> None:
    root = EXAMPLES / suite
    exclude = {(root / PINS_NAME).resolve()}
    cases = load_cases(root, exclude, shown_root=".")
    now = {
        "fixtures_hash": hash_of_digests(suite_digests(root, exclude, cases)),
        "cases": {c.id: c.digest for c in cases},
        "requests": {c.id: request_record(c, "gpt-4o-mini-2024-07-18", 0.0)["digest"] for c in cases},
    }
    assert now == BEFORE[suite]


def test_the_recorded_digests_cover_every_example_case() -> None:
    assert sum(len(suite["cases"]) for suite in BEFORE.values()) >= 100
