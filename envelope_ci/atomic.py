"""Files written whole or not at all: a kill mid-write never leaves a half pins file or report.

Each file is written to a temporary sibling, flushed to disk, then renamed over the target
(a rename within one directory is atomic on POSIX), so a reader sees the old file or the new.
The file gets the mode any new file gets, ``0666 & ~umask`` (0644 under the usual umask 022):
the next step of a job (an upload, a reviewer's tool, a container of another user) can read it.
"""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path


def write_text(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8) atomically."""
    write_parts(path, (text,))


def write_parts(path: Path, parts: Iterable[str]) -> None:
    """Replace ``path`` with the text of ``parts`` (UTF-8) atomically, each part written as it comes (a text made in
    parts is never whole)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = _create_sibling(path)
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


def _create_sibling(path: Path) -> tuple[int, str]:
    """A new, empty temporary file beside ``path``, opened for writing with mode ``0666 & ~umask``.

    Not ``tempfile.mkstemp``: it makes every file 0600, whatever the umask. ``O_EXCL`` still
    refuses a name that exists (a symlink planted there included), as mkstemp does.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        temp = str(path.parent / f".{path.name}.{os.urandom(6).hex()}.tmp")
        try:
            return os.open(temp, flags, 0o666), temp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path}")


def _sync_directory(folder: Path) -> None:
    """Make the rename itself durable (best effort: not every file system allows it)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
