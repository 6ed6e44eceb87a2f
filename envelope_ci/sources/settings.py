"""``envelope-ci.yaml``: thresholds and extra request headers, validated like a fixture file."""
from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from msgspec.structs import fields, replace

from ..errors import Problem, UsageError
from ..grading.assertions.cost import priced
from ..model import CONFIG_NAMES, Case, Thresholds
from .cases import enum_message, load_cases, not_json, unknown_key_problems
from .endpoints import BASE_KEY_ENV, ENDPOINTS_SCHEMA, Endpoint, case_endpoints, endpoints_from, untrusted_endpoints
from .files import read_text
from .parse import RawCase, parse_yaml_document
from .validate import FileSchema

_RATE = {"type": "number", "minimum": 0, "maximum": 1}
_DOLLARS = {"type": "number", "minimum": 0, "description": "dollars per million tokens"}
# model id -> dollars per million input and output tokens: ``cost`` reads them; none ship in the package
PRICES_SCHEMA = {"type": "object", "propertyNames": {"minLength": 1},
                 "additionalProperties": {"type": "object", "additionalProperties": False,
                                          "required": ["input", "output"],
                                          "properties": {"input": _DOLLARS, "output": _DOLLARS}}}
CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "size_slack": {"type": "number", "minimum": 1},
        "time_slack": {"type": "number", "minimum": 1},
        "time_floor_ms": {"type": "number", "minimum": 0},
        "easy_floor": _RATE,
        "medium_floor": _RATE,
        "stretch_high": _RATE,
        "ceiling_easy": _RATE,
        "ceiling_medium": _RATE,
        "thin_below": {"type": "integer", "minimum": 0},
        "require_strata": {"type": "boolean"},
        "min_delivered_share": _RATE,
        "fingerprint_change": {"enum": ["fail", "warn"]},
        "baseline_lowered": {"enum": ["warn", "fail"]},
        "recordings": {"enum": ["lenient", "strict"]},
        "flip_alpha": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
        "latency_shift_slack": {"anyOf": [{"type": "number", "minimum": 1}, {"const": "off"}]},
        "record_headers": {"type": "array", "items": {"type": "string", "pattern": "^[A-Za-z0-9!#$%&'*+.^_`|~-]+$"}},
        "headers": {"type": "object", "additionalProperties": {"type": "string"}},
        "endpoints": ENDPOINTS_SCHEMA,
        "prices": PRICES_SCHEMA,
    },
}
_SETTINGS = FileSchema(lambda: CONFIG_SCHEMA)


_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class FileConfig:
    """What ``envelope-ci.yaml`` may set."""

    thresholds: Thresholds
    headers: dict[str, str]  # as written: ``${NAME}`` is resolved only for a live run
    path: Path | None
    headers_line: int | None = None
    endpoints: Mapping[str, Endpoint] = field(default_factory=dict)  # named endpoints: the llm-rubric judges
    endpoints_line: int | None = None
    record_headers: tuple[str, ...] = ()  # response headers --record keeps (none by default)
    prices: Mapping[str, Mapping[str, float]] = field(default_factory=dict)  # model id -> {input, output} per M tokens

    @property
    def shown(self) -> str:
        return self.path.as_posix() if self.path else "envelope-ci.yaml"

    def header_refusals(self, allowed: Collection[str]) -> list[Problem]:
        """``${NAME}`` in a header the operator did not allow: the settings file is PR content and never picks a secret.

        Headers go to the --base-url host only, where EVAL_API_KEY goes anyway; any other variable
        must be allowed with --allow-key-env.
        """
        return [Problem(self.shown, self.headers_line, f"headers.{header}",
                        f"${{{name}}} is a variable the operator did not allow (allow it with --allow-key-env {name}, "
                        "or the Action input allow-key-env)")
                for header, value in self.headers.items() for name in dict.fromkeys(_VARIABLE.findall(value))
                if name != BASE_KEY_ENV and name not in allowed]

    def resolved_headers(self, environ: Mapping[str, str], allowed: Collection[str]) -> dict[str, str]:
        """The extra request headers with ``${NAME}`` taken from the environment (secrets stay out of files).

        Only a live run needs them, so an offline run (a fork PR, where secrets are withheld)
        never fails on a variable that is not set; and only variables the operator allowed
        (``allowed``, --allow-key-env; EVAL_API_KEY) are read at all.
        """
        refused = self.header_refusals(allowed)
        if refused:
            raise UsageError(refused)
        problems: list[Problem] = []

        def sub(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in environ:
                problems.append(Problem(self.shown, self.headers_line, "headers",
                                        f"${{{name}}} is not set in the environment (export it, or remove the header)"))
                return ""
            return environ[name]

        out = {k: _VARIABLE.sub(sub, v) for k, v in self.headers.items()}
        if problems:
            raise UsageError(problems)
        return out


def live_refusals(settings: FileConfig, cases: Sequence[Case], base_url: str | None,
                  allowed: Collection[str]) -> list[Problem]:
    """What a live run would send where the operator did not allow: headers' variables, judges' hosts and keys.

    Found before any request; an offline run sends nothing and is never refused.
    """
    names = {name for case in cases for name in case_endpoints(case)}
    return [*settings.header_refusals(allowed),
            *untrusted_endpoints(settings.endpoints, names, base_url, allowed, settings.shown, settings.endpoints_line)]


def find_config(fixtures_dir: Path, explicit: Path | None) -> Path | None:
    if explicit is not None:
        if not explicit.is_file():
            raise UsageError(f"{explicit}: config file not found")
        return explicit
    for name in CONFIG_NAMES:
        if (fixtures_dir / name).is_file():
            return fixtures_dir / name
    return None


def _problems(raw: RawCase) -> list[Problem]:
    """Every problem with the settings, each on its line; a value JSON cannot hold (``.inf``, a key that is not
    text) is one."""
    found = not_json(raw.data)
    if found is not None:
        return [Problem(raw.file, raw.line_of(found[0]), found[0] or None, found[1])]
    problems: list[Problem] = []
    for error in _SETTINGS.errors(raw.data):
        if error.validator == "additionalProperties":
            problems += unknown_key_problems(raw, error)
            continue
        top = str(error.absolute_path[0]) if error.absolute_path else None
        where = ".".join(map(str, error.absolute_path)) or None
        message = enum_message(error) if error.validator == "enum" else error.message
        problems.append(Problem(raw.file, raw.key_lines.get(top, raw.line) if top else raw.line, where, message))
    return problems


def load_file_config(fixtures_dir: Path, explicit: Path | None) -> FileConfig:
    """Thresholds and extra request headers, defaults where the file is silent."""
    path = find_config(fixtures_dir, explicit)
    if path is None:
        return FileConfig(Thresholds(), {}, None)
    shown = path.as_posix()
    raw = parse_yaml_document(read_text(path, shown), shown)
    if raw.data is None:
        return FileConfig(Thresholds(), {}, path)
    if not isinstance(raw.data, dict):
        raise UsageError([Problem(shown, 1, None, "expected a mapping of settings")])
    problems = _problems(raw)
    if problems:
        raise UsageError(problems)
    data = raw.data
    known = {f.name for f in fields(Thresholds)}
    # ``latency_shift_slack: off`` turns the shift alert off: the shift is still reported
    thresholds = replace(Thresholds(), **{k: None if (k, v) == ("latency_shift_slack", "off") else v
                                          for k, v in data.items() if k in known})
    return FileConfig(thresholds, dict(data.get("headers", {})), path, raw.key_lines.get("headers"),
                      endpoints_from(data.get("endpoints", {})), raw.key_lines.get("endpoints"),
                      tuple(data.get("record_headers", ())), dict(data.get("prices", {})))


def load_suite(fixtures_dir: Path, exclude: set[Path], explicit: Path | None) -> tuple[list[Case], FileConfig]:
    """The cases and the settings, every problem of both raised at once: a typo in one must not hide the other's."""
    problems: list[Problem] = []
    cases: list[Case] = []
    settings = FileConfig(Thresholds(), {}, None)
    try:
        cases = load_cases(fixtures_dir, exclude)
    except UsageError as exc:
        problems += exc.problems
    try:
        settings = load_file_config(fixtures_dir, explicit)
    except UsageError as exc:
        problems += exc.problems
    if problems:
        raise UsageError(problems)
    return priced(cases, settings.prices, settings.shown), settings
