"""One prompt's cases from the config's tests: ids from descriptions, the vars the prompt uses, asserts with
their placeholders filled per case, and what each test leaves behind."""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..templates import PLACEHOLDER
from .asserts import Asserts, as_text
from .prompts import NUNJUCKS, Prompt
from .shown import Skipped, code_span, file_ref, shown_at

_TEST_KEYS = frozenset({"vars", "assert", "description", "options", "threshold"})
_ID_UNSAFE = re.compile(r"[\s\[\]%,=]+|[^\w.:/@+-]+")


def _slug(text: str) -> str:
    """A description as a case id: one word, no character the id rule or a matrix id refuses."""
    return _ID_UNSAFE.sub("-", text).strip("-")[:80].strip("-")


def var_problem(value: Any) -> str | None:
    """Why a var's value cannot be a var here (envelope-ci takes text, numbers, booleans and lists of them)."""
    scalars = (str, int, float, bool)
    if file_ref(value) is not None or (isinstance(value, list) and any(file_ref(v) for v in value)):
        return "it is read from a file: write the text inline"
    if isinstance(value, list):
        spelled = [json.dumps(v) if not isinstance(v, str) else v for v in value]
        if not value or not all(isinstance(v, scalars) for v in value) or len(set(spelled)) != len(spelled):
            return "a list that is not distinct texts, numbers or booleans"
        return None
    return None if isinstance(value, scalars) else "an object or null: envelope-ci's vars are texts, numbers, booleans"


def vars_problem(variables: Any) -> str | None:
    """Why a test's (or ``defaultTest``'s) ``vars`` are no mapping a case can take: promptfoo reads a text or a list
    there as YAML files of vars (src/util/testCaseReader.ts ``loadTestWithVars``); None for a mapping or none."""
    if variables is None or isinstance(variables, dict):
        return None
    return "its vars are read from files: write them inline" if isinstance(variables, (str, list)) else (
        "its vars are not a mapping of names to values")


def _fill(value: Any, variables: Mapping[str, Any]) -> Any:
    """An assertion value with its plain placeholders filled from one case's vars (envelope-ci's assertions are no
    templates); None when a placeholder cannot be filled here."""
    if isinstance(value, list):
        filled = [_fill(v, variables) for v in value]
        return None if any(v is None for v in filled) else filled
    if not isinstance(value, str) or "{" not in value:
        return value
    if any(not PLACEHOLDER.fullmatch(e) for e in NUNJUCKS.findall(value)):
        return None
    names = PLACEHOLDER.findall(value)
    if any(n not in variables or isinstance(variables[n], list) for n in names):
        return None
    return PLACEHOLDER.sub(lambda m: str(as_text(variables[m.group(1)])), value)


def is_templated(entry: Any) -> bool:
    """Whether an assert entry's value holds a placeholder (it must be filled per case)."""
    return isinstance(entry, dict) and "{{" in json.dumps(entry.get("value", ""))


@dataclass
class CaseBuilder:
    """Builds one prompt's cases from the tests, with ids from descriptions, listing what each leaves behind."""

    prompt: Prompt
    asserts: Asserts
    defaults: dict[str, Any]
    default_asserts: list[tuple[str, Any]]
    grader: Any
    skipped: list[Skipped]
    suffix: str = ""
    ids: set[str] = field(default_factory=set)

    def case(self, where: str, test: Any, number: int) -> dict[str, Any] | None:
        """One test as a case, or None (listed) when its vars cannot be envelope-ci's."""
        if not isinstance(test, dict):
            self.skipped.append(Skipped(where, shown_at(where, test), "not converted: not a test"))
            return None
        problem = vars_problem(test.get("vars"))
        if problem:
            self.skipped.append(Skipped(f"{where}.vars", shown_at(f"{where}.vars", test["vars"]),
                                        f"not converted, nor is its test: {problem}"))
            return None
        variables: dict[str, Any] = test.get("vars") or {}
        for name, value in variables.items():
            problem = var_problem(value)
            if problem:
                self.skipped.append(Skipped(f"{where}.vars.{name}", shown_at(f"{where}.vars.{name}", value),
                                            f"not converted, nor is its test: {problem}"))
                return None
        self._left_keys(test, where)
        case: dict[str, Any] = {"id": self._id(test, number)}
        if isinstance(test.get("description"), str):
            case["description"] = test["description"]
        used = self._vars(variables, case["id"], where)
        if used:
            case["vars"] = used
        entries = self._asserts(test, where, {**self.defaults.get("vars", {}), **variables})
        if entries:
            case["assert"] = entries
        return case

    def _id(self, test: Mapping[str, Any], number: int) -> str:
        """The test's description as a unique id (``test-N`` without one), ``-2``, ``-3`` on a repeat."""
        base = _slug(test["description"]) if isinstance(test.get("description"), str) else ""
        base = (base or f"test-{number}") + self.suffix
        found, n = base, 2
        while found in self.ids:
            found, n = f"{base}-{n}", n + 1
        self.ids.add(found)
        return found

    def _vars(self, variables: Mapping[str, Any], case_id: str, where: str) -> dict[str, Any]:
        """The vars the prompt uses; the others are left out and listed (envelope-ci refuses an unused var)."""
        used = set(PLACEHOLDER.findall(self.prompt.text))
        missing = sorted(used - variables.keys() - self.defaults.get("vars", {}).keys())
        for name in missing:
            self.skipped.append(Skipped(f"{where}.vars", "no value for " + code_span("{{ " + name + " }}"),
                                        f"case {case_id} sends it as empty text, as promptfoo renders an unset "
                                        "variable"))
        for name in sorted(variables.keys() - used):
            self.skipped.append(Skipped(f"{where}.vars.{name}", "a variable the prompt does not use as "
                                        + code_span("{{ " + name + " }}"),
                                        f"left out of case {case_id}: envelope-ci refuses a variable nothing "
                                        "sends (assertions that name it are filled in at import)"))
        return {**{k: v for k, v in variables.items() if k in used}, **dict.fromkeys(missing, "")}

    def _asserts(self, test: Mapping[str, Any], where: str, variables: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The test's converted asserts, after the defaults' that hold a placeholder (filled for this case)."""
        grader = grader_of(test) if grader_of(test) is not None else self.grader
        entries = [*self.default_asserts, *assert_entries(where, test, self.skipped)]
        out = []
        for at, entry in entries:
            if is_templated(entry):
                value = _fill(entry.get("value"), variables)
                if value is None:
                    self.asserts.skip(at, entry.get("type"), "its value holds a placeholder this case cannot fill "
                                       "(a Nunjucks expression, a missing or a list variable)")
                    continue
                entry = {**entry, "value": value}
            converted = self.asserts.convert(entry, at, grader)
            if converted is not None:
                out.append(converted)
        return out

    def _left_keys(self, test: Mapping[str, Any], where: str) -> None:
        """List the test keys a case does not take (test-level threshold, options, metadata, ...)."""
        for key in [k for k in test if k not in _TEST_KEYS and k not in ("__columns", "__cells")]:
            self.skipped.append(Skipped(f"{where}.{key}", shown_at(f"{where}.{key}", test[key]),
                                        "not converted: not a key a case takes"))
        if "threshold" in test:
            self.skipped.append(Skipped(f"{where}.threshold", shown_at(where, test["threshold"]),
                                        "not converted: envelope-ci fails a case on any failed assertion, with no "
                                        "weighted score (docs/assertions.md#threshold-and-weight)"))
        options: dict[str, Any] = test["options"] if isinstance(test.get("options"), dict) else {}
        for key in sorted(set(options) - {"provider"}):
            self.skipped.append(Skipped(f"{where}.options.{key}", shown_at(f"{where}.options.{key}", options[key]),
                                        "not converted: a prefix, suffix, transform or other option changes what "
                                        "is sent or checked"))


def assert_entries(where: str, test: Mapping[str, Any], skipped: list[Skipped]) -> list[tuple[str, Any]]:
    """A test's (or ``defaultTest``'s) assert entries, each with its place; an ``assert`` that is no list (a
    ``file://`` reference, a number) is listed once as not converted, never read letter by letter."""
    found = test.get("assert")
    if found is None or isinstance(found, list):
        return [(f"{where}.assert[{i}]", entry) for i, entry in enumerate(found or [])]
    skipped.append(Skipped(f"{where}.assert", shown_at(f"{where}.assert", found),
                           "not converted: not a list of assertions; write them inline"))
    return []


def grader_of(test: Any) -> Any:
    """The judge provider a test (or ``defaultTest``) names in ``options.provider``, else None."""
    options = test.get("options") if isinstance(test, dict) else None
    return options.get("provider") if isinstance(options, dict) else None
