"""``python``: a function in the user's repository grades the answer (``graders/refund.py:check``).

The function is called as ``check(answer_text, case)`` and returns None (pass) or a reason
string (``wrong``); see docs/assertions.md for exactly what ``case`` holds. A grader that
cannot be loaded, raises, or returns anything else is bad input (exit 2), never a crash nor
a wrong answer: a broken grader says nothing about the model.
"""
from __future__ import annotations

import copy
import hashlib
import importlib.util
import re
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from ...errors import UsageError
from .base import Answer, AssertionType, Failure, Resolve

_VALUE = re.compile(r"(?P<file>.+\.py):(?P<function>[A-Za-z_]\w*)")
# Each grader file is imported once per process and version of it: the module, or why it failed.
_loaded: dict[tuple[Path, int, int], ModuleType | str] = {}


def _value_problem(value: Any) -> tuple[str, str] | None:
    if not isinstance(value, str) or _VALUE.fullmatch(value):
        return None
    return "", f"expected FILE.py:FUNCTION (e.g. graders/refund.py:check), got {value!r}"


def _references(value: str) -> list[str]:
    return [value.rpartition(":")[0]]


def _import(file: str, path: Path) -> ModuleType | str:
    """The grader's module under a name of its own (so two graders.py never clash), or why it failed to import."""
    name = "envelope_ci_grader_" + hashlib.sha256(str(path).encode()).hexdigest()[:16]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None  # a .py file always has a source loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling inside the grader look themselves up here
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:
        del sys.modules[name]
        return f"{file}: importing it raised {type(exc).__name__}: {exc}"
    return module


def _load(file: str, path: Path) -> ModuleType:
    stat = path.stat()
    key = (path.resolve(), stat.st_mtime_ns, stat.st_size)
    if key not in _loaded:
        _loaded[key] = _import(file, key[0])
    found = _loaded[key]
    if isinstance(found, str):
        raise UsageError(found)
    return found


def case_view(case: Any) -> dict[str, Any]:
    """What a grader sees of the case: plain data, copied each call so a grader cannot change the run's."""
    return copy.deepcopy({"id": case.id, "stratum": case.stratum, "messages": list(case.messages),
                          "request": dict(case.request), "file": case.file, "line": case.line})


@dataclass(frozen=True)
class Grader:
    """A loaded grader function and how the fixture named it."""

    ref: str
    path: Path
    fn: Callable[[str, dict[str, Any]], Any]

    def __call__(self, text: str, case: Any) -> list[str]:
        try:
            verdict = self.fn(text, case_view(case))
        except (Exception, SystemExit) as exc:
            raise UsageError(f"{self.ref} raised {type(exc).__name__}: {exc} ({self._where(exc)}case {case.id})") from None
        if verdict is None:
            return []
        if isinstance(verdict, str) and verdict.strip():
            return [f"{self.ref}: {verdict}"]
        raise UsageError(f"{self.ref} returned {verdict!r} for case {case.id}: a grader returns None (pass) or a reason string (fail)")

    def _where(self, exc: BaseException) -> str:
        """The grader's own line that raised, when the traceback passes through its file."""
        lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == self.path]
        return f"{self.ref.rpartition(':')[0]} line {lines[-1]}, " if lines else ""


def _prepare(value: str, resolve: Resolve) -> Grader:
    file, _, function = value.rpartition(":")
    path = resolve(file)
    fn = getattr(_load(file, path), function, None)
    if not callable(fn):
        raise UsageError(f"{file}: no function {function!r} (from {value!r})")
    return Grader(value, path.resolve(), fn)


def _check(answer: Answer, value: Grader, case: Any) -> list[str]:
    return value(answer.text, case)


ASSERTION = AssertionType(
    name="python",
    failure=Failure.WRONG,
    check=_check,
    prepare=_prepare,
    value_problem=_value_problem,
    references=_references,
    value_schema={"type": "string"},
    description="FILE.py:FUNCTION in your repository (from the fixtures directory, or the repository root with a leading /): "
                "called with the answer text and the case, it returns None to pass or a reason to fail.",
)
