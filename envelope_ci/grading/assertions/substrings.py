"""The checks the ``contains-all`` / ``contains-any`` family shares, case-sensitive or not.

``fold`` is what both the answer and each needle go through before the comparison: ``str``
as they are, ``str.lower`` to ignore case. One wording for both, so the reasons read the same.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .base import Answer

Fold = Callable[[str], str]
Check = Callable[[Answer, list[str], Any], list[str]]


def all_of(fold: Fold) -> Check:
    """Every needle must appear: each missing one is a reason."""
    def check(answer: Answer, value: list[str], case: Any) -> list[str]:
        text = fold(answer.text)
        return [f"missing {needle!r}" for needle in value if fold(needle) not in text]
    return check


def not_all_of(fold: Fold) -> Check:
    """Not every needle may appear (``not-…-all``): one reason when all do."""
    def check(answer: Answer, value: list[str], case: Any) -> list[str]:
        text = fold(answer.text)
        return [f"contains all of {value!r}"] if value and all(fold(needle) in text for needle in value) else []
    return check


def any_of(fold: Fold) -> Check:
    """At least one needle must appear."""
    def check(answer: Answer, value: list[str], case: Any) -> list[str]:
        text = fold(answer.text)
        return [] if any(fold(needle) in text for needle in value) else [f"contains none of {value!r}"]
    return check


def none_of(fold: Fold) -> Check:
    """No needle may appear (``not-…-any``): each one found is a reason."""
    def check(answer: Answer, value: list[str], case: Any) -> list[str]:
        text = fold(answer.text)
        return [f"contains forbidden {needle!r}" for needle in value if fold(needle) in text]
    return check
