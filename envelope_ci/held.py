"""What a command is done with, kept alive to the process's exit when the process leaves at once after it.

The console script leaves by ``os._exit`` as soon as its command returns (``cli.console``), and
the OS takes a process's memory back at once. Freed one by one instead, a 100,000-case run's
envelopes after grading, then its cases, grades and analysis before its reports were written,
cost 0.5-0.7 s of its one busy core. Held, its peak is 30 MB higher: its reports are written in
parts (``atomic.write_parts``), so they need little of the room that freeing would leave.
Library calls free them as usual.

A module of its own, importing nothing: every command of the console script enters the block.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

# What was held, in the order it was let go of: never freed before the exit.
_HELD: list[object] = []
_holding = False


@contextmanager
def holding_to_exit() -> Iterator[None]:
    """Within: what a command is done with (``hold_to_exit``) stays alive to the process's exit."""
    global _holding
    outer, _holding = _holding, True
    try:
        yield
    finally:
        _holding = outer


def hold_to_exit(*objects: object) -> None:
    """The caller is done with ``objects``: within ``holding_to_exit`` they stay alive to the exit, else they go as usual."""
    if _holding:
        _HELD.append(objects)
