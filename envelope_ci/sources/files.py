"""Locating and reading the fixtures directory: which files belong to it, their bytes, their digests."""
from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from ..canonical import digest, digest_bytes
from ..errors import Problem, UsageError
from ..model import CONFIG_NAMES, PINS_NAME, RECORDED_SUFFIX, Case

CASE_SUFFIXES = (".yaml", ".yml", ".json", ".jsonl")


def is_hidden(rel: Path) -> bool:
    return any(part.startswith(".") or part == "__pycache__" for part in rel.parts)


def fixture_files(root: Path, exclude: set[Path]) -> list[Path]:
    """Every file that belongs to the fixtures (hashed), sorted, minus excluded files and folders.

    A symlink that leaves the fixtures directory (to ``/etc/passwd``, say), a symlink loop and a
    folder that cannot be read are bad input: reading the one or skipping the other silently
    would hash or grade something other than the fixtures.
    """
    top = root.resolve()
    out = []
    for path in sorted(_walk(root)):
        if is_hidden(path.relative_to(root)):
            continue
        resolved = resolve_link(path)
        if resolved in exclude or exclude.intersection(resolved.parents):
            continue
        if path.is_symlink() and top not in resolved.parents:
            raise UsageError([Problem(path.as_posix(), None, None,
                                      f"a symlink out of the fixtures directory (to {resolved.as_posix()}): "
                                      "copy the file in, or name it from a case")])
        if path.is_file():
            out.append(path)
    return out


def resolve_link(path: Path) -> Path:
    """``path`` resolved; a symlink loop is bad input naming it (not a RuntimeError, or an OSError from Python 3.13)."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        raise UsageError([Problem(path.as_posix(), None, None, "a symlink loop, which leads to no file: "
                                  "point it at a file, or delete it")]) from None


def _walk(root: Path) -> list[Path]:
    """Every entry under ``root``, not descending into symlinked folders; an unreadable folder is an error."""
    def refuse(error: OSError) -> None:
        raise UsageError([Problem(str(error.filename or root), None, None,
                                  f"cannot read this folder of the fixtures: {error.strerror or error}")])

    found = []
    for folder, dirs, files in os.walk(root, onerror=refuse):
        base = Path(folder)
        found += [base / name for name in files]
        found += [base / name for name in dirs if (base / name).is_symlink()]  # checked, never entered
    return found


def fixture_digests(root: Path, exclude: set[Path]) -> dict[str, str]:
    """Each fixtures file (relative POSIX path) and the digest of its bytes, sorted by path."""
    return {p.relative_to(root).as_posix(): digest_bytes(p.read_bytes()) for p in fixture_files(root, exclude)}


def hash_of_digests(digests: Mapping[str, str]) -> str:
    """The fixtures hash: one digest over every (path, file digest) pair."""
    return digest([[path, value] for path, value in sorted(digests.items())])


def suite_digests(root: Path, exclude: set[Path], cases: Iterable[Case]) -> dict[str, str]:
    """Every fixtures file's digest, and those of the files cases name from outside the directory (a prompt file)."""
    digests = fixture_digests(root, exclude)
    digests.update({key: value for case in cases for key, value in case.files.items() if key not in digests})
    return dict(sorted(digests.items()))


def is_read(name: str) -> bool:
    """Whether a (not hidden) file of this name in the fixtures directory is read: for cases, or as a case file's
    recorded envelopes."""
    return Path(name).suffix in CASE_SUFFIXES and name not in (*CONFIG_NAMES, PINS_NAME)


def case_files(root: Path, exclude: set[Path]) -> list[Path]:
    """The files that hold cases: data files that are not a pins file, the config or a recorded sidecar.

    A file named like the pins is never a case, even when ``--pins`` points elsewhere. A
    sidecar (``cases.yaml.recorded.jsonl``) is read with its case file; one whose case file
    is gone is an error, not silently ignored recordings.
    """
    files = fixture_files(root, exclude)
    cases = [p for p in files if is_read(p.name) and not p.name.endswith(RECORDED_SUFFIX)]
    orphans = [p for p in files
               if p.name.endswith(RECORDED_SUFFIX) and p.with_name(p.name[: -len(RECORDED_SUFFIX)]) not in cases]
    if orphans:
        raise UsageError([Problem(p.as_posix(), None, None,
                                  f"recorded envelopes of {p.name[: -len(RECORDED_SUFFIX)]}, "
                                  "which holds no cases here: "
                                  "rename it with its fixture file, or delete it") for p in orphans])
    return cases


def read_text(path: Path, shown: str) -> str:
    """UTF-8 text of a user file, or a problem naming the line of the first bad byte."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise UsageError([Problem(shown, line, None,
                                  f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})")]) from None


