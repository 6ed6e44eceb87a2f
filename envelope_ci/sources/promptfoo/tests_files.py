"""promptfoo's ``tests``: inline entries, and ``file://`` CSV, YAML, JSON and JSONL files (a CSV row read as
promptfoo reads it: ``__expected`` cells as asserts, other ``__`` columns kept for listing)."""
from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...errors import UsageError
from ..parse import loads_strict, parse_yaml_document
from .asserts import assertion_from_csv
from .shown import Skipped, Source, file_ref, shown_at


def _csv_tests(text: str) -> list[dict[str, Any]]:
    """A promptfoo tests CSV as test entries (src/csv.ts ``testCaseFromCsvRow``); unknown ``__`` columns are kept
    under ``__columns`` for listing."""
    tests = []
    for row in csv.DictReader(io.StringIO(text)):
        test: dict[str, Any] = {"vars": {}, "assert": []}
        for key, value in row.items():
            if key is None:  # csv.DictReader's key for the cells past the header row
                test["__cells"] = [v for v in value if v.strip()]
                continue
            key = key.strip()
            value = value if isinstance(value, str) else ""
            if key.startswith("__expected"):
                if value.strip():
                    test["assert"].append(assertion_from_csv(value))
            elif key == "__description":
                test["description"] = value
            elif key.startswith("__"):
                test.setdefault("__columns", {})[key] = value
            elif key:
                test["vars"][key] = value
        tests.append(test)
    return tests


def tests_of(config: Mapping[str, Any], source: Source, skipped: list[Skipped]) -> list[tuple[str, Any]]:
    """Every test with its place: inline, or from CSV, YAML or JSON files (``file://`` or not); the rest listed."""
    raw = config.get("tests")
    entries = raw if isinstance(raw, list) else [raw] if raw is not None else []
    out: list[tuple[str, Any]] = []
    for i, entry in enumerate(entries):
        where = f"tests[{i}]" if isinstance(raw, list) else "tests"
        ref = _tests_path(entry)
        if ref is None:
            if isinstance(entry, str):
                skipped.append(Skipped(where, shown_at(where, entry), "not converted: a test source envelope-ci "
                                       "cannot read (a dataset or sheet): export it to CSV"))
            else:
                out.append((where, entry))
            continue
        found = _tests_file(ref, source)
        if isinstance(found, str):
            skipped.append(Skipped(where, shown_at(where, entry), f"not converted: {found}"))
        else:
            out += [(f"{ref}[{n}]", test) for n, test in enumerate(found, start=1)]
    return out


def _tests_path(entry: Any) -> str | None:
    """The file a ``tests`` entry reads, as promptfoo's ``readTests`` (src/util/testCaseReader.ts) reads it: a
    ``file://`` reference, a path without one (``tests.csv``), or a generator's ``{path, config}``; None for an
    inline test or a URL (a dataset or a sheet)."""
    if isinstance(entry, dict):
        entry = entry.get("path")
    if not isinstance(entry, str):
        return None
    ref = file_ref(entry)
    if ref is not None:
        return ref
    return None if "://" in entry else entry


def _tests_file(ref: str, source: Source) -> list[Any] | str:
    """The tests a file reference holds, or why they are not converted."""
    suffix = Path(ref).suffix.lower()
    if any(c in ref for c in "*?[") or suffix not in (".csv", ".yaml", ".yml", ".json", ".jsonl"):
        return "tests made by code, a glob or a spreadsheet: envelope-ci reads CSV, YAML, JSON and JSONL files"
    try:
        text = source.read(ref)
        if suffix == ".csv":
            return _csv_tests(text)
        if suffix == ".jsonl":
            return [loads_strict(line) for line in text.splitlines() if line.strip()]
        data = loads_strict(text) if suffix == ".json" else parse_yaml_document(text, ref).data
    except ValueError as exc:
        return f"the file {exc}"
    except (UsageError, csv.Error) as exc:
        return f"the file cannot be read: {exc}"
    # promptfoo reads a file holding one test as a list of that test (loadTestsFromGlob)
    return data if isinstance(data, list) else [data] if isinstance(data, dict) else "does not hold tests"
