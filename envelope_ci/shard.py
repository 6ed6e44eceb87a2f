"""``run --shard I/N``: a stable partition of the suite by the hash of each case id, balanced within one case."""
from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from .model import Case

SHARD_HELP = ("grade only shard I of N (e.g. 2/4): the cases whose id hashes into it, balanced within one case. "
              "The shard checks the whole suite but judges no strata, so its report is provisional (at best exit 3): "
              "`envelope-ci merge` of every shard's report.json gives the run's verdict")


@dataclass(frozen=True)
class ShardSpec:
    """Shard ``index`` (counted from 1) of ``count``."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> ShardSpec:
    """``I/N`` with 1 <= I <= N; ValueError saying what is wrong."""
    found = re.fullmatch(r"\s*([0-9]{1,6})\s*/\s*([0-9]{1,6})\s*", text)
    if not found:
        raise ValueError(f"{text!r} is not I/N, shard I of N counted from 1 (e.g. 2/4)")
    spec = ShardSpec(int(found[1]), int(found[2]))
    if not 1 <= spec.index <= spec.count:
        raise ValueError(f"{text!r}: I must be from 1 to N")
    return spec


def shard_numbers(ids: Sequence[str], count: int) -> list[int]:
    """Each id's shard (from 1): ids in the order of their sha256, cut into ``count`` runs whose sizes differ by at
    most one.

    Both asks of a partition cannot hold at once: if adding a case never moved another, each
    id would keep one shard for good, and some suite would then put two cases in one shard and
    none in another. Runs keep the balance exact and move little: adding a case shifts the
    cases after it in hash order by one place, so only those at the ``count - 1`` cut points
    can cross into a neighbouring shard, however large the suite. Dealing the ordered ids
    round-robin would move about half of them; ``hash mod N`` moves none but leaves shards
    about sqrt(n / N) apart.
    """
    order = sorted(range(len(ids)), key=lambda i: hashlib.sha256(ids[i].encode("utf-8")).digest())
    numbers = [0] * len(ids)
    for rank, i in enumerate(order):
        numbers[i] = rank * count // len(ids) + 1
    return numbers


def select(cases: Sequence[Case], spec: ShardSpec) -> list[Case]:
    """The shard's cases, in suite order."""
    numbers = shard_numbers([c.id for c in cases], spec.count)
    return [c for c, number in zip(cases, numbers, strict=True) if number == spec.index]


def blocker(spec: ShardSpec | None, graded: int, total: int) -> str | None:
    """Why a shard cannot pass on its own: strata are judged on the whole suite only."""
    if spec is None:
        return None
    return (f"shard {spec}: graded {graded} of {total} case(s), so strata were not judged and this verdict is "
            "provisional; "
            "run envelope-ci merge over every shard's report.json for the run's verdict")


def note(spec: ShardSpec, graded: int, total: int) -> str:
    """What a shard's report is, for whoever reads it alone."""
    return (f"shard {spec}: graded {graded} of the suite's {total} case(s), chosen by the hash of their ids; "
            "the fixtures were checked in full, so the fixtures, fingerprint and pin findings hold for the whole run, "
            "and a regression here fails it; strata are judged by envelope-ci merge")
