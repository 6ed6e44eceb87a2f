"""What an answer assertion is: a name, a fixture shorthand, a JSON-Schema fragment, a check.

An assertion is one module exposing ``ASSERTION = AssertionType(...)``: the built-ins are
listed in ``registry.BUILTIN``; third parties register theirs under the entry-point group
``envelope_ci.assertions`` (see docs/plugins.md). The case schema is assembled from the
fragments, so a typo in a value fails at load time with its file and line.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from ...model import Check, Data, Expectation, Failure

__all__ = ["Answer", "AssertionType", "Check", "Expectation", "Failure", "JudgeVerdict", "Resolve", "Usage"]


class JudgeVerdict(Data, frozen=True):
    """What an llm-rubric judge said: ``passed`` None when it said nothing usable (``reason`` says why)."""

    passed: bool | None
    reason: str
    judge: str | None = None  # "<model id>@<temperature>", for the case's fingerprint


class Usage(Data, frozen=True):
    """The tokens one call took in and gave out: as the server reported them, or estimated (characters / 4) when it
    did not, and which."""

    input_tokens: int
    output_tokens: int
    input_estimated: bool
    output_estimated: bool

    @property
    def estimated(self) -> bool:
        return self.input_estimated or self.output_estimated


class Answer(Data, frozen=True):
    """The answer as assertions see it: the text, the parsed JSON when the case wants JSON, and its envelope's
    usage, model id, times and provider (budgets and plug-ins read them)."""

    text: str
    parsed: Any = None
    has_json: bool = False
    # as the provider parsed them: {"type", "function": {"name", "arguments"}}
    tool_calls: tuple[Mapping[str, Any], ...] = ()
    verdicts: Mapping[str, JudgeVerdict] = msgspec.field(default_factory=dict)  # llm-rubric text -> its judge's verdict
    usage: Usage | None = None  # None only for an Answer built by hand
    model_id: str | None = None  # the model the answer names (its body's ``model``); None for a bare completion
    elapsed_ms: float | None = None  # send to last byte; None for a bare completion
    ttft_ms: float | None = None  # to the first token of a stream
    provider: str | None = None  # the wire format its body was read in ("openai-chat"); None for a bare completion
    # a text ``similar`` compares -> its embedding (grading.assertions.similar)
    embeddings: Mapping[str, tuple[float, ...]] = msgspec.field(default_factory=dict)
# A path a fixture names -> where it is (relative to the fixtures directory, or the repository root with a leading /).
Resolve = Callable[[str], Path]


@dataclass(frozen=True)
class AssertionType:
    """One kind of assertion.

    ``value_schema`` is the JSON-Schema fragment of its ``value`` (and of its ``shorthand``
    fixture key, when it has one). ``check_not`` words why the negated form (``not-NAME``)
    fails; a type without it cannot be negated. ``prepare`` turns a value into what
    ``check`` receives (a compiled validator, a pattern), once per case at load time;
    ``value_problem`` says why a value that passed the schema is still unusable.
    ``references`` names the files a value points to (a grader's source): they join the
    fixtures hash and the case's digest, and ``prepare`` finds them through its ``Resolve``.
    ``shorthand`` and ``negated_shorthand`` are flat fixture keys meaning the type and its
    ``not-`` form (``must_not_include`` is ``not-icontains-any``). ``check_shape`` lets a
    content assertion say the answer is unusable rather than wrong (``tool-call``: arguments
    that are not JSON): its reasons are labelled ``schema``, in either form, before content.
    ``entry_keys`` are keys its ``assert`` entry takes besides ``value`` (llm-rubric's
    ``endpoint``), each required unless named in ``optional_keys``, with its schema:
    ``value_problem`` and ``prepare`` then receive ``{"value": ..., KEY: ...}`` (None for a key
    left out).
    """

    name: str
    failure: Failure
    check: Check
    value_schema: Mapping[str, Any]
    description: str
    shorthand: str | None = None
    negated_shorthand: str | None = None
    needs_json: bool = False
    value_optional: bool = False
    check_not: Check | None = None
    prepare: Callable[[Any, Resolve], Any] | None = None
    value_problem: Callable[[Any], tuple[str, str] | None] | None = None
    references: Callable[[Any], Sequence[str]] | None = None
    check_shape: Check | None = None
    entry_keys: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    optional_keys: frozenset[str] = frozenset()
    # The failures grading asks it for (``Expectation.failures_as``): its own, and ``schema`` too with a
    # ``check_shape``.
    judged_as: frozenset[Failure] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "judged_as",
                           frozenset({self.failure, *([Failure.SCHEMA] if self.check_shape else [])}))
