"""What every part of the promptfoo import shares: an item listed as not converted, the config's files (read
under its folder, capped), and config values as IMPORT.md shows them, never one that may hold a key."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...formats.escape import clean
from ..refs import MAX_FILE_BYTES

# Keys whose values may hold a key or a token: IMPORT.md and --dry-run show the path to them, never the value.
_SECRET_KEYS = frozenset({"env", "apikey", "headers", "config", "provider", "authorization", "password", "secret"})
_PATH_PARTS = re.compile(r"[.\[\]]+")
_BACKTICKS = re.compile(r"`+")


@dataclass(frozen=True)
class Skipped:
    """One item of the config that was not converted, or was converted with a change, and why."""

    where: str
    what: str
    why: str

    def line(self) -> str:
        return f"- {code_span(self.where, 160)}: {self.what} — {' '.join(clean(self.why).split())}"


@dataclass
class Source:
    """The files a config names, read relative to its folder, capped as fixture files are."""

    folder: Path

    def read(self, ref: str) -> str:
        """The text of ``ref``, refused when absolute or when it resolves (symlinks followed) outside the folder."""
        root = self.folder.resolve()
        path = (root / ref).resolve()
        if Path(ref).is_absolute() or ref.startswith(("/", "\\")) or not path.is_relative_to(root):
            raise ValueError("is outside the config's folder (an absolute path, .. or a symlink out of it): "
                             "import reads only files under the config's folder")
        return read_capped(path)


def read_capped(path: Path) -> str:
    """A file's text, refused past the cap fixtures' files have (a prompt file is a prompt)."""
    try:
        with path.open("rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ValueError(f"cannot be read: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise ValueError(f"is over {MAX_FILE_BYTES // 1024} KiB")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError("is not UTF-8") from None


def file_ref(value: Any) -> str | None:
    """The path of a promptfoo ``file://`` reference, else None."""
    return value[len("file://"):] if isinstance(value, str) and value.startswith("file://") else None


def code_span(text: str, limit: int = 80) -> str:
    """Config text as one Markdown code span, one line, fenced past any backtick run so nothing breaks out of it."""
    flat = " ".join(clean(text).split())
    flat = flat[: limit - 3] + "..." if len(flat) > limit else flat
    if not flat:
        return "(empty)"
    fence = "`" * (max((len(run) for run in _BACKTICKS.findall(flat)), default=0) + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def shown_value(value: Any) -> str:
    """A config value as IMPORT.md quotes it, short."""
    return code_span(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))


def _secret(key: Any) -> bool:
    """Whether a key names a value that may be a key (``apiKey``, ``env``, ``headers``, a provider's ``config``)."""
    return str(key).lower().replace("_", "").replace("-", "") in _SECRET_KEYS


def _holds_secret(value: Any) -> bool:
    """Whether a value holds, at any depth, a key whose value may be a key."""
    if isinstance(value, dict):
        return any(_secret(k) or _holds_secret(v) for k, v in value.items())
    return isinstance(value, list) and any(_holds_secret(v) for v in value)


def shown_at(where: str, value: Any) -> str:
    """The value at ``where`` as IMPORT.md quotes it; only its path when it is, or holds, what may be a key."""
    if any(_secret(part) for part in _PATH_PARTS.split(where)) or _holds_secret(value):
        return "a value not shown (it may hold a key)"
    return shown_value(value)
