"""What an answer assertion is: a name, a fixture shorthand, a JSON-Schema fragment, a check.

An assertion is one module exposing ``ASSERTION = AssertionType(...)``: the built-ins are
listed in ``registry.BUILTIN``; third parties register theirs under the entry-point group
``envelope_ci.assertions`` (see docs/plugins.md). The case schema is assembled from the
fragments, so a typo in a value fails at load time with its file and line.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...frozen import quick_init

if TYPE_CHECKING:
    from ..rubric import Verdict


class Failure(str, Enum):
    """What a failed assertion makes of the answer: a label, or (size) a channel."""

    SCHEMA = "schema"  # the answer's shape is wrong: label ``schema``
    WRONG = "wrong"  # the answer's content is wrong: label ``wrong``
    SIZE = "size"  # a size budget: judged on the size channel, the label is untouched


@quick_init
@dataclass(frozen=True, slots=True)
class Answer:
    """The answer as assertions see it: the text, and the parsed JSON when the case wants JSON."""

    text: str
    parsed: Any = None
    has_json: bool = False
    tool_calls: tuple[Mapping[str, Any], ...] = ()  # as the provider parsed them: {"type", "function": {"name", "arguments"}}
    verdicts: Mapping[str, Verdict] = field(default_factory=dict)  # llm-rubric text -> what its judge said (grading.rubric)


# check(answer, value, case) -> reasons; an empty list means the assertion holds.
Check = Callable[[Answer, Any, Any], Sequence[str]]
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
    ``endpoint``), each required, with its schema: ``value_problem`` and ``prepare`` then
    receive ``{"value": ..., KEY: ...}``. ``heavy`` marks a check whose cost is not the
    built-ins' few microseconds (it runs the user's code).
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
    # Its check runs code of unknown cost (a Python grader): grading is then spread over forked workers.
    heavy: bool = False
    # The failures grading asks it for (``Expectation.failures_as``): its own, and ``schema`` too with a ``check_shape``.
    judged_as: frozenset[Failure] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "judged_as", frozenset({self.failure, *([Failure.SCHEMA] if self.check_shape else [])}))


@quick_init
@dataclass(frozen=True, slots=True)
class Expectation:
    """One assertion of one case, as loaded: its type, prepared value and whether negated."""

    kind: AssertionType
    value: Any
    negated: bool = False

    @property
    def name(self) -> str:
        return ("not-" if self.negated else "") + self.kind.name

    def failures(self, answer: Answer, case: Any) -> Sequence[str]:
        """Why the answer does not meet this expectation (empty when it does)."""
        if not self.negated:
            return self.kind.check(answer, self.value, case)
        assert self.kind.check_not is not None  # the schema offers not- only where it exists
        return self.kind.check_not(answer, self.value, case)

    def failures_as(self, failure: Failure, answer: Answer, case: Any) -> list[str]:
        """Its failures of one kind: grading asks for the shape ones first, then the content ones (only those in ``kind.judged_as``)."""
        found = list(self.kind.check_shape(answer, self.value, case)) if failure is Failure.SCHEMA and self.kind.check_shape else []
        return found + list(self.failures(answer, case)) if self.kind.failure is failure else found
