"""promptfoo's assert entries as envelope-ci's: the types with the same meaning, a CSV ``__expected`` cell read as
promptfoo reads it, and why the rest are not converted."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ...grading.assertions.registry import assertion_types
from ..cases import CASE_SCHEMA
from .providers import Endpoints
from .shown import Skipped, file_ref, shown_at

# promptfoo's types that envelope-ci has with the same meaning (docs/assertions.md); ``python`` is not one: its
# grader's contract differs.
SAME_TYPES = frozenset({"equals", "contains", "icontains", "contains-any", "contains-all", "icontains-any",
                        "icontains-all", "starts-with", "regex", "is-json", "llm-rubric", "similar", "cost", "latency"})
THRESHOLD_TYPES = frozenset({"similar", "cost", "latency"})
LIST_TYPES = frozenset({"contains-any", "contains-all", "icontains-any", "icontains-all"})
# Keys an assertion may carry that only name or describe it in promptfoo's report.
# Keys that change what an assertion checks: the assertion is not converted with them.
_CHANGING_KEYS = frozenset({"transform", "contextTransform", "config", "rubricPrompt"})
# promptfoo's BaseAssertionTypesSchema (src/types), the only prefixes its assertionFromString (src/csv.ts) reads
# in a CSV cell; any other cell, `answer: Paris` or `https://x`, is an `equals`.
PROMPTFOO_TYPES = frozenset({
    "answer-relevance", "bleu", "classifier", "contains", "contains-all", "contains-any", "contains-html",
    "contains-json", "contains-sql", "contains-xml", "context-faithfulness", "context-recall", "context-relevance",
    "conversation-relevance", "cost", "equals", "factuality", "finish-reason", "g-eval", "gleu", "guardrails",
    "human", "icontains", "icontains-all", "icontains-any", "is-html", "is-json", "is-refusal", "is-sql",
    "is-valid-function-call", "is-valid-openai-function-call", "is-valid-openai-tools-call", "is-xml", "javascript",
    "latency", "levenshtein", "llm-rubric", "meteor", "model-graded-closedqa", "model-graded-factuality",
    "moderation", "perplexity", "perplexity-score", "pi", "python", "regex", "rouge-l", "rouge-n", "rouge-s", "ruby",
    "select-best", "similar", "similar:cosine", "similar:dot", "similar:euclidean", "starts-with", "tool-call-f1",
    "trace-error-spans", "trace-span-count", "trace-span-duration", "webhook"})
_CSV_EXPECTED = re.compile(r"^(not-)?(" + "|".join(map(re.escape, sorted(PROMPTFOO_TYPES, key=len, reverse=True)))
                           + r")(?:\((\d+(?:\.\d+)?)\))?(?::([\s\S]*))?$")


def assertion_from_csv(cell: str) -> dict[str, Any]:
    """A ``__expected`` cell as promptfoo's ``assertionFromString`` reads it (src/csv.ts): ``type:value``,
    ``type(threshold):value``, ``not-`` forms, comma lists for the ``contains-*`` types, else ``equals``."""
    text = cell.strip()
    for prefix, kind in (("javascript:", "javascript"), ("fn:", "javascript"), ("eval:", "javascript"),
                         ("grade:", "llm-rubric"), ("llm-rubric:", "llm-rubric"), ("python:", "python")):
        if text.startswith(prefix):
            return {"type": kind, "value": text[len(prefix):].strip()}
    match = _CSV_EXPECTED.match(text)
    if match is None or (match.group(4) is None and match.group(3) is None and match.group(2) not in (
            "is-json", "contains-json")) or text.startswith("file://"):
        return {"type": "equals", "value": text}
    negated, kind, threshold, value = match.groups()
    entry: dict[str, Any] = {"type": f"{negated or ''}{kind}"}
    value = (value or "").strip()
    if kind in LIST_TYPES:
        entry["value"] = [part.strip() for part in value.split(",") if part.strip()]
    elif value:
        entry["value"] = value
    if threshold is not None:
        entry["threshold"] = float(threshold)
    elif kind == "similar":
        entry["threshold"] = 0.8  # src/csv.ts DEFAULT_SEMANTIC_SIMILARITY_THRESHOLD
    return entry


def as_text(value: Any) -> Any:
    """A scalar value as promptfoo compares it (``String(value)``); anything else as it is."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    return value


def _entry_problem(entry: dict[str, Any]) -> str | None:
    """Why a converted entry would not load here (the case schema, then the type's own value check), else None.

    The value is checked as the case loader checks it (sources/cases.py): with the type's own keys beside it, even
    when the entry has no ``value`` (a ``latency`` with neither value nor threshold must not be written)."""
    errors = CASE_SCHEMA.errors({"id": "x", "prompt": "p", "assert": [entry]})
    if errors:
        return f"its value does not fit envelope-ci's {entry['type']}: {errors[0].message}"
    kind = assertion_types()[entry["type"].removeprefix("not-")]
    value = ({"value": entry.get("value"), **{k: entry.get(k) for k in kind.entry_keys}} if kind.entry_keys
             else entry.get("value"))
    found = kind.value_problem(value) if kind.value_problem is not None and value is not None else None
    return f"its value does not fit envelope-ci's {entry['type']}: {found[1]}" if found is not None else None


@dataclass
class Asserts:
    """Turns promptfoo assert entries into envelope-ci ones, naming the judges they need and listing the rest."""

    endpoints: Endpoints
    skipped: list[Skipped]

    def convert(self, entry: Any, where: str, grader: Any) -> dict[str, Any] | None:
        """One assert entry as envelope-ci's, or None (listed with why)."""
        if not isinstance(entry, dict) or not isinstance(entry.get("type"), str):
            return self.skip(where, entry, "not an assertion envelope-ci can read")
        kind = entry["type"]
        base = kind.removeprefix("not-")
        if base not in SAME_TYPES:
            why = ("runs code: envelope-ci never runs code from an imported config; envelope-ci's own `python` "
                   "grader (FILE.py:FUNCTION, returns None or a reason) can replace it"
                   if base in ("javascript", "python", "ruby", "webhook") else
                   "envelope-ci has no assertion of this type with the same meaning")
            return self.skip(where, kind, why)
        if kind != base and assertion_types()[base].check_not is None:
            return self.skip(where, kind, f"envelope-ci's {base} has no negation")
        changing = sorted(k for k in entry if k in _CHANGING_KEYS)
        if changing or entry.get("weight") == 0:
            return self.skip(where, kind, f"its {', '.join(changing) or 'weight 0'} changes what is checked "
                              "(a transform runs code; weight 0 always passes), so it is not converted")
        if file_ref(entry.get("value")) is not None:
            return self.skip(where, kind, "its value is read from a file: write the text inline")
        out = self._entry(entry, kind, base, where, grader)
        if out is None:
            return None
        problem = _entry_problem(out)
        return self.skip(where, kind, problem) if problem else out

    def _entry(self, entry: dict[str, Any], kind: str, base: str, where: str, grader: Any) -> dict[str, Any] | None:
        """The envelope-ci entry: its value, its threshold where the type takes one, its judge or embeddings."""
        out: dict[str, Any] = {"type": kind}
        if "value" in entry:
            value = entry["value"]
            out["value"] = [as_text(v) for v in value] if isinstance(value, list) else as_text(value)
        if base in THRESHOLD_TYPES and "threshold" in entry:
            out["threshold"] = entry["threshold"]
        if base == "llm-rubric":
            endpoint = self.endpoints.judge(entry.get("provider", grader), f"{where}.provider")
            if endpoint is None:
                return None
            out["endpoint"] = endpoint
        embedder = entry.get("provider", grader if isinstance(grader, dict) and "embedding" in grader else None)
        if base == "similar" and not self.endpoints.embedder(embedder, f"{where}.provider"):
            return None
        if isinstance(entry.get("description"), str):
            out["description"] = entry["description"]
        self._left_keys(entry, base, where)
        return out

    def _left_keys(self, entry: dict[str, Any], base: str, where: str) -> None:
        """List the keys an entry carries that the converted one does not."""
        taken = {"type", "value", "description"} | ({"threshold"} if base in THRESHOLD_TYPES else set()) | (
            {"provider"} if base in ("llm-rubric", "similar") else set())
        for key in sorted(set(entry) - taken):
            why = {"weight": "only weighs promptfoo's score; envelope-ci fails a case on any failed assertion "
                             "(docs/assertions.md#threshold-and-weight)",
                   "threshold": f"envelope-ci's {base} is pass or fail, with no score to hold to a threshold",
                   "metric": "a name in promptfoo's report only"}.get(key, "not a key envelope-ci's assertions take")
            self.skipped.append(Skipped(f"{where}.{key}", shown_at(f"{where}.{key}", entry[key]),
                                        f"not converted: {why}"))

    def skip(self, where: str, what: Any, why: str) -> dict[str, Any] | None:
        """List an entry as not converted; None, what a skipped entry converts to."""
        self.skipped.append(Skipped(where, shown_at(where, what), f"not converted: {why}"))
        return None
