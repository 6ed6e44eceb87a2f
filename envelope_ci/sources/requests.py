"""What a recorded answer answered: a record of the request, so an offline gate never grades an
answer to an older prompt.

``--record`` and ``import`` write, with every envelope, ``request``: the digest of what was
sent (model as asked, messages after templates and files were filled in, tools, tool_choice,
response_format, max_tokens, temperature, seed, stop) and a short digest per part, so a
mismatch can say which part moved. Offline, each recording is checked against the request the
case would send now.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..canonical import digest
from ..model import DEFAULT_PROVIDER, Case
from ..providers.base import Provider
from ..providers.openai_chat import OPENAI_CHAT
from ..providers.registry import provider_named

# Shown as they are in a difference ("temperature 0.0 → 0.7"); the rest by a short digest.
_PLAIN = ("model", "max_tokens", "max_output_tokens", "temperature", "seed")
_SHORT = 12


def _short(value: Any) -> str:
    return digest(value).split(":", 1)[1][:_SHORT]


def request_parts(body: Mapping[str, Any], fields: Sequence[str] = OPENAI_CHAT.answer_fields) -> dict[str, Any]:
    """The parts of a request body an answer depends on (``fields``, the provider's): plain values, or a short digest
    each (per message)."""
    parts: dict[str, Any] = {}
    for name in fields:
        if name not in body:
            continue
        if name == "messages":
            parts.update({f"messages[{i}]": _short(m) for i, m in enumerate(body["messages"])})
        elif name in _PLAIN:
            parts[name] = body[name]
        else:
            parts[name] = _short(body[name])
    return parts


def request_record(case: Case, model: str, temperature: float, provider: Provider = OPENAI_CHAT) -> dict[str, Any]:
    """The ``request`` a recorded envelope carries: the whole digest and the parts, of the body ``provider`` sends.

    Another provider than the default is named in the record and in its digest: the same case
    asked in another wire format is another request. (The default is left out, so every
    recording made before providers were chosen keeps its digest.)
    """
    body = provider.request_body(case, model, temperature, stream=False)
    fields = provider.answer_fields
    sent = {k: body[k] for k in fields if k in body}
    if provider.name == DEFAULT_PROVIDER:
        return {"digest": digest(sent), "parts": request_parts(body, fields)}
    return {"digest": digest({**sent, "provider": provider.name}), "parts": request_parts(body, fields),
            "provider": provider.name}


@dataclass(frozen=True)
class Staleness:
    """How a case's recordings stand against the request it would send now."""

    stale: Mapping[str, str]  # case id -> what differs, in words
    unverified: tuple[str, ...]  # cases answered by recordings without a request record (older recordings)


def differences(recorded: Mapping[str, Any], now: Mapping[str, Any], case: Case) -> str:
    """What moved between the recorded request's parts and today's, in words."""
    words = []
    for name in sorted(set(recorded) | set(now), key=_part_order):
        before, after = recorded.get(name), now.get(name)
        if before == after:
            continue
        if name in _PLAIN and before is not None and after is not None:
            words.append(f"{name} {before} → {after}")
        elif name.startswith("messages["):
            words.append(_message_words(name, case, before is None, after is None))
        else:
            words.append(f"{name} {'added' if before is None else 'removed' if after is None else 'changed'}")
    return ", ".join(words) or "the request changed"


def _part_order(name: str) -> tuple[int, int, str]:
    if name.startswith("messages["):
        return (1, int(name[9:-1]), name)
    return (0 if name in _PLAIN else 2, 0, name)


def _message_words(name: str, case: Case, added: bool, removed: bool) -> str:
    """A moved message, named by where it comes from when a file holds it."""
    index = int(name[9:-1])
    if added or removed:
        return f"{name} {'added' if added else 'removed'}"
    role = case.messages[index].get("role") if index < len(case.messages) else None
    source = case.sources.get(str(role)) if role in ("system", "user") else None
    return f"{role}: {source} changed" if source else f"{name}.content"


def staleness(case: Case, recorded: Sequence[Mapping[str, Any] | None], temperature: float) -> tuple[str | None, bool]:
    """(what differs for the first stale recording or None, whether any recording has no request record)."""
    unverified = False
    for request in recorded:
        # None, an older recording's, settled before the costlier check of an abstract type.
        if request is None or not isinstance(request, Mapping) or "digest" not in request:
            unverified = True
            continue
        parts = request.get("parts") or {}
        model = parts.get("model")
        if not isinstance(model, str):
            unverified = True
            continue
        asked = request.get("provider")
        now = request_record(case, model, temperature,
                             provider_named(asked if isinstance(asked, str) else DEFAULT_PROVIDER,
                                            "a recording's request provider"))
        if now["digest"] != request["digest"]:
            return differences(parts, now["parts"], case), unverified
    return None, unverified


def check_recordings(cases: list[Case] | tuple[Case, ...], requests: Mapping[str, Sequence[Mapping[str, Any] | None]],
                     temperature: float) -> Staleness:
    """Every case's recordings (``requests``: what each of its recordings says it answered) against the request it
    would send now.

    Offline and replayed runs only. A bare ``completion`` is a hand-written answer, not a recording: it has no requests.
    """
    stale: dict[str, str] = {}
    unverified: list[str] = []
    for case in cases:
        recorded = requests.get(case.id)
        if not recorded:
            continue
        moved, legacy = staleness(case, recorded, temperature)
        if moved is not None:
            stale[case.id] = moved
        elif legacy:
            unverified.append(case.id)
    return Staleness(stale, tuple(unverified))
