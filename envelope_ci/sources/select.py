"""``run --filter``: which cases a partial run grades, by id or id glob, ``tag:NAME`` or ``stratum:NAME``.

A case is selected when it matches any filter. Every filter must match at least one case:
a typo that silently selects nothing would make a run that judged nothing look green. An id
filter that is exactly a case's id selects that case alone, before it is read as a glob: a vars
matrix's ids (``refund-window[city=Paris]``) hold ``[``, which a glob reads as a set of characters.
"""
from __future__ import annotations

import difflib
from collections.abc import Container, Sequence
from fnmatch import fnmatchcase

from ..errors import Problem, UsageError
from ..model import STRATA, UNSTRATIFIED, Case

_STRATUM_NAMES = (*STRATA, UNSTRATIFIED.name)
FILTER_HELP = ("id or id glob (refund-*; an exact id is matched as written first), tag:NAME or stratum:NAME "
               "(easy, medium, stretch, unstratified); globs work in all three")


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


def matches(case: Case, spec: str, ids: Container[str] = ()) -> bool:
    """Whether one case is selected by one filter; an id filter that is one of ``ids`` (the suite's) is that id only."""
    if spec.startswith("tag:"):
        return any(fnmatchcase(tag, spec[4:]) for tag in case.tags)
    if spec.startswith("stratum:"):
        return fnmatchcase(case.stratum or UNSTRATIFIED.name, spec[8:])
    pattern = spec[3:] if spec.startswith("id:") else spec
    return case.id == pattern if pattern in ids else fnmatchcase(case.id, pattern)


def select_cases(cases: Sequence[Case], filters: Sequence[str]) -> list[Case]:
    """The cases any filter selects, in suite order; a filter that selects nothing is bad input."""
    ids = {c.id for c in cases}
    unmatched = [spec for spec in filters if not any(matches(c, spec, ids) for c in cases)]
    if unmatched:
        raise UsageError([Problem("", None, None,
                                  f"--filter {spec!r} matches none of the {len(cases)} case(s) in the fixtures")
                          for spec in unmatched])
    return [c for c in cases if any(matches(c, spec, ids) for spec in filters)]
