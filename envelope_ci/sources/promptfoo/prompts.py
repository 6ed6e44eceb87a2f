"""promptfoo's prompts as case keys: inline text, chat JSON, and files, ``file://`` or not (chat data as ``messages``,
text copied as a ``prompt_file``); a prompt made by code is never run."""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import UsageError
from ..files import CASE_SUFFIXES
from ..parse import loads_strict, parse_yaml_document
from ..templates import PLACEHOLDER
from .shown import Skipped, Source, code_span, file_ref, shown_at, shown_value

NUNJUCKS = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", re.DOTALL)
# promptfoo's VALID_FILE_EXTENSIONS (src/prompts/constants.ts): a prompt string ending in one names a file.
_PATH_SUFFIXES = (".cjs", ".cts", ".js", ".json", ".jsonl", ".mjs", ".mts", ".py", ".ts", ".txt", ".yml", ".yaml")
_GLOB = re.compile(r"[*?\[\]]")


@dataclass(frozen=True)
class Prompt:
    """One promptfoo prompt as the case keys that send it, with its text for placeholders and the files it needs."""

    keys: dict[str, Any]
    text: str
    files: dict[str, str]
    renamed: str | None = None  # the copied file's name when its own would be read as a case file


def _chat(data: Any) -> list[dict[str, Any]] | None:
    """promptfoo's chat format (a list of ``{role, content}``), else None."""
    if isinstance(data, list) and data and all(isinstance(m, dict) and "role" in m and "content" in m for m in data):
        return data
    return None


def _messages_text(messages: list[dict[str, Any]]) -> str:
    """Every text a chat prompt sends, for its placeholders."""
    return "\n".join(m["content"] if isinstance(m["content"], str) else json.dumps(m["content"]) for m in messages)


def _prompt_file(ref: str, source: Source, taken: set[str]) -> Prompt | str:
    """A ``file://`` prompt: chat JSON or YAML as ``messages``, text as a copied ``prompt_file``; or why not."""
    suffix = Path(ref).suffix.lower()
    if any(c in ref for c in "*?[") or ":" in Path(ref).name:
        return "a glob or a function reference: name each prompt file"
    if suffix in (".js", ".cjs", ".mjs", ".ts", ".py", ".rb", ".sh"):
        return "a prompt made by code: envelope-ci never runs code from an imported config"
    try:
        text = source.read(ref)
    except ValueError as exc:
        return f"the file {exc}"
    if suffix in (".json", ".yaml", ".yml"):
        try:
            data = loads_strict(text) if suffix == ".json" else parse_yaml_document(text, ref).data
        except (ValueError, UsageError):
            return "not a chat prompt envelope-ci can read as data (a Nunjucks loop or filter inside JSON?)"
        messages = _chat(data)
        if messages is None:
            return "not a list of {role, content} messages"
        return Prompt({"messages": messages}, _messages_text(messages), {})
    if re.search(r"^---$", text, re.MULTILINE):
        return "holds several prompts split by ---: give each its own file"
    name = _copied_name(Path(ref).name)
    stem, n = name, 2
    while f"prompts/{name}" in taken:
        name, n = f"{Path(stem).stem}-{n}{Path(stem).suffix}", n + 1
    taken.add(f"prompts/{name}")
    renamed = name if name != Path(ref).name else None
    return Prompt({"prompt_file": f"prompts/{name}"}, text, {f"prompts/{name}": text}, renamed)


def _copied_name(name: str) -> str:
    """A prompt file's name in ``prompts/``: ``.txt`` appended when its suffix would make the suite read it as cases."""
    return f"{name}.txt" if Path(name).suffix.lower() in CASE_SUFFIXES else name


def _entries(raw: Any) -> list[tuple[str, Any]]:
    """Each prompt with its place: a list, one prompt, or promptfoo's legacy ``{prompt: label}`` map, whose keys are
    the prompts and its values their labels (src/prompts/utils.ts ``normalizeInput``)."""
    if isinstance(raw, dict):
        return [(f"prompts.{key}", {"raw": key, "label": label}) for key, label in raw.items()]
    entries = raw if isinstance(raw, list) else [raw] if raw is not None else []
    return [(f"prompts[{i}]", entry) for i, entry in enumerate(entries)]


def prompts_of(config: Mapping[str, Any], source: Source, skipped: list[Skipped]) -> list[Prompt]:
    """The config's prompts as envelope-ci case keys; each that cannot be one is listed."""
    out: list[Prompt] = []
    taken: set[str] = set()
    for where, entry in _entries(config.get("prompts")):
        if isinstance(entry, dict):
            skipped += _prompt_keys(where, entry)
            entry = entry.get("raw", entry.get("id"))
        found = _prompt(entry, source, taken)
        if isinstance(found, str):
            skipped.append(Skipped(where, shown_at(where, entry), f"not converted: {found}"))
        else:
            out.append(found)
            skipped += [Skipped(where, shown_value(entry), "converted with a change: copied as "
                                f"{code_span('prompts/' + found.renamed)}, "
                                "since a file of that suffix in the suite is read as cases")] if found.renamed else []
            skipped += [Skipped(where, code_span(expr), "not converted: a Nunjucks expression; envelope-ci fills only "
                                "plain {{ name }} placeholders and sends this as written: rewrite it")
                        for expr in NUNJUCKS.findall(found.text) if not PLACEHOLDER.fullmatch(expr)]
    return out


def _prompt_keys(where: str, entry: Mapping[Any, Any]) -> list[Skipped]:
    """The keys of a prompt object other than the one its text is taken from (label, config, function, ...)."""
    used = "raw" if "raw" in entry else "id"
    return [Skipped(f"{where}.{key}", shown_at(f"{where}.{key}", entry[key]), "not converted: a prompt here is its "
                    "text; labels, per-prompt config and functions have no equivalent")
            for key in entry if key != used]


def _path_of(entry: str) -> str | None:
    """The file a prompt string names, told from text as promptfoo's ``maybeFilePath`` tells it (src/prompts/utils.ts):
    a ``file://`` reference, or one line ending in a file suffix, a short suffix (``.md``, ``.j2``) or holding ``/``,
    ``\\`` or ``*``. A template (``{``) or a sentence with a glob character is text: its glob matches no file, and
    promptfoo sends it as written."""
    ref = file_ref(entry)
    if ref is not None:
        return ref
    if "\n" in entry or "{" in entry or (_GLOB.search(entry) and re.search(r"\s", entry)):
        return None
    names_file = (any(token.endswith(_PATH_SUFFIXES) for token in entry.split(":")[-2:])
                  or "." in (entry[-3:-2], entry[-4:-3]) or any(c in entry for c in "/\\*"))
    return entry if names_file else None


def _prompt(entry: Any, source: Source, taken: set[str]) -> Prompt | str:
    """One prompt entry (inline text, inline chat JSON, or a file path, ``file://`` or not), or why it is not
    converted."""
    if not isinstance(entry, str):
        return "not a prompt envelope-ci can read"
    ref = _path_of(entry)
    if ref is not None:
        return _prompt_file(ref, source, taken)
    if entry.lstrip().startswith("["):
        try:
            messages = _chat(loads_strict(entry))
        except ValueError:
            messages = None
        if messages is not None:
            return Prompt({"messages": messages}, _messages_text(messages), {})
    return Prompt({"prompt": entry}, entry, {})
