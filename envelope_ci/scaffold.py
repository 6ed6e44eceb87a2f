"""``envelope-ci init``: a fixtures directory that passes offline as written, its settings and a workflow.

The settings file is generated from ``Thresholds`` and the settings schema, so it lists every
setting with its real default and cannot drift from them.
"""
from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from msgspec.structs import fields

from . import atomic
from .errors import Problem, UsageError
from .model import CONFIG_NAMES, Thresholds
from .sources.cases import load_cases
from .sources.requests import request_record
from .sources.settings import CONFIG_SCHEMA

WORKFLOW = Path(".github/workflows/envelope-ci.yml")
# The model the scaffold's recorded answers stand for (asked for, as --model would be).
MODEL = "gpt-4o-mini"
# A case's id line, in any of the scaffold's file shapes (one case, a list, the cases of a defaults file).
_ID = re.compile(r"^\s*(?:- )?id: (\S+)\s*$")
DOCS = "https://github.com/envelope-ci/envelope-ci/blob/main/docs"

# What each setting does, in one line; the type, range and default come from the schema and Thresholds.
_MEANING = {
    "size_slack": "chars (and real tokens) may grow to pin × this",
    "time_slack": "median ms may grow to pin × this ...",
    "time_floor_ms": "... but the time limit is never tighter than pin + this",
    "easy_floor": "easy (and unstratified) pass rate below this: easy_regression",
    "medium_floor": "medium pass rate below this: medium_regression",
    "stretch_high": "stretch pass rate at or above this: stretch_too_easy (add harder cases)",
    "ceiling_easy": "easy's share of the ceiling alarm (every stratum saturated)",
    "ceiling_medium": "medium's share of the ceiling alarm",
    "thin_below": "a stratum with some cases but fewer than this: thin_stratum",
    "require_strata": "an empty easy, medium or stretch stratum is thin_stratum too",
    "min_delivered_share": "below this share of delivered cases the run is inconclusive",
    "fingerprint_change": "a case measured under another fingerprint (model, endpoint, temperature) than its pin",
    "baseline_lowered": "this PR's pins lower a case the base branch had right and stable",
    "headers": "extra request headers for live runs; ${NAME} is taken from the environment",
    "flip_alpha": "a case pinned flaky regresses when Fisher's exact test finds a drop at this level",
    "latency_shift_slack": "the run's latency level over the pins' past this fails the run (latency_shift); 'off'",
    "record_headers": "response headers --record keeps (none by default)",
}


def _kind(schema: Mapping[str, Any]) -> str:
    """A setting's type and range in a few words, from its schema."""
    if "enum" in schema:
        return " | ".join(map(str, schema["enum"]))
    kind = {"number": "number", "integer": "integer", "boolean": "boolean",
            "object": "mapping", "array": "list"}.get(schema.get("type", ""), "value")
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None and high is not None:
        return f"{kind} {low}-{high}"
    return f"{kind} >= {low}" if low is not None else kind


def settings_text() -> str:
    """``envelope-ci.yaml`` with every setting commented out at its default."""
    defaults = {f.name: getattr(Thresholds(), f.name) for f in fields(Thresholds)}
    rows = []
    for key, schema in CONFIG_SCHEMA["properties"].items():
        value = json.dumps(defaults[key]) if key in defaults else ("[]" if schema.get("type") == "array" else "{}")
        meaning = f": {_MEANING[key]}" if key in _MEANING else ""
        rows.append((f"# {key}: {value}", f"# {_kind(schema)}{meaning}"))
    width = max(len(setting) for setting, _ in rows) + 2
    body = "\n".join(f"{setting:<{width}}{meaning}" for setting, meaning in rows)
    return f"""\
# envelope-ci settings for this fixtures directory. Every setting is listed at its default,
# commented out: uncomment a line to change it. This file is part of the fixtures hash, so a
# change to it fails the next run with fixtures_changed until the pins are written again.
# Reference: {DOCS}/fixtures.md#settings-envelope-ciyaml

{body}
"""


_ORDER_STATUS = """\
# A JSON case: the answer must parse as JSON, fit `schema`, and contain `expect_json`.
# `recorded` is the whole response as it came back: offline runs (and CI without a key)
# grade it. Replace it with your model's real answer: record a live run with --record,
# then `envelope-ci import` it (see `envelope-ci import --help`).
id: order-status-json
stratum: easy                  # easy | medium | stretch: each stratum is judged on its own
tags: [orders]                 # select with: envelope-ci run DIR --filter tag:orders
system: You are Parcel, the support assistant of Acme Outdoor. Reply with JSON only when asked for JSON.
prompt: "Order NW-1 shipped yesterday with 3-day delivery. Reply with JSON only: {order_id, status, eta_days}."
response_format: {type: json_object}
schema:
  type: object
  required: [order_id, status, eta_days]
  properties:
    order_id: {type: string, pattern: "^NW-[0-9]+$"}
    status: {enum: [processing, shipped, delivered, cancelled]}
    eta_days: {type: integer, minimum: 0}
expect_json: {order_id: NW-1, status: shipped}
recorded:
  http_status: 200
  elapsed_ms: 412.0
  headers: {content-type: application/json}
  body:
    model: gpt-4o-mini-2024-07-18
    choices:
      - index: 0
        finish_reason: stop
        message: {role: assistant, content: '{"order_id": "NW-1", "status": "shipped", "eta_days": 2}'}
    usage: {prompt_tokens: 52, completion_tokens: 21, total_tokens: 73}
"""

_SUPPORT = """\
# Cases that send the product's own prompt: `system_file` and `prompt_file` are read from
# this directory (a leading / means the repository root), and their {{ placeholders }} are
# filled from `vars`. The files are part of the fixtures: edit prompts/support.md and the
# next run fails with fixtures_changed, naming it and the cases that use it, until you re-pin.
# `defaults` apply to every case of this file; a case's own keys win, `assert` lists add up.
defaults:
  system_file: prompts/support.md
  vars: {company: Acme Outdoor, assistant: Parcel}
  assert:
    - {type: not-icontains-any, value: [as an AI, I cannot help]}
cases:
  - id: greeting
    stratum: easy
    tags: [tone]
    prompt: hi
    assert:
      - {type: icontains, value: Acme Outdoor}
      - {type: max-chars, value: 160}         # judged on the size channel, not the label
    completion: Hi! I'm Parcel from Acme Outdoor. How can I help with your order today?

  - id: refund-window
    stratum: medium
    tags: [billing]
    prompt_file: prompts/refund-request.md
    vars: {item: tent, days_since_delivery: 12}
    assert:
      - {type: regex, value: '\\b30 days\\b'}
      - {type: icontains-any, value: [refund, return]}
    completion: Yes. Acme Outdoor takes returns within 30 days of delivery, so your tent qualifies for a full refund.
"""

_TOOLS = """\
# A tool-call case: the request sends `tools` (OpenAI format), and the reply must call
# lookup_order with at least these arguments. Offline, the recorded tool_calls are graded.
- id: lookup-order-tool
  stratum: medium
  tags: [orders, tools]
  system_file: prompts/support.md
  vars: {company: Acme Outdoor, assistant: Parcel}
  prompt: Where is my order NW-1?
  tools:
    - type: function
      function:
        name: lookup_order
        description: Look up an order by its id.
        parameters: {type: object, properties: {order_id: {type: string}}, required: [order_id]}
  tool_choice: auto
  assert:
    - {type: tool-call, value: {name: lookup_order, arguments: {order_id: NW-1}}}
  recorded:
    http_status: 200
    elapsed_ms: 388.0
    headers: {content-type: application/json}
    body:
      model: gpt-4o-mini-2024-07-18
      choices:
        - index: 0
          finish_reason: tool_calls
          message:
            role: assistant
            content: null
            tool_calls:
              - {id: call_1, type: function, function: {name: lookup_order, arguments: '{"order_id": "NW-1"}'}}
      usage: {prompt_tokens: 98, completion_tokens: 17, total_tokens: 115}
"""

_SYSTEM_PROMPT = """\
You are {{ assistant }}, the support assistant of {{ company }}.
Be brief, accurate and polite. Never invent order data: look orders up with the tools you have.
Refund policy: any item can be returned within 30 days of delivery for a full refund.
"""

_REFUND_REQUEST = """\
I got my {{ item }} {{ days_since_delivery }} days ago and I don't like it. Can I still get my money back?
"""


def _workflow(fixtures: str) -> str:
    shown = fixtures if re.fullmatch(r"[\w./-]+", fixtures) else json.dumps(fixtures)
    return f"""\
# envelope-ci: grade the evals in {fixtures} on every pull request (written by envelope-ci init).
# It grades the answers recorded in the fixtures: no key, no network, safe on pull requests
# from forks. Live endpoints, forks, several suites: {DOCS}/action.md
name: envelope-ci

on:
  pull_request:

permissions:
  contents: read        # check out the code
  pull-requests: write  # create / update the sticky comment

concurrency:
  group: envelope-ci-${{{{ github.event.pull_request.number }}}}
  cancel-in-progress: true

jobs:
  evals:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
        with:
          fetch-depth: 2   # lets the action read the base branch's pins from git
      - name: envelope-ci
        id: envelope
        uses: envelope-ci/envelope-ci@v1
        with:
          fixtures: {shown}
"""


@dataclass(frozen=True)
class Scaffold:
    """The files ``init`` writes (path -> text) and the commands to run next, each with what it is for."""

    files: dict[Path, str]
    next_commands: tuple[tuple[str, str], ...]
    directory: Path


def plan(directory: Path, workflow: bool, root: Path) -> Scaffold:
    """What ``init`` would write for ``directory``; the workflow goes under ``root`` (the repository)."""
    files = {
        directory / CONFIG_NAMES[0]: settings_text(),
        directory / "order-status.yaml": _ORDER_STATUS,
        directory / "support.yaml": _SUPPORT,
        directory / "tools.yaml": _TOOLS,
        directory / "prompts" / "support.md": _SYSTEM_PROMPT,
        directory / "prompts" / "refund-request.md": _REFUND_REQUEST,
    }
    shown = directory.as_posix()
    added = [shown]
    if workflow:
        try:
            fixtures = directory.resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            raise UsageError(f"{shown} is outside {root.as_posix()}: run init from the repository's root, "
                             "or pass --no-workflow") from None
        files[root / WORKFLOW] = _workflow(fixtures)
        added.append((root / WORKFLOW).as_posix())
    quoted = shlex.quote(shown)
    return Scaffold(files, (
        (f"envelope-ci run {quoted}", "grade the recorded answers offline: no key, no network"),
        (f"envelope-ci run {quoted} --lane adjudication --write-pins",
         "write the pins every pull request is judged against"),
        (f"git add {' '.join(map(shlex.quote, added))} && git commit -m 'Add envelope-ci evals and pins'",
         "commit them"),
    ), directory)


def write(scaffold: Scaffold) -> None:
    """Write every file, or none when any of them exists already (init never overwrites)."""
    taken = [path for path in scaffold.files if path.exists()]
    if taken:
        raise UsageError([Problem(path.as_posix(), None, None,
                                  "already exists: init never overwrites a file; move it away, "
                                  "or init another directory") for path in taken])
    for path, text in scaffold.files.items():
        atomic.write_text(path, text)
    _record_requests(scaffold.directory)


def _record_requests(directory: Path) -> None:
    """Give each written recording the request record ``--record`` would have, as ``request:`` under ``recorded:``.

    The scaffold's answers stand for a recorded run: without the record an offline run could
    not tell they answer today's prompts (it would say so in a note on the very first run).
    """
    cases = {c.id: c for c in load_cases(directory, set())}
    for path in sorted(directory.glob("*.yaml")):
        lines, out, current = path.read_text("utf-8").split("\n"), [], None
        for i, line in enumerate(lines):
            out.append(line)
            found = _ID.match(line)
            current = found.group(1) if found else current
            if line.strip() == "recorded:" and current in cases and i + 1 < len(lines):
                indent = len(lines[i + 1]) - len(lines[i + 1].lstrip())
                out.append(" " * indent + "request: " + json.dumps(request_record(cases[current], MODEL, 0.0)))
        atomic.write_text(path, "\n".join(out))
