"""Lanes and fingerprints: how many cases were compared like-for-like with their pin."""
from __future__ import annotations

from collections.abc import Sequence

from ..findings import LaneStats
from .cases import Judged


def lanes_report(results: Sequence[Judged]) -> LaneStats:
    """How many cases were judged like-for-like against their pin, and what flipped."""
    matched = mismatched = flips = unpinned = undelivered = 0
    flipped: list[str] = []
    for r in results:
        if r.pin is None:
            unpinned += 1
        elif not r.delivered:  # no response, no fingerprint: nothing was compared
            undelivered += 1
        elif r.comparable:
            matched += 1
            if r.pin.label != r.label.value:
                flips += 1
                flipped.append(r.id)
        else:
            mismatched += 1
    return LaneStats(
        matched_fingerprints=matched,
        fingerprint_mismatches=mismatched,
        grade_flips=flips,
        flipped=tuple(flipped),
        unpinned=unpinned,
        undelivered=undelivered,
    )
