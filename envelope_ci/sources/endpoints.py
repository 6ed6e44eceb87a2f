"""Named endpoints of ``envelope-ci.yaml`` (the llm-rubric judges): validated, overridden from the CLI, keys from the environment."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import Problem, UsageError
from ..model import Case
from ..urls import url_problem

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


def endpoints_from(data: Mapping[str, Mapping[str, Any]]) -> dict[str, Endpoint]:
    """The validated ``endpoints`` mapping as Endpoints."""
    return {name: Endpoint(name, e["base_url"], e["model"], e.get("api_key_env"), float(e.get("temperature", 0.0))) for name, e in data.items()}


def parse_override(text: str) -> tuple[str, str]:
    """``--endpoint NAME=URL`` as (name, url); ValueError words what is wrong."""
    name, sep, url = text.partition("=")
    if not sep or not name or not url:
        raise ValueError(f"expected NAME=URL, got {text!r}")
    return name, url


def with_overrides(endpoints: Mapping[str, Endpoint], overrides: Sequence[tuple[str, str]], shown: str) -> dict[str, Endpoint]:
    """The endpoints with ``--endpoint NAME=URL`` applied; a name the config does not define, or a bad URL, is bad usage."""
    out = dict(endpoints)
    problems = []
    for name, url in overrides:
        why = url_problem(url)
        if name not in out:
            problems.append(f"--endpoint {name}=...: no endpoint {name!r} in {shown} (it defines: {', '.join(sorted(out)) or 'none'})")
        elif why:
            problems.append(f"--endpoint {name}= {why}")
        else:
            out[name] = Endpoint(name, url, out[name].model, out[name].api_key_env, out[name].temperature)
    if problems:
        raise UsageError([Problem("", None, None, p) for p in problems])
    return out


def checked_endpoints(endpoints: Mapping[str, Endpoint], overrides: Sequence[tuple[str, str]], cases: Sequence[Case],
                      path: Path | None) -> dict[str, Endpoint]:
    """The run's endpoints (``--endpoint`` applied), once every rubric is known to name one of them: bad usage otherwise, offline too."""
    shown = path.as_posix() if path else "envelope-ci.yaml (none found)"
    out = with_overrides(endpoints, overrides, shown)
    unknown = unknown_endpoints(cases, out, shown)
    if unknown:
        raise UsageError(unknown)
    return out


def unknown_endpoints(cases: Sequence[Case], endpoints: Mapping[str, Endpoint], shown: str) -> list[Problem]:
    """An llm-rubric naming an endpoint the config does not define, on the case's line: found offline as well as live."""
    return [Problem(case.file, case.line, "assert", f"llm-rubric endpoint {name!r} is not defined under 'endpoints' in {shown}")
            for case in cases for name in sorted(case_endpoints(case)) if name not in endpoints]


def case_endpoints(case: Case) -> set[str]:
    """The endpoints a case's llm-rubric assertions name."""
    return {e.value.endpoint for e in case.expectations if e.kind.name == "llm-rubric"}


def api_key(endpoint: Endpoint, environ: Mapping[str, str], shown: str) -> str | None:
    """The endpoint's key from its environment variable: only a live run asks, so a fork PR's offline run never needs it."""
    if endpoint.api_key_env is None:
        return None
    key = environ.get(endpoint.api_key_env)
    if not key:
        raise UsageError([Problem(shown, None, f"endpoints.{endpoint.name}.api_key_env",
                                  f"${endpoint.api_key_env} is not set in the environment (export it, or run offline)")])
    return key
