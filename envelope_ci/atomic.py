"""Files written whole or not at all: a kill mid-write never leaves a half pins file or report.

Each file is written to a temporary sibling, flushed to disk, then renamed over the target
(a rename within one directory is atomic on POSIX), so a reader sees the old file or the new.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path


def write_text(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8) atomically."""
    write_parts(path, (text,))


def write_parts(path: Path, parts: Iterable[str]) -> None:
    """Replace ``path`` with the text of ``parts`` (UTF-8) atomically, each part written as it comes (a text made in parts is never whole)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.writelines(parts)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise
    _sync_directory(path.parent)


def _sync_directory(folder: Path) -> None:
    """Make the rename itself durable (best effort: not every file system allows it)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
