"""``run --filter``: which cases a partial run grades, by id glob, ``tag:NAME`` or ``stratum:NAME``.

A case is selected when it matches any filter. Every filter must match at least one case:
a typo that silently selects nothing would make a run that judged nothing look green.
"""
from __future__ import annotations

import difflib
from collections.abc import Sequence
from fnmatch import fnmatchcase

from ..errors import Problem, UsageError
from ..model import STRATA, UNSTRATIFIED, Case

_STRATUM_NAMES = (*STRATA, UNSTRATIFIED.name)
FILTER_HELP = ("id glob (refund-*), tag:NAME or stratum:NAME (easy, medium, stretch, unstratified); "
               "globs work in all three")


def filter_problem(spec: str) -> str | None:
    """Why a filter is malformed, before any case is read; None when it is usable."""
    kind, _, value = spec.partition(":") if spec.startswith(("tag:", "stratum:", "id:")) else ("id", "", spec)
    if not value.strip():
        return f"--filter {spec!r} is empty: give an id glob, tag:NAME or stratum:NAME"
    if kind == "stratum" and not any(fnmatchcase(name, value) for name in _STRATUM_NAMES):
        guess = difflib.get_close_matches(value, _STRATUM_NAMES, n=1)
        hint = f" (did you mean {guess[0]!r}?)" if guess else ""
        return f"--filter {spec!r}: no stratum is called {value!r}{hint}; strata are {', '.join(_STRATUM_NAMES)}"
    return None


def matches(case: Case, spec: str) -> bool:
    """Whether one case is selected by one filter."""
    if spec.startswith("tag:"):
        return any(fnmatchcase(tag, spec[4:]) for tag in case.tags)
    if spec.startswith("stratum:"):
        return fnmatchcase(case.stratum or UNSTRATIFIED.name, spec[8:])
    return fnmatchcase(case.id, spec[3:] if spec.startswith("id:") else spec)


def select_cases(cases: Sequence[Case], filters: Sequence[str]) -> list[Case]:
    """The cases any filter selects, in suite order; a filter that selects nothing is bad input."""
    unmatched = [spec for spec in filters if not any(matches(c, spec) for c in cases)]
    if unmatched:
        raise UsageError([Problem("", None, None,
                                  f"--filter {spec!r} matches none of the {len(cases)} case(s) in the fixtures")
                          for spec in unmatched])
    return [c for c in cases if any(matches(c, spec) for spec in filters)]
