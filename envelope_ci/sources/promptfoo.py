"""``envelope-ci import promptfooconfig.yaml``: a promptfoo config becomes fixtures, settings and ``IMPORT.md``.

``convert`` is the mapping, from the parsed config to the files to write and the list of what
could not be converted and why: it runs nothing the config names (``file://*.js`` prompts,
``javascript`` asserts, transforms) and reads only the files ``Source.read`` hands it.
``import_promptfoo`` is the edge: it reads the config and its files, and writes every file or none.
The mapping follows promptfoo's documentation, cited in docs/promptfoo.md.
"""
from __future__ import annotations

import csv
import io
import json
import re
import shlex
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .. import atomic
from ..errors import Problem, UsageError
from ..formats.escape import clean
from ..grading.assertions.registry import assertion_types
from ..model import CONFIG_NAMES
from .cases import CASE_SCHEMA
from .endpoints import ENDPOINTS_SCHEMA, ENV_NAME
from .files import CASE_SUFFIXES
from .parse import loads_strict, parse_yaml_document
from .refs import MAX_FILE_BYTES
from .templates import PLACEHOLDER
from .validate import FileSchema

IMPORT_NOTES = "IMPORT.md"
FIXTURE_STEM = "promptfoo"
# promptfoo's types that envelope-ci has with the same meaning (docs/assertions.md); ``python`` is not one: its
# grader's contract differs.
SAME_TYPES = frozenset({"equals", "contains", "icontains", "contains-any", "contains-all", "icontains-any",
                        "icontains-all", "starts-with", "regex", "is-json", "llm-rubric", "similar", "cost", "latency"})
THRESHOLD_TYPES = frozenset({"similar", "cost", "latency"})
LIST_TYPES = frozenset({"contains-any", "contains-all", "icontains-any", "icontains-all"})
# Keys an assertion may carry that only name or describe it in promptfoo's report.
_LABEL_KEYS = frozenset({"metric", "description"})
# Keys that change what an assertion checks: the assertion is not converted with them.
_CHANGING_KEYS = frozenset({"transform", "contextTransform", "config", "rubricPrompt"})
_TOP_KEYS = frozenset({"prompts", "providers", "targets", "tests", "defaultTest", "description"})
_TEST_KEYS = frozenset({"vars", "assert", "description", "options", "threshold"})
_NUNJUCKS = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", re.DOTALL)
_ID_UNSAFE = re.compile(r"[\s\[\]%,=]+|[^\w.:/@+-]+")
# promptfoo's BaseAssertionTypesSchema (src/types), the only prefixes its assertionFromString (src/csv.ts) reads
# in a CSV cell; any other cell, `answer: Paris` or `https://x`, is an `equals`.
PROMPTFOO_TYPES = frozenset({
    "answer-relevance", "bleu", "classifier", "contains", "contains-all", "contains-any", "contains-html",
    "contains-json", "contains-sql", "contains-xml", "context-faithfulness", "context-recall", "context-relevance",
    "conversation-relevance", "cost", "equals", "factuality", "finish-reason", "g-eval", "gleu", "guardrails",
    "human", "icontains", "icontains-all", "icontains-any", "is-html", "is-json", "is-refusal", "is-sql",
    "is-valid-function-call", "is-valid-openai-function-call", "is-valid-openai-tools-call", "is-xml", "javascript",
    "latency", "levenshtein", "llm-rubric", "meteor", "model-graded-closedqa", "model-graded-factuality",
    "moderation", "perplexity", "perplexity-score", "pi", "python", "regex", "rouge-l", "rouge-n", "rouge-s", "ruby",
    "select-best", "similar", "similar:cosine", "similar:dot", "similar:euclidean", "starts-with", "tool-call-f1",
    "trace-error-spans", "trace-span-count", "trace-span-duration", "webhook"})
_CSV_EXPECTED = re.compile(r"^(not-)?(" + "|".join(map(re.escape, sorted(PROMPTFOO_TYPES, key=len, reverse=True)))
                           + r")(?:\((\d+(?:\.\d+)?)\))?(?::([\s\S]*))?$")
# Keys whose values may hold a key or a token: IMPORT.md and --dry-run show the path to them, never the value.
_SECRET_KEYS = frozenset({"env", "apikey", "headers", "config", "provider", "authorization", "password", "secret"})
_PATH_PARTS = re.compile(r"[.\[\]]+")
_BACKTICKS = re.compile(r"`+")
_ENDPOINTS = FileSchema(lambda: ENDPOINTS_SCHEMA)
_OPENAI = "https://api.openai.com/v1"
_ANTHROPIC = "https://api.anthropic.com"
# promptfoo's graders when the config names none: llm-rubric's and similar's pages.
DEFAULT_JUDGE = "openai:gpt-4o"
DEFAULT_EMBEDDER = "openai:embedding:text-embedding-3-large"


@dataclass(frozen=True)
class Skipped:
    """One item of the config that was not converted, or was converted with a change, and why."""

    where: str
    what: str
    why: str

    def line(self) -> str:
        return f"- {_code(self.where, 160)}: {self.what} — {' '.join(clean(self.why).split())}"


@dataclass(frozen=True)
class ModelRun:
    """One of the config's model providers as the flags of ``envelope-ci run`` (the operator's, never the settings')."""

    source: str
    base_url: str
    model: str
    provider: str
    key_env: str
    temperature: float | None = None


@dataclass
class Source:
    """The files a config names, read relative to its folder, capped as fixture files are."""

    folder: Path

    def read(self, ref: str) -> str:
        """The text of ``ref``, refused when absolute or when it resolves (symlinks followed) outside the folder."""
        root = self.folder.resolve()
        path = (root / ref).resolve()
        if Path(ref).is_absolute() or ref.startswith(("/", "\\")) or not path.is_relative_to(root):
            raise ValueError("is outside the config's folder (an absolute path, .. or a symlink out of it): "
                             "import reads only files under the config's folder")
        return _read_capped(path)


@dataclass
class Conversion:
    """What an import writes (relative to ``--into``), and what it could not convert."""

    files: dict[str, str]
    cases: int
    runs: list[ModelRun]
    endpoints: dict[str, dict[str, Any]]
    skipped: list[Skipped]


def _read_capped(path: Path) -> str:
    """A file's text, refused past the cap fixtures' files have (a prompt file is a prompt)."""
    try:
        with path.open("rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ValueError(f"cannot be read: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise ValueError(f"is over {MAX_FILE_BYTES // 1024} KiB")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError("is not UTF-8") from None


def _file_ref(value: Any) -> str | None:
    """The path of a promptfoo ``file://`` reference, else None."""
    return value[len("file://"):] if isinstance(value, str) and value.startswith("file://") else None


def _code(text: str, limit: int = 80) -> str:
    """Config text as one Markdown code span, one line, fenced past any backtick run so nothing breaks out of it."""
    flat = " ".join(clean(text).split())
    flat = flat[: limit - 3] + "..." if len(flat) > limit else flat
    if not flat:
        return "(empty)"
    fence = "`" * (max((len(run) for run in _BACKTICKS.findall(flat)), default=0) + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def _shown(value: Any) -> str:
    """A config value as IMPORT.md quotes it, short."""
    return _code(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))


def _secret(key: Any) -> bool:
    """Whether a key names a value that may be a key (``apiKey``, ``env``, ``headers``, a provider's ``config``)."""
    return str(key).lower().replace("_", "").replace("-", "") in _SECRET_KEYS


def _holds_secret(value: Any) -> bool:
    """Whether a value holds, at any depth, a key whose value may be a key."""
    if isinstance(value, dict):
        return any(_secret(k) or _holds_secret(v) for k, v in value.items())
    return isinstance(value, list) and any(_holds_secret(v) for v in value)


def _shown_at(where: str, value: Any) -> str:
    """The value at ``where`` as IMPORT.md quotes it; only its path when it is, or holds, what may be a key."""
    if any(_secret(part) for part in _PATH_PARTS.split(where)) or _holds_secret(value):
        return "a value not shown (it may hold a key)"
    return _shown(value)


# --- providers ------------------------------------------------------------------------------------------------------


def _provider_entries(providers: Any) -> Iterator[tuple[str, Any]]:
    """Each provider of ``providers`` (a string, a list, or promptfoo's legacy id -> options mapping) with its place."""
    if isinstance(providers, (str, dict)) and not (isinstance(providers, dict) and "id" not in providers):
        yield "providers", providers
    elif isinstance(providers, dict):
        for name, options in providers.items():
            yield f"providers.{name}", {"id": name, **(options if isinstance(options, dict) else {})}
    elif isinstance(providers, list):
        for i, entry in enumerate(providers):
            yield f"providers[{i}]", entry


def _endpoint_of(spec: Any, embedding: bool = False) -> tuple[dict[str, Any] | None, list[str], str | None]:
    """A promptfoo provider as an endpoint (base_url, model, provider, api_key_env, temperature), the config keys
    left behind, or why it has no equivalent here."""
    if isinstance(spec, dict) and not embedding and "text" in spec and "id" not in spec:
        spec = spec["text"]
    if isinstance(spec, dict) and embedding and "embedding" in spec:
        spec = spec["embedding"]
    ident = spec if isinstance(spec, str) else spec.get("id") if isinstance(spec, dict) else None
    config = spec.get("config", {}) if isinstance(spec, dict) else {}
    if not isinstance(ident, str) or not isinstance(config, dict):
        return None, [], "not a provider id envelope-ci can read"
    parts = ident.split(":")
    found = _known_provider(parts, embedding)
    if found is None:
        return None, [], ("has no equivalent here: envelope-ci speaks the OpenAI chat and responses formats "
                          "(any OpenAI-compatible base URL) and Anthropic Messages")
    endpoint = dict(found)
    left = [k for k in config if k not in ("apiBaseUrl", "apiKeyEnvar", "apiHost", "temperature")]
    if isinstance(config.get("apiBaseUrl"), str):
        endpoint["base_url"] = config["apiBaseUrl"]
    elif isinstance(config.get("apiHost"), str):
        endpoint["base_url"] = f"https://{config['apiHost']}/v1"
    if "apiKeyEnvar" in config:
        if not isinstance(config["apiKeyEnvar"], str) or not ENV_NAME.fullmatch(config["apiKeyEnvar"]):
            return None, [], "its config.apiKeyEnvar is not the name of an environment variable (letters, digits, _)"
        endpoint["api_key_env"] = config["apiKeyEnvar"]
    if isinstance(config.get("temperature"), (int, float)) and not isinstance(config["temperature"], bool):
        endpoint["temperature"] = config["temperature"]
    problem = _endpoint_problem(endpoint)
    return (None, [], problem) if problem else (endpoint, left, None)


def _endpoint_problem(endpoint: Mapping[str, Any]) -> str | None:
    """Why an endpoint cannot be written to envelope-ci.yaml or put in a command (the endpoints schema), else None."""
    errors = _ENDPOINTS.errors({"endpoint": dict(endpoint)})
    if errors:
        place = ".".join(map(str, list(errors[0].absolute_path)[1:])) or "endpoint"
        return f"its {place} is not what an envelope-ci endpoint takes ({errors[0].validator}), e.g. an empty model"
    if not all(str(endpoint[k]).isprintable() for k in ("base_url", "model")):
        return "its base URL or model holds a line break or another control character"
    return None


def _known_provider(parts: list[str], embedding: bool) -> dict[str, Any] | None:
    """promptfoo's OpenAI and Anthropic ids (``openai:gpt-4o``, ``openai:chat:M``, ``openai:responses:M``,
    ``openai:embedding:M``, ``anthropic:messages:M``) as an endpoint, else None."""
    openai = {"base_url": _OPENAI, "api_key_env": "OPENAI_API_KEY"}
    if parts[0] == "anthropic" and len(parts) >= 3 and parts[1] == "messages" and not embedding:
        return {**openai, "base_url": _ANTHROPIC, "model": ":".join(parts[2:]), "provider": "anthropic-messages",
                "api_key_env": "ANTHROPIC_API_KEY"}
    if parts[0] != "openai" or len(parts) < 2:
        return None
    if embedding:
        return {**openai, "model": ":".join(parts[2:])} if parts[1] in ("embedding", "embeddings") and len(
            parts) >= 3 else None
    if parts[1] in ("chat", "responses") and len(parts) >= 3:
        provider = "openai-chat" if parts[1] == "chat" else "openai-responses"
        return {**openai, "model": ":".join(parts[2:]), "provider": provider}
    known = ("completion", "embedding", "embeddings", "assistant", "image", "realtime", "moderation", "chat",
             "responses", "transcription", "tts", "speech", "video", "agents", "chatkit", "codex", "codex-sdk")
    if len(parts) == 2 and parts[1] not in known:
        return {**openai, "model": parts[1], "provider": "openai-chat"}
    return None


def model_runs(providers: Any, skipped: list[Skipped]) -> list[ModelRun]:
    """The config's model providers as ``run`` flags; each that has no equivalent is listed."""
    runs: list[ModelRun] = []
    for where, spec in _provider_entries(providers):
        endpoint, left, why = _endpoint_of(spec)
        ident = spec.get("id") if isinstance(spec, dict) else spec
        if endpoint is None:
            skipped.append(Skipped(where, _shown_at(where, ident), f"not converted: {why}"))
            continue
        extra = [key for key in spec if key not in ("id", "config")] if isinstance(spec, dict) else []
        skipped += [Skipped(f"{where}.{key}", _shown_at(f"{where}.{key}", spec[key]), "not converted: a run names "
                            "its model by its flags; labels, per-provider prompts and transforms have no equivalent")
                    for key in extra]
        runs.append(ModelRun(str(ident), endpoint["base_url"], endpoint["model"], endpoint["provider"],
                             endpoint["api_key_env"], endpoint.get("temperature")))
        skipped += [Skipped(f"{where}.config.{key}", "a provider setting",
                            "not converted: " + ("a key written in a config file is never copied; give it in "
                                                 "EVAL_API_KEY" if key == "apiKey" else
                                                 "envelope-ci sends the case's own request fields only"))
                    for key in left]
    return runs


@dataclass
class Endpoints:
    """The judge and embeddings endpoints the converted assertions name, one per distinct promptfoo provider."""

    named: dict[str, dict[str, Any]] = field(default_factory=dict)
    skipped: list[Skipped] = field(default_factory=list)

    def judge(self, spec: Any, where: str) -> str | None:
        """The endpoint name an llm-rubric is judged at, added on first use; None (listed) without an equivalent."""
        endpoint, left, why = _endpoint_of(spec if spec is not None else DEFAULT_JUDGE)
        if endpoint is None:
            self.skipped.append(Skipped(where, _shown_at(where, spec), f"not converted: the judge provider {why}"))
            return None
        self._left(where, left)
        for name, known in self.named.items():
            if known == endpoint and name != "embeddings":
                return name
        name = "judge" if "judge" not in self.named else f"judge-{len(self.named) + 1}"
        self.named[name] = endpoint
        return name

    def embedder(self, spec: Any, where: str) -> bool:
        """Whether ``similar`` has its ``embeddings`` endpoint (there is one per suite); listed when not."""
        endpoint, left, why = _endpoint_of(spec if spec is not None else DEFAULT_EMBEDDER, embedding=True)
        if endpoint is None:
            self.skipped.append(Skipped(where, _shown_at(where, spec),
                                        f"not converted: the embedding provider {why}"))
            return False
        if self.named.setdefault("embeddings", endpoint) != endpoint:
            self.skipped.append(Skipped(where, _shown_at(where, spec), "not converted: envelope-ci asks one "
                                        "embeddings endpoint per suite, and another is named already"))
            return False
        self._left(where, left)
        return True

    def _left(self, where: str, left: list[str]) -> None:
        self.skipped.extend(Skipped(f"{where}.config.{key}", "a provider setting",
                                    "not converted: an endpoint here is base_url, model, api_key_env and "
                                    "temperature (a key is never copied into a file)") for key in left)


# --- assertions -----------------------------------------------------------------------------------------------------


def assertion_from_csv(cell: str) -> dict[str, Any]:
    """A ``__expected`` cell as promptfoo's ``assertionFromString`` reads it (src/csv.ts): ``type:value``,
    ``type(threshold):value``, ``not-`` forms, comma lists for the ``contains-*`` types, else ``equals``."""
    text = cell.strip()
    for prefix, kind in (("javascript:", "javascript"), ("fn:", "javascript"), ("eval:", "javascript"),
                         ("grade:", "llm-rubric"), ("llm-rubric:", "llm-rubric"), ("python:", "python")):
        if text.startswith(prefix):
            return {"type": kind, "value": text[len(prefix):].strip()}
    match = _CSV_EXPECTED.match(text)
    if match is None or (match.group(4) is None and match.group(3) is None and match.group(2) not in (
            "is-json", "contains-json")) or text.startswith("file://"):
        return {"type": "equals", "value": text}
    negated, kind, threshold, value = match.groups()
    entry: dict[str, Any] = {"type": f"{negated or ''}{kind}"}
    value = (value or "").strip()
    if kind in LIST_TYPES:
        entry["value"] = [part.strip() for part in value.split(",") if part.strip()]
    elif value:
        entry["value"] = value
    if threshold is not None:
        entry["threshold"] = float(threshold)
    elif kind == "similar":
        entry["threshold"] = 0.8  # src/csv.ts DEFAULT_SEMANTIC_SIMILARITY_THRESHOLD
    return entry


def _as_text(value: Any) -> Any:
    """A scalar value as promptfoo compares it (``String(value)``); anything else as it is."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    return value


def _entry_problem(entry: dict[str, Any]) -> str | None:
    """Why a converted entry would not load here (the case schema, then the type's own value check), else None."""
    errors = CASE_SCHEMA.errors({"id": "x", "prompt": "p", "assert": [entry]})
    if errors:
        return f"its value does not fit envelope-ci's {entry['type']}: {errors[0].message}"
    kind = assertion_types()[entry["type"].removeprefix("not-")]
    if kind.value_problem is not None and "value" in entry:
        found = kind.value_problem({"value": entry["value"], **{k: entry.get(k) for k in kind.entry_keys}}
                                   if kind.entry_keys else entry["value"])
        if found is not None:
            return f"its value does not fit envelope-ci's {entry['type']}: {found[1]}"
    return None


@dataclass
class Asserts:
    """Turns promptfoo assert entries into envelope-ci ones, naming the judges they need and listing the rest."""

    endpoints: Endpoints
    skipped: list[Skipped]

    def convert(self, entry: Any, where: str, grader: Any) -> dict[str, Any] | None:
        """One assert entry as envelope-ci's, or None (listed with why)."""
        if not isinstance(entry, dict) or not isinstance(entry.get("type"), str):
            return self._skip(where, entry, "not an assertion envelope-ci can read")
        kind = entry["type"]
        base = kind.removeprefix("not-")
        if base not in SAME_TYPES:
            why = ("runs code: envelope-ci never runs code from an imported config; envelope-ci's own `python` "
                   "grader (FILE.py:FUNCTION, returns None or a reason) can replace it"
                   if base in ("javascript", "python", "ruby", "webhook") else
                   "envelope-ci has no assertion of this type with the same meaning")
            return self._skip(where, kind, why)
        if kind != base and assertion_types()[base].check_not is None:
            return self._skip(where, kind, f"envelope-ci's {base} has no negation")
        changing = sorted(k for k in entry if k in _CHANGING_KEYS)
        if changing or entry.get("weight") == 0:
            return self._skip(where, kind, f"its {', '.join(changing) or 'weight 0'} changes what is checked "
                              "(a transform runs code; weight 0 always passes), so it is not converted")
        if _file_ref(entry.get("value")) is not None:
            return self._skip(where, kind, "its value is read from a file: write the text inline")
        out = self._entry(entry, kind, base, where, grader)
        if out is None:
            return None
        problem = _entry_problem(out)
        return self._skip(where, kind, problem) if problem else out

    def _entry(self, entry: dict[str, Any], kind: str, base: str, where: str, grader: Any) -> dict[str, Any] | None:
        """The envelope-ci entry: its value, its threshold where the type takes one, its judge or embeddings."""
        out: dict[str, Any] = {"type": kind}
        if "value" in entry:
            value = entry["value"]
            out["value"] = [_as_text(v) for v in value] if isinstance(value, list) else _as_text(value)
        if base in THRESHOLD_TYPES and "threshold" in entry:
            out["threshold"] = entry["threshold"]
        if base == "llm-rubric":
            endpoint = self.endpoints.judge(entry.get("provider", grader), f"{where}.provider")
            if endpoint is None:
                return None
            out["endpoint"] = endpoint
        embedder = entry.get("provider", grader if isinstance(grader, dict) and "embedding" in grader else None)
        if base == "similar" and not self.endpoints.embedder(embedder, f"{where}.provider"):
            return None
        if isinstance(entry.get("description"), str):
            out["description"] = entry["description"]
        self._left_keys(entry, base, where)
        return out

    def _left_keys(self, entry: dict[str, Any], base: str, where: str) -> None:
        """List the keys an entry carries that the converted one does not."""
        taken = {"type", "value", "description"} | ({"threshold"} if base in THRESHOLD_TYPES else set()) | (
            {"provider"} if base in ("llm-rubric", "similar") else set())
        for key in sorted(set(entry) - taken):
            why = {"weight": "only weighs promptfoo's score; envelope-ci fails a case on any failed assertion "
                             "(docs/assertions.md#threshold-and-weight)",
                   "threshold": f"envelope-ci's {base} is pass or fail, with no score to hold to a threshold",
                   "metric": "a name in promptfoo's report only"}.get(key, "not a key envelope-ci's assertions take")
            self.skipped.append(Skipped(f"{where}.{key}", _shown_at(f"{where}.{key}", entry[key]),
                                        f"not converted: {why}"))

    def _skip(self, where: str, what: Any, why: str) -> dict[str, Any] | None:
        """List an entry as not converted; None, what a skipped entry converts to."""
        self.skipped.append(Skipped(where, _shown_at(where, what), f"not converted: {why}"))
        return None


# --- prompts --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Prompt:
    """One promptfoo prompt as the case keys that send it, with its text for placeholders and the files it needs."""

    keys: dict[str, Any]
    text: str
    files: dict[str, str]
    renamed: str | None = None  # the copied file's name when its own would be read as a case file


def _chat(data: Any) -> list[dict[str, Any]] | None:
    """promptfoo's chat format (a list of ``{role, content}``), else None."""
    if isinstance(data, list) and data and all(isinstance(m, dict) and "role" in m and "content" in m for m in data):
        return data
    return None


def _messages_text(messages: list[dict[str, Any]]) -> str:
    """Every text a chat prompt sends, for its placeholders."""
    return "\n".join(m["content"] if isinstance(m["content"], str) else json.dumps(m["content"]) for m in messages)


def _prompt_file(ref: str, source: Source, taken: set[str]) -> Prompt | str:
    """A ``file://`` prompt: chat JSON or YAML as ``messages``, text as a copied ``prompt_file``; or why not."""
    suffix = Path(ref).suffix.lower()
    if any(c in ref for c in "*?[") or ":" in Path(ref).name:
        return "a glob or a function reference: name each prompt file"
    if suffix in (".js", ".cjs", ".mjs", ".ts", ".py", ".rb", ".sh"):
        return "a prompt made by code: envelope-ci never runs code from an imported config"
    try:
        text = source.read(ref)
    except ValueError as exc:
        return f"the file {exc}"
    if suffix in (".json", ".yaml", ".yml"):
        try:
            data = loads_strict(text) if suffix == ".json" else parse_yaml_document(text, ref).data
        except (ValueError, UsageError):
            return "not a chat prompt envelope-ci can read as data (a Nunjucks loop or filter inside JSON?)"
        messages = _chat(data)
        if messages is None:
            return "not a list of {role, content} messages"
        return Prompt({"messages": messages}, _messages_text(messages), {})
    if re.search(r"^---$", text, re.MULTILINE):
        return "holds several prompts split by ---: give each its own file"
    name = _copied_name(Path(ref).name)
    stem, n = name, 2
    while f"prompts/{name}" in taken:
        name, n = f"{Path(stem).stem}-{n}{Path(stem).suffix}", n + 1
    taken.add(f"prompts/{name}")
    renamed = name if name != Path(ref).name else None
    return Prompt({"prompt_file": f"prompts/{name}"}, text, {f"prompts/{name}": text}, renamed)


def _copied_name(name: str) -> str:
    """A prompt file's name in ``prompts/``: ``.txt`` appended when its suffix would make the suite read it as cases."""
    return f"{name}.txt" if Path(name).suffix.lower() in CASE_SUFFIXES else name


def prompts_of(config: Mapping[str, Any], source: Source, skipped: list[Skipped]) -> list[Prompt]:
    """The config's prompts as envelope-ci case keys; each that cannot be one is listed."""
    raw = config.get("prompts")
    entries = raw if isinstance(raw, list) else [raw] if raw is not None else []
    out: list[Prompt] = []
    taken: set[str] = set()
    for i, entry in enumerate(entries):
        where = f"prompts[{i}]"
        if isinstance(entry, dict):
            skipped += _prompt_keys(where, entry)
            entry = entry.get("raw", entry.get("id"))
        found = _prompt(entry, source, taken)
        if isinstance(found, str):
            skipped.append(Skipped(where, _shown_at(where, entry), f"not converted: {found}"))
        else:
            out.append(found)
            skipped += [Skipped(where, _shown(entry), "converted with a change: copied as "
                                f"{_code('prompts/' + found.renamed)}, "
                                "since a file of that suffix in the suite is read as cases")] if found.renamed else []
            skipped += [Skipped(where, _code(expr), "not converted: a Nunjucks expression; envelope-ci fills only "
                                "plain {{ name }} placeholders and sends this as written: rewrite it")
                        for expr in _NUNJUCKS.findall(found.text) if not PLACEHOLDER.fullmatch(expr)]
    return out


def _prompt_keys(where: str, entry: Mapping[Any, Any]) -> list[Skipped]:
    """The keys of a prompt object other than the one its text is taken from (label, config, function, ...)."""
    used = "raw" if "raw" in entry else "id"
    return [Skipped(f"{where}.{key}", _shown_at(f"{where}.{key}", entry[key]), "not converted: a prompt here is its "
                    "text; labels, per-prompt config and functions have no equivalent")
            for key in entry if key != used]


def _prompt(entry: Any, source: Source, taken: set[str]) -> Prompt | str:
    """One prompt entry (inline text, inline chat JSON, or a ``file://`` path), or why it is not converted."""
    if not isinstance(entry, str):
        return "not a prompt envelope-ci can read"
    ref = _file_ref(entry)
    if ref is not None:
        return _prompt_file(ref, source, taken)
    if entry.lstrip().startswith("["):
        try:
            messages = _chat(loads_strict(entry))
        except ValueError:
            messages = None
        if messages is not None:
            return Prompt({"messages": messages}, _messages_text(messages), {})
    return Prompt({"prompt": entry}, entry, {})


# --- tests ----------------------------------------------------------------------------------------------------------


def _csv_tests(text: str) -> list[dict[str, Any]]:
    """A promptfoo tests CSV as test entries (src/csv.ts ``testCaseFromCsvRow``); unknown ``__`` columns are kept
    under ``__columns`` for listing."""
    tests = []
    for row in csv.DictReader(io.StringIO(text)):
        test: dict[str, Any] = {"vars": {}, "assert": []}
        for key, value in row.items():
            if key is None:  # csv.DictReader's key for the cells past the header row
                test["__cells"] = [v for v in value if v.strip()]
                continue
            key = key.strip()
            value = value if isinstance(value, str) else ""
            if key.startswith("__expected"):
                if value.strip():
                    test["assert"].append(assertion_from_csv(value))
            elif key == "__description":
                test["description"] = value
            elif key.startswith("__"):
                test.setdefault("__columns", {})[key] = value
            elif key:
                test["vars"][key] = value
        tests.append(test)
    return tests


def tests_of(config: Mapping[str, Any], source: Source, skipped: list[Skipped]) -> list[tuple[str, Any]]:
    """Every test with its place: inline, or from ``file://`` CSV, YAML or JSON files; the rest listed."""
    raw = config.get("tests")
    entries = raw if isinstance(raw, list) else [raw] if raw is not None else []
    out: list[tuple[str, Any]] = []
    for i, entry in enumerate(entries):
        where = f"tests[{i}]" if isinstance(raw, list) else "tests"
        ref = _file_ref(entry) if isinstance(entry, str) else None
        if ref is None:
            if isinstance(entry, str):
                skipped.append(Skipped(where, _shown_at(where, entry), "not converted: a test source envelope-ci "
                                       "cannot read (a dataset or sheet): export it to CSV"))
            else:
                out.append((where, entry))
            continue
        found = _tests_file(ref, source)
        if isinstance(found, str):
            skipped.append(Skipped(where, _shown_at(where, entry), f"not converted: {found}"))
        else:
            out += [(f"{ref}[{n}]", test) for n, test in enumerate(found, start=1)]
    return out


def _tests_file(ref: str, source: Source) -> list[Any] | str:
    """The tests a ``file://`` reference holds, or why they are not converted."""
    suffix = Path(ref).suffix.lower()
    if any(c in ref for c in "*?[") or suffix not in (".csv", ".yaml", ".yml", ".json", ".jsonl"):
        return "tests made by code, a glob or a spreadsheet: envelope-ci reads CSV, YAML, JSON and JSONL files"
    try:
        text = source.read(ref)
        if suffix == ".csv":
            return _csv_tests(text)
        if suffix == ".jsonl":
            return [loads_strict(line) for line in text.splitlines() if line.strip()]
        data = loads_strict(text) if suffix == ".json" else parse_yaml_document(text, ref).data
    except ValueError as exc:
        return f"the file {exc}"
    except (UsageError, csv.Error) as exc:
        return f"the file cannot be read: {exc}"
    return data if isinstance(data, list) else "does not hold a list of tests"


# --- cases ----------------------------------------------------------------------------------------------------------


def _slug(text: str) -> str:
    """A description as a case id: one word, no character the id rule or a matrix id refuses."""
    return _ID_UNSAFE.sub("-", text).strip("-")[:80].strip("-")


def _var_problem(value: Any) -> str | None:
    """Why a var's value cannot be a var here (envelope-ci takes text, numbers, booleans and lists of them)."""
    scalars = (str, int, float, bool)
    if _file_ref(value) is not None or (isinstance(value, list) and any(_file_ref(v) for v in value)):
        return "it is read from a file: write the text inline"
    if isinstance(value, list):
        spelled = [json.dumps(v) if not isinstance(v, str) else v for v in value]
        if not value or not all(isinstance(v, scalars) for v in value) or len(set(spelled)) != len(spelled):
            return "a list that is not distinct texts, numbers or booleans"
        return None
    return None if isinstance(value, scalars) else "an object or null: envelope-ci's vars are texts, numbers, booleans"


def _fill(value: Any, variables: Mapping[str, Any]) -> Any:
    """An assertion value with its plain placeholders filled from one case's vars (envelope-ci's assertions are no
    templates); None when a placeholder cannot be filled here."""
    if isinstance(value, list):
        filled = [_fill(v, variables) for v in value]
        return None if any(v is None for v in filled) else filled
    if not isinstance(value, str) or "{" not in value:
        return value
    if any(not PLACEHOLDER.fullmatch(e) for e in _NUNJUCKS.findall(value)):
        return None
    names = PLACEHOLDER.findall(value)
    if any(n not in variables or isinstance(variables[n], list) for n in names):
        return None
    return PLACEHOLDER.sub(lambda m: str(_as_text(variables[m.group(1)])), value)


def _templated(entry: Any) -> bool:
    """Whether an assert entry's value holds a placeholder (it must be filled per case)."""
    return isinstance(entry, dict) and "{{" in json.dumps(entry.get("value", ""))


@dataclass
class CaseBuilder:
    """Builds one prompt's cases from the tests, with ids from descriptions, listing what each leaves behind."""

    prompt: Prompt
    asserts: Asserts
    defaults: dict[str, Any]
    default_asserts: list[tuple[str, Any]]
    grader: Any
    skipped: list[Skipped]
    suffix: str = ""
    ids: set[str] = field(default_factory=set)

    def case(self, where: str, test: Any, number: int) -> dict[str, Any] | None:
        """One test as a case, or None (listed) when its vars cannot be envelope-ci's."""
        if not isinstance(test, dict):
            self.skipped.append(Skipped(where, _shown_at(where, test), "not converted: not a test"))
            return None
        variables = test.get("vars", {}) if isinstance(test.get("vars", {}), dict) else {}
        for name, value in variables.items():
            problem = _var_problem(value)
            if problem:
                self.skipped.append(Skipped(f"{where}.vars.{name}", _shown_at(f"{where}.vars.{name}", value),
                                            f"not converted, nor is its test: {problem}"))
                return None
        self._left_keys(test, where)
        case: dict[str, Any] = {"id": self._id(test, number)}
        if isinstance(test.get("description"), str):
            case["description"] = test["description"]
        used = self._vars(variables, case["id"], where)
        if used:
            case["vars"] = used
        entries = self._asserts(test, where, {**self.defaults.get("vars", {}), **variables})
        if entries:
            case["assert"] = entries
        return case

    def _id(self, test: Mapping[str, Any], number: int) -> str:
        """The test's description as a unique id (``test-N`` without one), ``-2``, ``-3`` on a repeat."""
        base = _slug(test["description"]) if isinstance(test.get("description"), str) else ""
        base = (base or f"test-{number}") + self.suffix
        found, n = base, 2
        while found in self.ids:
            found, n = f"{base}-{n}", n + 1
        self.ids.add(found)
        return found

    def _vars(self, variables: Mapping[str, Any], case_id: str, where: str) -> dict[str, Any]:
        """The vars the prompt uses; the others are left out and listed (envelope-ci refuses an unused var)."""
        used = set(PLACEHOLDER.findall(self.prompt.text))
        missing = sorted(used - variables.keys() - self.defaults.get("vars", {}).keys())
        for name in missing:
            self.skipped.append(Skipped(f"{where}.vars", "no value for " + _code("{{ " + name + " }}"),
                                        f"case {case_id} sends it as empty text, as promptfoo renders an unset "
                                        "variable"))
        for name in sorted(variables.keys() - used):
            self.skipped.append(Skipped(f"{where}.vars.{name}", "a variable the prompt does not use as "
                                        + _code("{{ " + name + " }}"),
                                        f"left out of case {case_id}: envelope-ci refuses a variable nothing "
                                        "sends (assertions that name it are filled in at import)"))
        return {**{k: v for k, v in variables.items() if k in used}, **dict.fromkeys(missing, "")}

    def _asserts(self, test: Mapping[str, Any], where: str, variables: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The test's converted asserts, after the defaults' that hold a placeholder (filled for this case)."""
        grader = _grader(test) if _grader(test) is not None else self.grader
        own = test.get("assert") or []
        entries = [*self.default_asserts, *((f"{where}.assert[{i}]", e) for i, e in enumerate(own))]
        out = []
        for at, entry in entries:
            if _templated(entry):
                value = _fill(entry.get("value"), variables)
                if value is None:
                    self.asserts._skip(at, entry.get("type"), "its value holds a placeholder this case cannot fill "
                                       "(a Nunjucks expression, a missing or a list variable)")
                    continue
                entry = {**entry, "value": value}
            converted = self.asserts.convert(entry, at, grader)
            if converted is not None:
                out.append(converted)
        return out

    def _left_keys(self, test: Mapping[str, Any], where: str) -> None:
        """List the test keys a case does not take (test-level threshold, options, metadata, ...)."""
        for key in [k for k in test if k not in _TEST_KEYS and k not in ("__columns", "__cells")]:
            self.skipped.append(Skipped(f"{where}.{key}", _shown_at(f"{where}.{key}", test[key]),
                                        "not converted: not a key a case takes"))
        if "threshold" in test:
            self.skipped.append(Skipped(f"{where}.threshold", _shown_at(where, test["threshold"]),
                                        "not converted: envelope-ci fails a case on any failed assertion, with no "
                                        "weighted score (docs/assertions.md#threshold-and-weight)"))
        options: dict[str, Any] = test["options"] if isinstance(test.get("options"), dict) else {}
        for key in sorted(set(options) - {"provider"}):
            self.skipped.append(Skipped(f"{where}.options.{key}", _shown_at(f"{where}.options.{key}", options[key]),
                                        "not converted: a prefix, suffix, transform or other option changes what "
                                        "is sent or checked"))


def _grader(test: Any) -> Any:
    """The judge provider a test (or ``defaultTest``) names in ``options.provider``, else None."""
    options = test.get("options") if isinstance(test, dict) else None
    return options.get("provider") if isinstance(options, dict) else None


# --- the whole config -----------------------------------------------------------------------------------------------


def _defaults(default_test: Any, asserts: Asserts, skipped: list[Skipped]) -> tuple[dict[str, Any],
                                                                                 list[tuple[str, Any]]]:
    """``defaultTest`` as file defaults (vars and the asserts without placeholders), and its templated asserts."""
    if default_test is None:
        return {}, []
    if not isinstance(default_test, dict):
        skipped.append(Skipped("defaultTest", _shown_at("defaultTest", default_test), "not converted: write it "
                               "inline"))
        return {}, []
    out: dict[str, Any] = {}
    variables: dict[str, Any] = default_test["vars"] if isinstance(default_test.get("vars"), dict) else {}
    good = {}
    for name, value in variables.items():
        problem = _var_problem(value)
        if problem:
            skipped.append(Skipped(f"defaultTest.vars.{name}", _shown_at(f"defaultTest.vars.{name}", value),
                                   f"not converted: {problem}"))
        else:
            good[name] = value
    if good:
        out["vars"] = good
    for key in sorted(set(default_test) - {"vars", "assert", "options"}):
        skipped.append(Skipped(f"defaultTest.{key}", _shown_at(f"defaultTest.{key}", default_test[key]),
                               "not converted: not a default a case takes (a threshold: envelope-ci fails a "
                               "case on any failed assertion)"))
    options: dict[str, Any] = default_test["options"] if isinstance(default_test.get("options"), dict) else {}
    for key in sorted(set(options) - {"provider"}):
        skipped.append(Skipped(f"defaultTest.options.{key}", _shown_at(f"defaultTest.options.{key}", options[key]),
                               "not converted: an option that changes what is sent or checked"))
    entries = [(f"defaultTest.assert[{i}]", e) for i, e in enumerate(default_test.get("assert") or [])]
    fixed = [asserts.convert(e, at, _grader(default_test)) for at, e in entries if not _templated(e)]
    if any(fixed):
        out["assert"] = [e for e in fixed if e is not None]
    return out, [(at, e) for at, e in entries if _templated(e)]


def convert(config: Mapping[str, Any], source: Source) -> Conversion:
    """The fixtures, settings and notes a promptfoo config becomes, and every item that could not be converted."""
    skipped: list[Skipped] = []
    for key in sorted(set(config) - _TOP_KEYS):
        skipped.append(Skipped(str(key), _shown_at(str(key), config[key]), "not converted: no envelope-ci setting "
                               "means this "
                               "(a run's options are its flags)"))
    runs = model_runs(config.get("providers", config.get("targets")), skipped)
    prompts = prompts_of(config, source, skipped)
    endpoints = Endpoints()
    asserts = Asserts(endpoints, skipped)
    defaults, templated = _defaults(config.get("defaultTest"), asserts, skipped)
    tests = tests_of(config, source, skipped)
    files: dict[str, str] = {}
    count = 0
    for n, prompt in enumerate(prompts, start=1):
        many = len(prompts) > 1
        builder = CaseBuilder(prompt, asserts, defaults, templated, _grader(config.get("defaultTest")), skipped,
                              suffix=f"-p{n}" if many else "")
        cases = [c for c in (builder.case(w, t, i) for i, (w, t) in enumerate(tests, start=1)) if c is not None]
        for where, test in tests:
            skipped += _csv_columns(where, test) if n == 1 else []
        if not cases:
            continue
        count += len(cases)
        name = f"{FIXTURE_STEM}-p{n}.yaml" if many else f"{FIXTURE_STEM}.yaml"
        files[name] = _yaml({"defaults": {**prompt.keys, **defaults}, "cases": cases})
        files.update(prompt.files)
    if not prompts:
        skipped.append(Skipped("prompts", "no prompt", "no case could be written: every test needs a prompt"))
    skipped += endpoints.skipped
    return Conversion(files, count, runs, endpoints.named, _unique(skipped))


def _csv_columns(where: str, test: Any) -> list[Skipped]:
    """The ``__`` columns of a CSV row that no case key means (``__prefix``, ``__threshold``, ``__metadata:*``...)."""
    columns = test.get("__columns", {}) if isinstance(test, dict) else {}
    cells = test.get("__cells", []) if isinstance(test, dict) else []
    return [Skipped(f"{where}.{key}", _shown_at(f"{where}.{key}", value), "not converted: a CSV column no case key "
                    "means") for key, value in columns.items() if value] + [
        Skipped(where, _shown(cells), "not converted: cells past the header row have no column name")] * bool(cells)


def _unique(skipped: list[Skipped]) -> list[Skipped]:
    """Each listed item once, in the order first found (a defaults' entry is met once per prompt)."""
    return list(dict.fromkeys(skipped))


def _yaml(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=1000)


# --- IMPORT.md and the edge -----------------------------------------------------------------------------------------


def _run_lines(into: str, run: ModelRun) -> list[str]:
    """The ``run`` command and Action inputs for one model provider."""
    flags = f"--base-url {shlex.quote(run.base_url)} --model {shlex.quote(run.model)}"
    flags += f" --provider {shlex.quote(run.provider)}" if run.provider != "openai-chat" else ""
    flags += f" --temperature {shlex.quote(str(run.temperature))}" if run.temperature is not None else ""
    inputs = [f"base-url: {run.base_url}", f"model: {run.model}", f"provider: {run.provider}"]
    inputs += [f"temperature: {run.temperature}"] if run.temperature is not None else []
    key = f'"${run.key_env}"' if ENV_NAME.fullmatch(run.key_env) else "..."  # checked at conversion; never pasted raw
    return [f"{_code(run.source)}:", "", "```sh", f"EVAL_API_KEY={key} envelope-ci run {into} {flags}", "```",
            "", "As Action inputs (`with:`): " + ", ".join(_code(i, 200) for i in inputs) + ".", ""]


def _endpoint_lines(into: str, endpoints: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """What the operator must pass for the judges and embeddings envelope-ci.yaml names."""
    if not endpoints:
        return []
    given = " ".join(f"--endpoint {shlex.quote(n + '=' + e['base_url'])}" for n, e in endpoints.items())
    keys = sorted({e["api_key_env"] for e in endpoints.values() if "api_key_env" in e})
    allowed = " ".join(f"--allow-key-env {shlex.quote(k)}" for k in keys)
    return ["## Judges and embeddings", "",
            "`envelope-ci.yaml` names " + ", ".join(f"{_code(n)} ({_code(e['model'])} at {_code(e['base_url'], 200)})"
                                                  for n, e in endpoints.items()) + ". "
            "The settings file is pull-request content, so it never chooses where a key goes: a live run calls "
            "these endpoints only at a URL the operator gives, and reads their key variables only when the operator "
            "allows them (docs/judge.md). Add to the run command:", "", "```sh", f"{given} {allowed}".strip(), "```",
            "", "In the Action: the inputs `endpoints` (" + ", ".join(_code(f"{n}=URL") for n in endpoints) +
            ") and `allow-key-env` (" + ", ".join(map(_code, keys)) + "), with the keys in the step's `env`.",
            ""]


def import_notes(source: str, into: str, done: Conversion) -> str:
    """IMPORT.md: how to run the imported suite, and every item not converted with why."""
    lines = ["# Imported from promptfoo", "",
             f"{_code('envelope-ci import ' + source, 300)} wrote {done.cases} case(s) into "
             + ", ".join(_code(f) for f in done.files if f.endswith(".yaml")) + " and `envelope-ci.yaml`.", "",
             *([f"Prompt files were copied: {', '.join(map(_code, copied))}. To send the file your app "
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
    return header + (_yaml({"endpoints": dict(endpoints)}) if endpoints else "")


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
        text = _read_capped(path)
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
