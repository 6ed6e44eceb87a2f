"""The action's inputs: read as the runner exports them, checked, typed."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from ..model import Lane
from ..shard import ShardSpec, parse_shard
from ..sources.endpoints import parse_key_env, parse_override

# The inputs of action.yml and their defaults (tests check the two agree). The runner
# always exports every input; the defaults matter when the script runs outside it.
INPUT_DEFAULTS: dict[str, str] = {
    "fixtures": "evals",
    "pins": "",
    "base-url": "",
    "model": "",
    "lane": "smoke",
    "endpoint-class": "",
    "temperature": "0",
    "concurrency": "4",
    "repeats": "1",
    "stream": "false",
    "provider": "openai-chat",
    "endpoints": "",
    "allow-key-env": "",
    "replay": "",
    "config": "",
    "comment": "true",
    "github-token": "",  # action.yml: ${{ github.token }}
    "fail-on-inconclusive": "true",
    "working-directory": ".",
    "mode": "run",
    "shard": "",
    "reports": "",
    "max-run-time": "1800",  # 30 minutes: a run is bounded by default (action.yml)
    "history": "0",  # off: the trend needs the base branch's history (fetch-depth: 0)
}
BOOLEAN_INPUTS = ("stream", "comment", "fail-on-inconclusive")
COUNT_INPUTS = ("concurrency", "repeats")
# run: grade and publish; shard: grade one part, publish nothing (a matrix job); merge: judge every part, publish once.
MODES = ("run", "shard", "merge")
# The most base-branch changes of the pins the comment's trend may show: it stays a small part of the comment.
HISTORY_MAX = 100
# The sampling temperatures OpenAI-compatible endpoints accept.
TEMPERATURE_RANGE = (0.0, 2.0)


T = TypeVar("T")


class InputError(Exception):
    """An action input that cannot be used; the message names it."""


def read_input(env: Mapping[str, str], name: str) -> str:
    """An input as the runner exports it (`INPUT_BASE-URL`) or in underscore form (`INPUT_BASE_URL`)."""
    upper = name.replace(" ", "_").upper()
    for key in dict.fromkeys((f"INPUT_{upper}", f"INPUT_{upper.replace('-', '_')}")):
        value = env.get(key, "").strip()
        if value:
            return value
    return INPUT_DEFAULTS.get(name, "")


def allowed_secrets(env: Mapping[str, str]) -> list[str]:
    """The values of the variables the ``allow-key-env`` input lists: masked in the log like EVAL_API_KEY."""
    names = (item.strip() for item in re.split(r"[,\n]", read_input(env, "allow-key-env")))
    return [env.get(name, "") for name in names if name]


def parse_bool(name: str, value: str) -> bool:
    """YAML 1.2 core-schema booleans, as actions/toolkit's getBooleanInput accepts them."""
    if value in ("true", "True", "TRUE"):
        return True
    if value in ("false", "False", "FALSE"):
        return False
    raise InputError(f"input {name!r} must be true or false, got {value!r}")


@dataclass(frozen=True)
class Inputs:
    """The action inputs, read and checked; empty strings mean "not given"."""

    fixtures: str
    pins: str
    base_url: str
    model: str
    lane: Lane
    endpoint_class: str
    temperature: float
    concurrency: int
    repeats: int
    stream: bool
    provider: str
    replay: str
    config: str
    comment: bool
    github_token: str
    fail_on_inconclusive: bool
    working_directory: str
    mode: str
    shard: ShardSpec | None
    reports: str
    max_run_time: float | None  # seconds; None: no deadline for the whole run
    endpoints: tuple[tuple[str, str], ...] = ()  # NAME=URL: a judge's URL, as --endpoint
    allow_key_env: tuple[str, ...] = ()  # variables envelope-ci.yaml may send, as --allow-key-env
    history: int = 0  # the comment's trend over this many base-branch changes of the pins; 0: none

    def __repr__(self) -> str:  # never show the token, even in a traceback
        return f"Inputs(fixtures={self.fixtures!r}, working_directory={self.working_directory!r})"


def read_inputs(env: Mapping[str, str]) -> Inputs:
    """All inputs; InputError names every unusable one."""
    values = {name: read_input(env, name) for name in INPUT_DEFAULTS}
    problems = [problem for name in BOOLEAN_INPUTS if (problem := _bool_problem(name, values[name]))]
    if values["lane"] not in {lane.value for lane in Lane}:
        problems.append(f"input 'lane' must be smoke or adjudication, got {values['lane']!r}")
    problems += [f"input {name!r} must be a positive whole number, got {values[name]!r}"
                 for name in COUNT_INPUTS if not re.fullmatch(r"[1-9][0-9]{0,5}", values[name])]
    temperature = parse_temperature(values["temperature"])
    if temperature is None:
        low, high = TEMPERATURE_RANGE
        problems.append(f"input 'temperature' must be a number from {low:g} to {high:g}, got {values['temperature']!r}")
    shard = None
    try:
        shard = parse_shard(values["shard"]) if values["shard"] else None
    except ValueError as exc:
        problems.append(f"input 'shard': {exc}")
    problems += _mode_problems(values)
    max_run_time = parse_seconds(values["max-run-time"]) if values["max-run-time"] else None
    if values["max-run-time"] and max_run_time is None:
        problems.append(f"input 'max-run-time' must be a positive number of seconds (e.g. 1200), "
                        f"got {values['max-run-time']!r}")
    endpoints = _listed(values["endpoints"], "endpoints", parse_override, problems)
    allow_key_env = _listed(values["allow-key-env"], "allow-key-env", parse_key_env, problems)
    history = parse_history(values["history"])
    if history is None:
        problems.append(f"input 'history' must be a whole number from 0 (off) to {HISTORY_MAX}, "
                        f"got {values['history']!r}")
    if problems or temperature is None or history is None:
        raise InputError("; ".join(problems))
    return Inputs(
        fixtures=values["fixtures"],
        pins=values["pins"],
        base_url=values["base-url"],
        model=values["model"],
        lane=Lane(values["lane"]),
        endpoint_class=values["endpoint-class"],
        temperature=temperature,
        concurrency=int(values["concurrency"]),
        repeats=int(values["repeats"]),
        stream=parse_bool("stream", values["stream"]),
        provider=values["provider"].strip() or "openai-chat",
        replay=values["replay"],
        config=values["config"],
        comment=parse_bool("comment", values["comment"]),
        github_token=values["github-token"],
        fail_on_inconclusive=parse_bool("fail-on-inconclusive", values["fail-on-inconclusive"]),
        working_directory=values["working-directory"],
        mode=values["mode"],
        shard=shard,
        reports=values["reports"],
        max_run_time=max_run_time,
        endpoints=tuple(endpoints),
        allow_key_env=tuple(allow_key_env),
        history=history,
    )


def _listed(value: str, name: str, parse: Callable[[str], T], problems: list[str]) -> list[T]:
    """A list input, one item per line or comma (``judge=https://…``, ``JUDGE_KEY``); a bad item is a problem."""
    items = []
    for item in filter(None, (part.strip() for part in re.split(r"[,\n]", value))):
        try:
            items.append(parse(item))
        except ValueError as exc:
            problems.append(f"input {name!r}: {exc}")
    return items


def _mode_problems(values: Mapping[str, str]) -> list[str]:
    """``shard`` goes with mode shard, ``reports`` with mode merge, and each needs its own."""
    mode = values["mode"]
    if mode not in MODES:
        return [f"input 'mode' must be {', '.join(MODES[:-1])} or {MODES[-1]}, got {mode!r}"]
    problems = []
    if (mode == "shard") != bool(values["shard"]):
        problems.append("input 'shard' (I/N, e.g. 2/4) is needed with mode: shard" if mode == "shard"
                        else f"input 'shard' is read only with mode: shard (mode is {mode})")
    if (mode == "merge") != bool(values["reports"]):
        problems.append("input 'reports' (a glob of the shards' report.json files, e.g. envelope-shards/*/report.json) "
                        "is needed with mode: merge"
                        if mode == "merge" else f"input 'reports' is read only with mode: merge (mode is {mode})")
    return problems


def parse_temperature(value: str) -> float | None:
    """A plain decimal in TEMPERATURE_RANGE, else None: finite by construction (float() would take `nan`, `inf`,
    `1_0`)."""
    if not re.fullmatch(r"[0-9]{1,3}(?:\.[0-9]{1,6})?|\.[0-9]{1,6}", value):
        return None
    number = float(value)
    low, high = TEMPERATURE_RANGE
    return number if low <= number <= high else None


def parse_history(value: str) -> int | None:
    """How many base-branch changes of the pins the comment's trend shows (0: none), else None."""
    if not re.fullmatch(r"0|[1-9][0-9]{0,2}", value):
        return None
    return int(value) if int(value) <= HISTORY_MAX else None


def parse_seconds(value: str) -> float | None:
    """A plain positive decimal number of seconds, else None (``nan``, ``1e3``, ``-5`` and ``0`` are not deadlines)."""
    if not re.fullmatch(r"[0-9]{1,7}(?:\.[0-9]{1,3})?", value):
        return None
    number = float(value)
    return number if number > 0 else None


def _bool_problem(name: str, value: str) -> str | None:
    """Why a boolean input is unusable, or None."""
    try:
        parse_bool(name, value)
    except InputError as exc:
        return str(exc)
    return None
