"""Where the suite lives, where its reports go, and the RunConfig that runs it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..config import RunConfig
from ..formats.html import HTML
from ..github.comment import key_digest
from ..model import PINS_NAME
from .inputs import InputError, Inputs

# Where reports go, under the workspace so later steps (upload-artifact, a script) can read them.
OUT_ROOT = ".envelope-ci"
# The longest report folder name kept as it is (file systems allow 255 bytes; the marker keeps 100 characters too).
SLUG_MAX = 100


@dataclass(frozen=True)
class Suite:
    """Where one suite lives and where its reports go."""

    workdir: Path
    key: str  # the fixtures path relative to the workspace: comment marker, title, report folder
    pins: Path  # relative to workdir
    out_dir: Path


def relative_to(path: Path, root: Path) -> str | None:
    """`path` relative to `root` as a POSIX string, or None when it lies outside."""
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return None


def slug(key: str) -> str:
    """A directory name for one suite's reports (two suites in one job must not share it)."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", key).strip("-.") or "default"
    # Two keys that clean to the same name (non-ASCII ones, `a b` and `a+b`) must not share a
    # folder; a `/` alone (the usual `src/evals`) keeps the readable name.
    if cleaned == key.replace("/", "-").strip("-.") and len(cleaned) <= SLUG_MAX:
        return cleaned
    # A name past 255 bytes is no folder at all: a long `fixtures` input keeps its head and a digest of the whole.
    return f"{cleaned[:SLUG_MAX].rstrip('-.')}-{key_digest(key)}"


def locate(inputs: Inputs, workspace: Path) -> Suite:
    """Resolve the suite's paths; InputError when the working directory does not exist."""
    workdir = (workspace / inputs.working_directory).resolve()
    if not workdir.is_dir():
        raise InputError(f"working-directory {inputs.working_directory!r} is not a directory under {workspace}")
    key = relative_to(workdir / inputs.fixtures, workspace) or inputs.fixtures
    pins = Path(inputs.pins) if inputs.pins else Path(inputs.fixtures) / PINS_NAME
    return Suite(workdir, key, pins, workspace / OUT_ROOT / slug(key))


def run_config(inputs: Inputs, suite: Suite, env: Mapping[str, str]) -> RunConfig:
    """The run the inputs ask for; paths stay relative to the working directory, as the report shows them."""
    return RunConfig(
        fixtures_dir=Path(inputs.fixtures),
        pins_path=suite.pins,
        out_dir=suite.out_dir,
        lane=inputs.lane,
        endpoint_class=inputs.endpoint_class or RunConfig.endpoint_class,
        temperature=inputs.temperature,
        # As on the command line, a job's EVAL_BASE_URL / EVAL_MODEL stand in for empty inputs.
        base_url=inputs.base_url or env.get("EVAL_BASE_URL") or None,
        model=inputs.model or env.get("EVAL_MODEL") or None,
        api_key=env.get("EVAL_API_KEY") or None,
        concurrency=inputs.concurrency,
        repeats=inputs.repeats,
        stream=inputs.stream,
        provider=inputs.provider,
        replay=Path(inputs.replay) if inputs.replay else None,
        config_path=Path(inputs.config) if inputs.config else None,
        # report.html beside the report, for upload-artifact; a shard's part is no page: the merge writes the run's.
        formats=() if inputs.mode == "shard" else (HTML.name,),
        in_ci=True,
        shard=inputs.shard,
        max_run_time_s=inputs.max_run_time,
        # The operator's word on where the settings file's judges and headers may send a secret (SECURITY.md).
        endpoint_urls=inputs.endpoints,
        allow_key_env=inputs.allow_key_env,
    )
