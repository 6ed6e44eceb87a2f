"""JSON equality, for assertions that compare a value in the answer with one in the case."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def json_equal(one: Any, two: Any) -> bool:
    """Whether two parsed JSON values are the same JSON value, as JSON Schema's ``const`` and ``enum`` compare them.

    Python's ``==`` is not that: it finds ``True == 1`` and ``[False] == [0]``, which JSON keeps
    apart (a boolean is never a number), in containers too. Numbers compare by value, so ``2``
    equals ``2.0``; lists by position, objects by key, both recursively.
    """
    if one is two:
        return True
    if isinstance(one, str) or isinstance(two, str):
        return bool(one == two)
    if isinstance(one, Sequence) and isinstance(two, Sequence):
        return len(one) == len(two) and all(json_equal(a, b) for a, b in zip(one, two, strict=True))
    if isinstance(one, Mapping) and isinstance(two, Mapping):
        return len(one) == len(two) and all(key in two and json_equal(value, two[key]) for key, value in one.items())
    if isinstance(one, bool) or isinstance(two, bool):
        return isinstance(one, bool) and isinstance(two, bool) and one == two
    return bool(one == two)
