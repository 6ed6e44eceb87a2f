"""``python``: a function in the user's repository grades the answer (``graders/refund.py:check``).

The function is called as ``check(answer_text, case)`` and returns None (pass) or a reason
string (``wrong``); see docs/assertions.md for exactly what ``case`` holds: the case, and under
``envelope`` what every assertion is shown of the answer's envelope (usage, model id, times, provider). A grader that
cannot be loaded, raises, or returns anything else is bad input (exit 2), never a crash nor
a wrong answer: a broken grader says nothing about the model.

No grader code runs in this process, nor before an answer needs grading: loading a case only
reads the file (the bytes the fixtures hash digests) and checks the function's name, so
``hash``, ``import`` and a ``--filter`` that leaves the case out run none of it. The source
is compiled and called in the grader worker (``grading.grader_worker``): a fresh process
without the harness's secrets, which answers with reasons only.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from ...canonical import digest_bytes
from ...errors import Problem, UsageError
from ...sources.refs import FileRefs
from .. import grader_worker
from .base import Answer, AssertionType, Failure, Resolve

_VALUE = re.compile(r"(?P<file>.+\.py):(?P<function>[A-Za-z_]\w*)")


def _value_problem(value: Any) -> tuple[str, str] | None:
    if not isinstance(value, str) or _VALUE.fullmatch(value):
        return None
    return "", f"expected FILE.py:FUNCTION (e.g. graders/refund.py:check), got {value!r}"


def _references(value: str) -> list[str]:
    return [value.rpartition(":")[0]]


def case_view(case: Any, answer: Answer) -> dict[str, Any]:
    """What a grader sees of the case and of the answer's envelope: plain data (the worker decodes a copy each call:
    it cannot change the run's)."""
    return {"id": case.id, "stratum": case.stratum, "messages": list(case.messages), "request": dict(case.request),
            "file": case.file, "line": case.line, "envelope": envelope_view(answer)}


def envelope_view(answer: Answer) -> dict[str, Any]:
    """The envelope as every assertion sees it (``Answer``), as JSON data: usage, model id, times and provider."""
    usage = msgspec.to_builtins(answer.usage) if answer.usage is not None else None
    return {"usage": usage, "model": answer.model_id, "elapsed_ms": answer.elapsed_ms, "ttft_ms": answer.ttft_ms,
            "provider": answer.provider}


@dataclass(frozen=True)
class Grader:
    """A grader as a fixture names it: its file (resolved), function, and the source the fixtures hash digests."""

    ref: str
    path: Path
    function: str
    source: bytes = field(repr=False)
    digest: str

    def __call__(self, answer: Answer, case: Any) -> list[str]:
        reply = grader_worker.grade(grader_worker.Request(ref=self.ref, path=str(self.path), digest=self.digest,
                                                          function=self.function, text=answer.text,
                                                          case=case_view(case, answer), source=self.source))
        if reply.problem is None:
            return list(reply.reasons)
        if reply.loading:  # the file or function is at fault: say which case named it
            raise UsageError([Problem(case.file, case.line, None, reply.problem)])
        raise UsageError(reply.problem)


def _source(file: str, path: Path, resolve: Resolve) -> bytes:
    """The grader's bytes: the very ones the fixtures hash digested when ``resolve`` is the run's ``FileRefs.path``."""
    refs = getattr(resolve, "__self__", None)
    if isinstance(refs, FileRefs):
        return refs.read(file)
    if not path.is_file():
        raise UsageError(f"{file}: file not found (looked at {path.as_posix()})")
    return path.read_bytes()


def _prepare(value: str, resolve: Resolve) -> Grader:
    """The grader, read but not run: its function is looked up when it first grades, in the worker."""
    file, _, function = value.rpartition(":")
    if not function.isidentifier():
        raise UsageError(f"{file}: {function!r} is not a function name (from {value!r})")
    path = resolve(file)
    source = _source(file, path, resolve)
    return Grader(value, path.resolve(), function, source, digest_bytes(source))


def _check(answer: Answer, value: Grader, case: Any) -> list[str]:
    return value(answer, case)


ASSERTION = AssertionType(
    name="python",
    failure=Failure.WRONG,
    check=_check,
    prepare=_prepare,
    value_problem=_value_problem,
    references=_references,
    value_schema={"type": "string"},
    description="FILE.py:FUNCTION in your repository (from the fixtures directory, or the repository root with a "
                "leading /): called with the answer text and the case, it returns None to pass or a reason to fail.",
)
