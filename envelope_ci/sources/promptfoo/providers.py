"""promptfoo's providers as envelope-ci's: the config's model providers as ``run`` flags, and the judge and
embeddings endpoints its assertions name (OpenAI and Anthropic ids)."""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..endpoints import ENDPOINTS_SCHEMA, ENV_NAME
from ..validate import FileSchema
from .shown import Skipped, shown_at

_ENDPOINTS = FileSchema(lambda: ENDPOINTS_SCHEMA)
_OPENAI = "https://api.openai.com/v1"
_ANTHROPIC = "https://api.anthropic.com"
# promptfoo's graders when the config names none: llm-rubric's and similar's pages.
DEFAULT_JUDGE = "openai:gpt-4o"
DEFAULT_EMBEDDER = "openai:embedding:text-embedding-3-large"


@dataclass(frozen=True)
class ModelRun:
    """One of the config's model providers as the flags of ``envelope-ci run`` (the operator's, never the settings')."""

    source: str
    base_url: str
    model: str
    provider: str
    key_env: str
    temperature: float | None = None


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
            skipped.append(Skipped(where, shown_at(where, ident), f"not converted: {why}"))
            continue
        extra = [key for key in spec if key not in ("id", "config")] if isinstance(spec, dict) else []
        skipped += [Skipped(f"{where}.{key}", shown_at(f"{where}.{key}", spec[key]), "not converted: a run names "
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
            self.skipped.append(Skipped(where, shown_at(where, spec), f"not converted: the judge provider {why}"))
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
            self.skipped.append(Skipped(where, shown_at(where, spec),
                                        f"not converted: the embedding provider {why}"))
            return False
        if self.named.setdefault("embeddings", endpoint) != endpoint:
            self.skipped.append(Skipped(where, shown_at(where, spec), "not converted: envelope-ci asks one "
                                        "embeddings endpoint per suite, and another is named already"))
            return False
        self._left(where, left)
        return True

    def _left(self, where: str, left: list[str]) -> None:
        self.skipped.extend(Skipped(f"{where}.config.{key}", "a provider setting",
                                    "not converted: an endpoint here is base_url, model, api_key_env and "
                                    "temperature (a key is never copied into a file)") for key in left)
