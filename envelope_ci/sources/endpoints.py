"""Named endpoints of ``envelope-ci.yaml`` (the llm-rubric judges, and ``embeddings`` for ``similar``): validated,
overridden from the CLI, keys from the environment.

The settings file is pull-request content, so it never chooses where a secret goes: on a live
run an endpoint it names is called only at a host the operator allowed, with a key only from a
variable the operator allowed (``untrusted_endpoints``; docs/judge.md, SECURITY.md).
"""
from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import Problem, UsageError
from ..model import DEFAULT_PROVIDER, Case
from ..providers.registry import is_provider, unknown_provider
from ..urls import origin, shown_host, url_problem

# The operator's key for the --base-url host: it goes to that origin and nowhere else.
BASE_KEY_ENV = "EVAL_API_KEY"
# The endpoint ``similar`` asks for embeddings (OpenAI's /v1/embeddings shape); its ``temperature`` is not used.
EMBEDDINGS = "embeddings"
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

_NAME = "^[A-Za-z_][A-Za-z0-9_-]*$"
ENDPOINTS_SCHEMA = {
    "type": "object",
    "propertyNames": {"pattern": _NAME},
    "additionalProperties": {
        "type": "object",
        "additionalProperties": False,
        "required": ["base_url", "model"],
        "properties": {
            "base_url": {"type": "string", "minLength": 1},
            "model": {"type": "string", "minLength": 1},
            # The name of an environment variable: a key written into a committed file is a leaked key.
            "api_key_env": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
            "temperature": {"type": "number", "minimum": 0, "maximum": 2},
            # The wire format (providers.registry): how the key is sent, never where (SECURITY.md).
            "provider": {"type": "string", "minLength": 1},
        },
    },
}


@dataclass(frozen=True)
class Endpoint:
    """One named endpoint as configured; the key stays in the environment until a live run reads it."""

    name: str
    base_url: str
    model: str
    api_key_env: str | None = None
    temperature: float = 0.0
    given: bool = False  # the operator gave its URL (--endpoint NAME=URL, the Action's endpoints input)
    provider: str = DEFAULT_PROVIDER  # its wire format: a judge may speak another than the run's


def endpoints_from(data: Mapping[str, Mapping[str, Any]]) -> dict[str, Endpoint]:
    """The validated ``endpoints`` mapping as Endpoints."""
    return {name: Endpoint(name, e["base_url"], e["model"], e.get("api_key_env"), float(e.get("temperature", 0.0)),
                           provider=e.get("provider", DEFAULT_PROVIDER))
            for name, e in data.items()}


def parse_override(text: str) -> tuple[str, str]:
    """``--endpoint NAME=URL`` as (name, url); ValueError words what is wrong."""
    name, sep, url = text.partition("=")
    if not sep or not name or not url:
        raise ValueError(f"expected NAME=URL, got {text!r}")
    return name, url


def parse_key_env(text: str) -> str:
    """``--allow-key-env NAME``: an environment variable's name; ValueError words what is wrong."""
    if not ENV_NAME.fullmatch(text):
        raise ValueError(f"expected the name of an environment variable (letters, digits, _), got {text!r}")
    return text


def with_overrides(endpoints: Mapping[str, Endpoint], overrides: Sequence[tuple[str, str]],
                   shown: str) -> dict[str, Endpoint]:
    """The endpoints with ``--endpoint NAME=URL`` applied; a name the config does not define, or a bad URL, is bad
    usage."""
    out = dict(endpoints)
    problems = []
    for name, url in overrides:
        why = url_problem(url)
        if name not in out:
            problems.append(f"--endpoint {name}=...: no endpoint {name!r} in {shown} "
                            f"(it defines: {', '.join(sorted(out)) or 'none'})")
        elif why:
            problems.append(f"--endpoint {name}= {why}")
        else:
            out[name] = replace(out[name], base_url=url, given=True)
    if problems:
        raise UsageError([Problem("", None, None, p) for p in problems])
    return out


def checked_endpoints(endpoints: Mapping[str, Endpoint], overrides: Sequence[tuple[str, str]], cases: Sequence[Case],
                      path: Path | None) -> dict[str, Endpoint]:
    """The run's endpoints (``--endpoint`` applied), once every rubric is known to name one of them: bad usage
    otherwise, offline too."""
    shown = path.as_posix() if path else "envelope-ci.yaml (none found)"
    out = with_overrides(endpoints, overrides, shown)
    unknown = unknown_endpoints(cases, out, shown) + [
        Problem(shown, None, f"endpoints.{e.name}.provider", unknown_provider(e.provider, "provider"))
        for e in out.values() if not is_provider(e.provider)]
    if unknown:
        raise UsageError(unknown)
    return out


def unknown_endpoints(cases: Sequence[Case], endpoints: Mapping[str, Endpoint], shown: str) -> list[Problem]:
    """An llm-rubric naming an endpoint the config does not define, or a ``similar`` without ``embeddings``, on the
    case's line: found offline as well as live."""
    found = [Problem(case.file, case.line, "assert", f"{kind} endpoint {name!r} is not defined under 'endpoints' in "
                     f"{shown}" + (" (an OpenAI-compatible /v1/embeddings endpoint)" if kind == "similar" else ""))
             for case in cases for kind, name in sorted(_named(case)) if name not in endpoints]
    embeddings = endpoints.get(EMBEDDINGS)
    if embeddings is not None and embeddings.provider != DEFAULT_PROVIDER and any(
            kind == "similar" for case in cases for kind, _ in _named(case)):
        found.append(Problem(shown, None, f"endpoints.{EMBEDDINGS}.provider", (
            f"{embeddings.provider!r}: similar's embeddings are asked in OpenAI's /v1/embeddings shape only "
            f"(leave provider out, or {DEFAULT_PROVIDER!r})")))
    return found


def case_endpoints(case: Case) -> set[str]:
    """The endpoints a case's llm-rubric and ``similar`` assertions call."""
    return {name for _, name in _named(case)}


def _named(case: Case) -> set[tuple[str, str]]:
    """(assertion type, endpoint name) of each assertion of the case that calls an endpoint."""
    return {(e.kind.name, e.value.endpoint if e.kind.name == "llm-rubric" else EMBEDDINGS)
            for e in case.expectations if e.kind.name in ("llm-rubric", "similar")}


def api_key(endpoint: Endpoint, environ: Mapping[str, str], shown: str) -> str | None:
    """The endpoint's key from its environment variable: only a live run asks, so a fork PR's offline run never
    needs it."""
    if endpoint.api_key_env is None:
        return None
    key = environ.get(endpoint.api_key_env)
    if not key:
        raise UsageError([Problem(shown, None, f"endpoints.{endpoint.name}.api_key_env",
                                  f"${endpoint.api_key_env} is not set in the environment "
                                  "(export it, or run offline)")])
    return key


def key_refusal(variable: str, url: str, base_url: str | None, allowed: Collection[str]) -> str | None:
    """Why ``$variable`` may not be sent to ``url``, or None: the operator allowed it (EVAL_API_KEY: its host only)."""
    if variable == BASE_KEY_ENV:
        if base_url is not None and origin(url) is not None and origin(url) == origin(base_url):
            return None
        there = shown_host(base_url, url) if base_url else "none: the run is offline"
        return (f"the settings file asks for ${BASE_KEY_ENV} at host {shown_host(url, base_url)}, "
                f"but that key goes only to the --base-url host ({there})")
    if variable in allowed:
        return None
    return (f"the settings file asks for ${variable}, which the operator did not allow "
            f"(allow it with --allow-key-env {variable}, or the Action input allow-key-env)")


def untrusted_endpoints(endpoints: Mapping[str, Endpoint], names: Collection[str], base_url: str | None,
                        allowed: Collection[str], shown: str, line: int | None = None) -> list[Problem]:
    """Why a live run may not call each of the endpoints ``names`` (the ones its cases use): before any request.

    An endpoint may be called only at a host the operator allowed (its URL given with --endpoint, or
    the --base-url origin) and with a key only from a variable the operator allowed (--allow-key-env;
    EVAL_API_KEY only at the --base-url origin).
    """
    problems = []
    for name in sorted(names):
        endpoint = endpoints[name]
        if not endpoint.given and (origin(endpoint.base_url) is None or origin(endpoint.base_url) != origin(base_url)):
            host = shown_host(endpoint.base_url, base_url)
            problems.append(Problem(shown, line, f"endpoints.{name}", (
                f"the settings file names host {host}, which the operator did not allow (give it with "
                f"--endpoint {name}=URL or the Action input endpoints, or use the --base-url host)")))
        why = key_refusal(endpoint.api_key_env, endpoint.base_url, base_url, allowed) if endpoint.api_key_env else None
        if why:
            problems.append(Problem(shown, line, f"endpoints.{name}.api_key_env", why))
    return problems
