"""Files a case names (a prompt file, a grader): resolved inside the repository, read once, digested.

A path is relative to the fixtures directory, or to the repository root when it starts with
``/``. Each named file is part of the fixtures hash and of the digest of every case that
names it, so editing a prompt file is a fixture change the pins must accept.

A named file is content a PR chooses, so it is held to what a prompt is: never in ``.git``
(where a clone keeps its config, hooks and the history), and at most ``MAX_FILE_BYTES``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..canonical import digest_bytes
from ..errors import UsageError

# The most a file a case names (a prompt or system file, a grader) may hold: a prompt file is a prompt.
MAX_FILE_BYTES = 256 * 1024

def repo_root_of(root: Path) -> Path:
    """The repository holding the fixtures: the nearest folder with a ``.git``, else the fixtures directory."""
    start = root.resolve()
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    return start


@dataclass
class FileRefs:
    """Resolves, reads and digests the files cases name, each once per run.

    One per suite: ``rendered`` counts the characters its cases have rendered so far, which
    ``templates.render`` holds to the suite's cap.
    """

    root: Path
    repo_root: Path
    _read: dict[str, bytes] = field(default_factory=dict)
    rendered: int = 0

    @classmethod
    def for_fixtures(cls, root: Path) -> FileRefs:
        return cls(root, repo_root_of(root))

    def path(self, ref: str) -> Path:
        """Where a named file is: under the repository root for ``/x``, else under the fixtures directory."""
        return self.repo_root / ref.lstrip("/") if ref.startswith("/") else self.root / ref

    def key(self, ref: str) -> str:
        """The file's name in the fixtures hash: its path in the fixtures directory, else as written from the root."""
        resolved = self._checked(ref).resolve()
        try:
            return resolved.relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return "/" + resolved.relative_to(self.repo_root.resolve()).as_posix()

    def read(self, ref: str) -> bytes:
        """The file's bytes; UsageError (naming it) when it is missing, outside the repository, in .git or too big."""
        if ref not in self._read:
            path = self._checked(ref)
            with path.open("rb") as fh:  # never more than the cap, even from a file that grows while it is read
                data = fh.read(MAX_FILE_BYTES + 1)
            if len(data) > MAX_FILE_BYTES:
                raise _too_big(ref)
            self._read[ref] = data
        return self._read[ref]

    def _checked(self, ref: str) -> Path:
        """Where ``ref`` leads, once it is known to be a file of the repository outside ``.git``."""
        path = self.path(ref)
        try:
            resolved = path.resolve()
        except (OSError, RuntimeError):  # a symlink loop: RuntimeError before Python 3.13, OSError (ELOOP) after
            raise UsageError(f"{ref}: a symlink loop (looked at {path.as_posix()})") from None
        try:
            inside = resolved.relative_to(self.repo_root.resolve())
        except ValueError:
            raise UsageError(f"{ref}: outside the repository {self.repo_root.as_posix()}") from None
        # As written (``a/.git/../x`` names no file of .git, but says what it was after) and where it leads.
        if any(part.lower() == ".git" for part in (*Path(ref).parts, *inside.parts)):
            raise UsageError(f"{ref}: in .git, which holds the clone's config, hooks and history, not fixtures: "
                             "name a file of the working tree")
        if not path.is_file():
            raise UsageError(f"{ref}: file not found (looked at {path.as_posix()})")
        if path.stat().st_size > MAX_FILE_BYTES:
            raise _too_big(ref)
        return path

    def text(self, ref: str) -> str:
        """The file as UTF-8 text."""
        try:
            return self.read(ref).decode("utf-8-sig")
        except UnicodeDecodeError:
            raise UsageError(f"{ref}: not UTF-8 text") from None

    def digest(self, ref: str) -> str:
        return digest_bytes(self.read(ref))


def _too_big(ref: str) -> UsageError:
    return UsageError(f"{ref}: larger than {MAX_FILE_BYTES // 1024} KiB, the most a file a case names may hold "
                      "(a prompt file is a prompt): cut it down")
