"""Spread a pure per-item function over the machine's cores, for inputs large enough to pay.

Only with the ``fork`` start method: the children inherit the items, so nothing but the
(small) results is pickled. Anywhere else, and for small inputs, it runs in-process.
"""
from __future__ import annotations

import multiprocessing
import os
from typing import Any, Callable, Sequence, TypeVar

T = TypeVar("T")
R = TypeVar("R")

# Below this many items a pool costs more than it saves.
MIN_ITEMS = 4000

_work: tuple[Callable[[Any], Any], Sequence[Any]] | None = None


def _run_slice(bounds: tuple[int, int]) -> list[Any]:
    assert _work is not None
    fn, items = _work
    return [fn(items[i]) for i in range(*bounds)]


def parallel_map(fn: Callable[[T], R], items: Sequence[T], min_items: int = MIN_ITEMS) -> list[R]:
    """``[fn(x) for x in items]``, in order, on every core when the input is large."""
    global _work
    workers = min(os.cpu_count() or 1, 8)
    if len(items) < min_items or workers < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return [fn(x) for x in items]
    step = -(-len(items) // workers)
    slices = [(i, min(i + step, len(items))) for i in range(0, len(items), step)]
    _work = (fn, items)
    try:
        with multiprocessing.get_context("fork").Pool(len(slices)) as pool:
            parts = pool.map(_run_slice, slices)
    finally:
        _work = None
    return [r for part in parts for r in part]
