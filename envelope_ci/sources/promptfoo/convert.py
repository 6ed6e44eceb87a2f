"""The whole promptfoo config as a ``Conversion``: a fixtures file per prompt with ``defaultTest`` as its
defaults, the model runs, the judge and embeddings endpoints, and every item not converted, each once."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from .asserts import Asserts
from .builder import CaseBuilder, assert_entries, grader_of, is_templated, var_problem, vars_problem
from .prompts import prompts_of
from .providers import Endpoints, ModelRun, model_runs
from .shown import Skipped, Source, shown_at, shown_value
from .tests_files import tests_of

FIXTURE_STEM = "promptfoo"
_TOP_KEYS = frozenset({"prompts", "providers", "targets", "tests", "defaultTest", "description"})


@dataclass
class Conversion:
    """What an import writes (relative to ``--into``), and what it could not convert."""

    files: dict[str, str]
    cases: int
    runs: list[ModelRun]
    endpoints: dict[str, dict[str, Any]]
    skipped: list[Skipped]


def _defaults(default_test: Any, asserts: Asserts, skipped: list[Skipped]) -> tuple[dict[str, Any],
                                                                                 list[tuple[str, Any]]]:
    """``defaultTest`` as file defaults (vars and the asserts without placeholders), and its templated asserts."""
    if default_test is None:
        return {}, []
    if not isinstance(default_test, dict):
        skipped.append(Skipped("defaultTest", shown_at("defaultTest", default_test), "not converted: write it "
                               "inline"))
        return {}, []
    out: dict[str, Any] = {}
    problem = vars_problem(default_test.get("vars"))
    if problem:
        skipped.append(Skipped("defaultTest.vars", shown_at("defaultTest.vars", default_test["vars"]),
                               f"not converted: {problem}"))
    variables: dict[str, Any] = default_test["vars"] if isinstance(default_test.get("vars"), dict) else {}
    good = {}
    for name, value in variables.items():
        problem = var_problem(value)
        if problem:
            skipped.append(Skipped(f"defaultTest.vars.{name}", shown_at(f"defaultTest.vars.{name}", value),
                                   f"not converted: {problem}"))
        else:
            good[name] = value
    if good:
        out["vars"] = good
    for key in sorted(set(default_test) - {"vars", "assert", "options"}):
        skipped.append(Skipped(f"defaultTest.{key}", shown_at(f"defaultTest.{key}", default_test[key]),
                               "not converted: not a default a case takes (a threshold: envelope-ci fails a "
                               "case on any failed assertion)"))
    options: dict[str, Any] = default_test["options"] if isinstance(default_test.get("options"), dict) else {}
    for key in sorted(set(options) - {"provider"}):
        skipped.append(Skipped(f"defaultTest.options.{key}", shown_at(f"defaultTest.options.{key}", options[key]),
                               "not converted: an option that changes what is sent or checked"))
    entries = assert_entries("defaultTest", default_test, skipped)
    fixed = [asserts.convert(e, at, grader_of(default_test)) for at, e in entries if not is_templated(e)]
    if any(fixed):
        out["assert"] = [e for e in fixed if e is not None]
    return out, [(at, e) for at, e in entries if is_templated(e)]


def convert(config: Mapping[str, Any], source: Source) -> Conversion:
    """The fixtures, settings and notes a promptfoo config becomes, and every item that could not be converted."""
    skipped: list[Skipped] = []
    for key in sorted(set(config) - _TOP_KEYS):
        skipped.append(Skipped(str(key), shown_at(str(key), config[key]), "not converted: no envelope-ci setting "
                               "means this "
                               "(a run's options are its flags)"))
    runs = model_runs(config.get("providers", config.get("targets")), skipped)
    prompts = prompts_of(config, source, skipped)
    endpoints = Endpoints()
    asserts = Asserts(endpoints, skipped)
    defaults, templated = _defaults(config.get("defaultTest"), asserts, skipped)
    tests = tests_of(config, source, skipped)
    files: dict[str, str] = {}
    count = 0
    for n, prompt in enumerate(prompts, start=1):
        many = len(prompts) > 1
        builder = CaseBuilder(prompt, asserts, defaults, templated, grader_of(config.get("defaultTest")), skipped,
                              suffix=f"-p{n}" if many else "")
        cases = [c for c in (builder.case(w, t, i) for i, (w, t) in enumerate(tests, start=1)) if c is not None]
        for where, test in tests:
            skipped += _csv_columns(where, test) if n == 1 else []
        if not cases:
            continue
        count += len(cases)
        name = f"{FIXTURE_STEM}-p{n}.yaml" if many else f"{FIXTURE_STEM}.yaml"
        files[name] = yaml_text({"defaults": {**prompt.keys, **defaults}, "cases": cases})
        files.update(prompt.files)
    if not prompts:
        skipped.append(Skipped("prompts", "no prompt", "no case could be written: every test needs a prompt"))
    skipped += endpoints.skipped
    return Conversion(files, count, runs, endpoints.named, _unique(skipped))


def _csv_columns(where: str, test: Any) -> list[Skipped]:
    """The ``__`` columns of a CSV row that no case key means (``__prefix``, ``__threshold``, ``__metadata:*``...);
    a hand-written test holding such a key is no CSV row and must not crash the import."""
    found = test if isinstance(test, dict) else {}
    columns: dict[str, Any] = found["__columns"] if isinstance(found.get("__columns"), dict) else {}
    cells: list[Any] = found["__cells"] if isinstance(found.get("__cells"), list) else []
    unnamed = "not converted: cells past the header row have no column name"
    return [Skipped(f"{where}.{key}", shown_at(f"{where}.{key}", value), "not converted: a CSV column no case key "
                    "means") for key, value in columns.items() if value] + [
        Skipped(where, shown_value(cells), unnamed)] * bool(cells)


def _unique(skipped: list[Skipped]) -> list[Skipped]:
    """Each listed item once, in the order first found (a defaults' entry is met once per prompt)."""
    return list(dict.fromkeys(skipped))


def yaml_text(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=1000)
