"""IMPORT.md (how to run the imported suite, and every item not converted with why) and the edge: ``plan`` reads
the config and its files and ``write`` writes every file or none."""
from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ... import atomic
from ...errors import Problem, UsageError
from ...model import CONFIG_NAMES
from ..endpoints import ENV_NAME
from ..parse import loads_strict, parse_yaml_document
from .convert import Conversion, convert, yaml_text
from .providers import ModelRun
from .shown import Source, code_span, read_capped

IMPORT_NOTES = "IMPORT.md"


def _run_lines(into: str, run: ModelRun) -> list[str]:
    """The ``run`` command and Action inputs for one model provider."""
    flags = f"--base-url {shlex.quote(run.base_url)} --model {shlex.quote(run.model)}"
    flags += f" --provider {shlex.quote(run.provider)}" if run.provider != "openai-chat" else ""
    flags += f" --temperature {shlex.quote(str(run.temperature))}" if run.temperature is not None else ""
    inputs = [f"base-url: {run.base_url}", f"model: {run.model}", f"provider: {run.provider}"]
    inputs += [f"temperature: {run.temperature}"] if run.temperature is not None else []
    key = f'"${run.key_env}"' if ENV_NAME.fullmatch(run.key_env) else "..."  # checked at conversion; never pasted raw
    return [f"{code_span(run.source)}:", "", "```sh", f"EVAL_API_KEY={key} envelope-ci run {into} {flags}", "```",
            "", "As Action inputs (`with:`): " + ", ".join(code_span(i, 200) for i in inputs) + ".", ""]


def _endpoint_lines(into: str, endpoints: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """What the operator must pass for the judges and embeddings envelope-ci.yaml names."""
    if not endpoints:
        return []
    given = " ".join(f"--endpoint {shlex.quote(n + '=' + e['base_url'])}" for n, e in endpoints.items())
    keys = sorted({e["api_key_env"] for e in endpoints.values() if "api_key_env" in e})
    allowed = " ".join(f"--allow-key-env {shlex.quote(k)}" for k in keys)
    named = ", ".join(f"{code_span(n)} ({code_span(e['model'])} at {code_span(e['base_url'], 200)})"
                      for n, e in endpoints.items())
    return ["## Judges and embeddings", "",
            f"`envelope-ci.yaml` names {named}. "
            "The settings file is pull-request content, so it never chooses where a key goes: a live run calls "
            "these endpoints only at a URL the operator gives, and reads their key variables only when the operator "
            "allows them (docs/judge.md). Add to the run command:", "", "```sh", f"{given} {allowed}".strip(), "```",
            "", "In the Action: the inputs `endpoints` (" + ", ".join(code_span(f"{n}=URL") for n in endpoints) +
            ") and `allow-key-env` (" + ", ".join(map(code_span, keys)) + "), with the keys in the step's `env`.",
            ""]


def import_notes(source: str, into: str, done: Conversion) -> str:
    """IMPORT.md: how to run the imported suite, and every item not converted with why."""
    lines = ["# Imported from promptfoo", "",
             f"{code_span('envelope-ci import ' + source, 300)} wrote {done.cases} case(s) into "
             + ", ".join(code_span(f) for f in done.files if f.endswith(".yaml")) + " and `envelope-ci.yaml`.", "",
             *([f"Prompt files were copied: {', '.join(map(code_span, copied))}. To send the file your app "
                "ships instead, point `prompt_file` at it from the repository root (`/path/to/prompt.txt`).", ""]
               if (copied := [f for f in done.files if f.startswith("prompts/")]) else []),
             "## Run it against your model", "",
             "The model endpoint is the operator's: it is given on the command line or in the workflow, never in the "
             "settings file.", ""]
    for run in done.runs:
        lines += _run_lines(into, run)
    if not done.runs:
        lines += ["No provider of the config has an equivalent here: give `--base-url` and `--model` yourself.", ""]
    lines += _endpoint_lines(into, done.endpoints)
    lines += ["## Record once, then run offline", "",
              "```sh", f"EVAL_API_KEY=... envelope-ci run {into} --base-url URL --model MODEL --record run.jsonl",
              f"envelope-ci import run.jsonl --into {into}", f"envelope-ci run {into}",
              f"envelope-ci run {into} --lane adjudication --write-pins", "```", "",
              f"## Not converted ({len(done.skipped)})", ""]
    lines += [s.line() for s in done.skipped] or ["Nothing: every item was converted."]
    return "\n".join(lines) + "\n"


def _settings(endpoints: Mapping[str, Any]) -> str:
    header = "# Written by envelope-ci import from a promptfoo config; see IMPORT.md.\n"
    return header + (yaml_text({"endpoints": dict(endpoints)}) if endpoints else "")


def looks_like_promptfoo(path: Path) -> bool:
    """Whether ``import`` was given a promptfoo config (by its name, or by its top-level keys), not recordings."""
    if path.suffix not in (".yaml", ".yml", ".json"):
        return False
    if path.name.startswith("promptfooconfig"):
        return True
    try:
        data = read_config(path)
    except UsageError:
        return False
    return isinstance(data, dict) and ("prompts" in data or len({"providers", "tests", "defaultTest"} & set(data)) > 1)


def read_config(path: Path) -> Any:
    """The config as data, read with the safe loaders fixtures use."""
    try:
        text = read_capped(path)
    except ValueError as exc:
        raise UsageError(f"{path.as_posix()}: {exc}") from None
    if path.suffix == ".json":
        try:
            return loads_strict(text)
        except ValueError as exc:
            raise UsageError(f"{path.as_posix()}: malformed JSON: {exc}") from None
    return parse_yaml_document(text, path.as_posix()).data


def plan(config_path: Path, into: Path) -> tuple[Conversion, dict[Path, str]]:
    """The conversion and every file it writes (fixtures, copied prompts, settings, IMPORT.md), nothing written."""
    config = read_config(config_path)
    if not isinstance(config, dict):
        raise UsageError([Problem(config_path.as_posix(), 1, None, "not a promptfoo config (a mapping with prompts, "
                                  "providers and tests)")])
    done = convert(config, Source(config_path.parent))
    files = {into / name: text for name, text in done.files.items()}
    files[into / CONFIG_NAMES[0]] = _settings(done.endpoints)
    files[into / IMPORT_NOTES] = import_notes(config_path.as_posix(), shlex.quote(into.as_posix()), done)
    return done, files


def write(files: Mapping[Path, str], force: bool) -> None:
    """Write every file, or none when one exists already and ``force`` is not given."""
    taken = [path for path in files if path.exists()]
    if taken and not force:
        raise UsageError([Problem(p.as_posix(), None, None, "already exists: import never overwrites a file unless "
                                  "given --force") for p in taken])
    for path, text in files.items():
        atomic.write_text(path, text)
