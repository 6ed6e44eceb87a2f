"""Every provider by name: the built-ins, then the ``envelope_ci.providers`` entry points.

A run chooses one with ``--provider NAME`` (a named endpoint with ``provider:``), and grading
reads each envelope with the provider named on it, so a recording is read in the wire format
that made it. Built-ins are found without loading plug-ins: an offline run of ``openai-chat``
recordings never imports a third-party package.
"""
from __future__ import annotations

import difflib
from collections.abc import Mapping
from functools import lru_cache
from types import MappingProxyType

from ..errors import UsageError
from ..plugins import load_plugins
from .anthropic_messages import ANTHROPIC_MESSAGES
from .base import Provider
from .openai_chat import OPENAI_CHAT
from .openai_responses import OPENAI_RESPONSES

ENTRY_POINT_GROUP = "envelope_ci.providers"
BUILTIN: tuple[Provider, ...] = (OPENAI_CHAT, ANTHROPIC_MESSAGES, OPENAI_RESPONSES)
_BUILTIN_BY_NAME = {p.name: p for p in BUILTIN}


@lru_cache(maxsize=1)
def providers() -> Mapping[str, Provider]:
    """Every provider by name; a plug-in may not take a name already taken."""
    found: dict[str, Provider] = {}
    for provider in (*BUILTIN, *load_plugins(ENTRY_POINT_GROUP, Provider, "provider")):  # type: ignore[type-abstract]
        if provider.name in found:
            raise UsageError(f"provider {provider.name!r} is registered twice (a plug-in takes a name in use)")
        found[provider.name] = provider
    return MappingProxyType(found)


def provider_named(name: str, asked_by: str = "--provider") -> Provider:
    """The provider called ``name``; an unknown one is bad usage naming who asked, the likeliest name and the known
    ones."""
    builtin = _BUILTIN_BY_NAME.get(name)
    if builtin is not None:
        return builtin
    known = providers()
    if name in known:
        return known[name]
    raise UsageError(unknown_provider(name, asked_by))


def is_provider(name: str) -> bool:
    """Whether a provider is called ``name`` (plug-ins are loaded only for a name no built-in has)."""
    return name in _BUILTIN_BY_NAME or name in providers()


def unknown_provider(name: str, asked_by: str) -> str:
    """Why ``name`` is no provider, with a did-you-mean and the names there are."""
    known = sorted(providers())
    guess = difflib.get_close_matches(name, known, n=1)
    hint = f" (did you mean {guess[0]!r}?)" if guess else ""
    return f"{asked_by} {name!r} is not a provider{hint}; known: {', '.join(known)}"
