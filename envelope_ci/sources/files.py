"""Locating and reading the fixtures directory: which files belong to it, their bytes, their digests."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from ..canonical import digest, digest_bytes
from ..errors import Problem, UsageError
from ..model import CONFIG_NAMES, PINS_NAME, Case

CASE_SUFFIXES = (".yaml", ".yml", ".json", ".jsonl")


def is_hidden(rel: Path) -> bool:
    return any(part.startswith(".") or part == "__pycache__" for part in rel.parts)


def fixture_files(root: Path, exclude: set[Path]) -> list[Path]:
    """Every file that belongs to the fixtures (hashed), sorted, minus excluded files and folders."""
    out = []
    for path in sorted(root.rglob("*")):
        resolved = path.resolve()
        if path.is_file() and not is_hidden(path.relative_to(root)) and not (resolved in exclude or exclude.intersection(resolved.parents)):
            out.append(path)
    return out


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


def case_files(root: Path, exclude: set[Path]) -> list[Path]:
    """The files that hold cases: data files that are not a pins file or the config.

    A file named like the pins is never a case, even when ``--pins`` points elsewhere.
    """
    return [p for p in fixture_files(root, exclude) if p.suffix in CASE_SUFFIXES and p.name not in (*CONFIG_NAMES, PINS_NAME)]


def read_text(path: Path, shown: str) -> str:
    """UTF-8 text of a user file, or a problem naming the line of the first bad byte."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise UsageError([Problem(shown, line, None, f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})")]) from None


