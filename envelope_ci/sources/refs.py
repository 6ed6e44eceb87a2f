"""Files a case names (a prompt file, a grader): resolved inside the repository, read once, digested.

A path is relative to the fixtures directory, or to the repository root when it starts with
``/``. Each named file is part of the fixtures hash and of the digest of every case that
names it, so editing a prompt file is a fixture change the pins must accept.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..canonical import digest_bytes
from ..errors import UsageError


def repo_root_of(root: Path) -> Path:
    """The repository holding the fixtures: the nearest folder with a ``.git``, else the fixtures directory."""
    start = root.resolve()
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    return start


@dataclass
class FileRefs:
    """Resolves, reads and digests the files cases name, each once per run."""

    root: Path
    repo_root: Path
    _read: dict[str, bytes] = field(default_factory=dict)

    @classmethod
    def for_fixtures(cls, root: Path) -> FileRefs:
        return cls(root, repo_root_of(root))

    def path(self, ref: str) -> Path:
        """Where a named file is: under the repository root for ``/x``, else under the fixtures directory."""
        return self.repo_root / ref.lstrip("/") if ref.startswith("/") else self.root / ref

    def key(self, ref: str) -> str:
        """The file's name in the fixtures hash: its path in the fixtures directory, else as written from the root."""
        try:
            return self.path(ref).resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return "/" + self.path(ref).resolve().relative_to(self.repo_root.resolve()).as_posix()

    def read(self, ref: str) -> bytes:
        """The file's bytes; UsageError (naming it) when it is missing or outside the repository."""
        if ref not in self._read:
            path = self.path(ref)
            try:
                path.resolve().relative_to(self.repo_root.resolve())
            except ValueError:
                raise UsageError(f"{ref}: outside the repository {self.repo_root.as_posix()}") from None
            if not path.is_file():
                raise UsageError(f"{ref}: file not found (looked at {path.as_posix()})")
            self._read[ref] = path.read_bytes()
        return self._read[ref]

    def text(self, ref: str) -> str:
        """The file as UTF-8 text."""
        try:
            return self.read(ref).decode("utf-8-sig")
        except UnicodeDecodeError:
            raise UsageError(f"{ref}: not UTF-8 text") from None

    def digest(self, ref: str) -> str:
        return digest_bytes(self.read(ref))
