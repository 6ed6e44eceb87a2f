"""Plug-ins: the objects third-party packages register under an envelope_ci entry-point group."""
from __future__ import annotations

from importlib.metadata import entry_points
from typing import TypeVar

from .errors import UsageError

T = TypeVar("T")


def load_plugins(group: str, kind: type[T], what: str) -> list[T]:
    """Every object registered under ``group``; a plug-in that fails to load or is not a ``kind`` is bad input
    naming it."""
    found = []
    for ep in entry_points(group=group):
        try:
            obj = ep.load()
        except Exception as exc:  # a broken plug-in is the user's setup, not our crash
            raise UsageError(f"{what} plug-in {ep.name!r} ({ep.value}) failed to load: "
                             f"{type(exc).__name__}: {exc}") from None
        if not isinstance(obj, kind):
            raise UsageError(f"{what} plug-in {ep.name!r} ({ep.value}) is not an envelope_ci {kind.__name__}")
        found.append(obj)
    return found
