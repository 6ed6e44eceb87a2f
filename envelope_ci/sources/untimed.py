"""A case's digest apart from its recorded times: what tells a re-recorded answer from a re-timed one.

Re-recording a suite moves every recording's time, usage and attempt count, so every case's
digest changes; this digest leaves those out, so ``fixtures_changed`` can name the cases
whose request, assertions or answer changed (``modified``) apart from those whose time or
usage only moved (``retimed``).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..canonical import digest
from ..model import DEFAULT_PROVIDER

# What differs between two recordings of the same answer to the same request.
_MEASURED = frozenset({"elapsed_ms", "ttft_ms", "level_ms", "attempts", "notes", "headers"})
_BODY_MEASURED = frozenset({"usage", "id", "created", "system_fingerprint"})


def _untimed_envelope(envelope: Any) -> Any:
    """One recorded envelope without its times and usage (a judge's envelopes too)."""
    if not isinstance(envelope, Mapping):
        return envelope
    kept = {k: v for k, v in envelope.items() if k not in _MEASURED}
    if kept.get("provider") == DEFAULT_PROVIDER:  # older recordings name none: the same wire format
        del kept["provider"]
    body = kept.get("body")
    if isinstance(body, Mapping):
        kept["body"] = {k: v for k, v in body.items() if k not in _BODY_MEASURED}
    for key in ("judgements", "embeddings"):  # a judge's and an embeddings call's envelopes
        inner = kept.get(key)
        if isinstance(inner, Mapping):
            kept[key] = {said: _untimed_envelope(e) for said, e in inner.items()}
    return kept


def answer_digest(data: Mapping[str, Any], files: Mapping[str, str]) -> str | None:
    """The digest of a case with its recorded answers' times and usage left out; None when it records none (its
    digest then says the same)."""
    recorded = data.get("recorded")
    if recorded is None:
        return None
    untimed = [_untimed_envelope(e) for e in recorded] if isinstance(recorded, list) else _untimed_envelope(recorded)
    case = {**data, "recorded": untimed}
    return digest([case, files] if files else case)
