"""All RAGSPINE_* settings, read and validated in one place.

Invariants: no other module reads the environment. Every variable is declared once in SETTINGS
(name, default, help, parser); the table in docs/configuration.md and `ragspine config show` are
generated from it. A value comes from, highest precedence first: a command-line flag, the
environment, the TOML file named by RAGSPINE_CONFIG (or `--config`), the default. `load_settings()`
returns a frozen Settings; a bad value (or a bad combination) raises ConfigError naming the
variable, where the value came from, the value (masked for secrets) and what is accepted.
Secrets are held as `Secret` and never printed.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragspine.config_values import (
    API_KEYS,
    DB,
    EXISTING_FILE,
    HOST,
    HTTP_URL,
    SECRET,
    TEXT,
    Parser,
    choice,
    float_range,
    int_range,
)
from ragspine.secret import MASK, Secret

DEFAULT_DB = ".ragspine/chunks.db"
RETRIEVAL_MODES = ("auto", "hybrid", "vector", "economy", "bm25", "lexical")
DENSE_MODES = frozenset({"hybrid", "vector"})
EMBEDDING_CHOICES = ("none", "auto")
FILTER_EXTRACTORS = ("none", "rules", "llm")
VECTOR_STORES = ("in_process", "pgvector", "qdrant")  # the keys of make_vector_store's registry


class ConfigError(ValueError):
    """A RAGSPINE_* variable has a value that cannot be used."""


@dataclass(frozen=True)
class Setting:
    """One documented variable: its name, default and meaning (the docs table is built from these)."""

    env: str
    default: str | None
    help: str
    parse: Parser = TEXT
    secret: bool = False
    aliases: tuple[str, ...] = ()

    @property
    def field_name(self) -> str:
        """The Settings attribute that holds the parsed value: RAGSPINE_LLM_MODEL → llm_model."""
        return self.env.removeprefix("RAGSPINE_").lower()


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "RAGSPINE_CONFIG",
        None,
        "TOML file of settings (keys are these variable names); environment and flags override "
        "it. Set in the environment or with `--config`, never inside the file.",
        EXISTING_FILE,
    ),
    Setting(
        "RAGSPINE_DB",
        DEFAULT_DB,
        "Path of the SQLite chunk store (CLI, service, `ragspine.open`).",
        DB,
    ),
    Setting(
        "RAGSPINE_GLOSSARY",
        None,
        "Path of a glossary JSON file (entities and metrics with synonyms) for query rewriting; "
        "unset: the built-in glossary.",
        EXISTING_FILE,
    ),
    Setting(
        "RAGSPINE_FILTER_EXTRACTOR",
        "none",
        "Automatic filter extraction from the query text. none: off. rules: glossary entities, "
        "years/quarters/halves (二〇二五年, 2025年上半年, FY2024, Q3 2024) and place names. llm: ask "
        "the configured LLM (needs RAGSPINE_LLM_BASE_URL). It only narrows: explicit filters "
        "win, and an empty result falls back to the explicit filters alone.",
        choice(*FILTER_EXTRACTORS),
    ),
    Setting(
        "RAGSPINE_RETRIEVAL_MODE",
        "auto",
        "Retrieval preset. auto: hybrid when an embedding backend is configured, else BM25. "
        "hybrid/vector: require the dense channel (an error at start-up without one). "
        "economy/bm25/lexical: BM25 + RRF only, no embeddings.",
        choice(*RETRIEVAL_MODES),
    ),
    Setting(
        "RAGSPINE_EMBEDDING",
        "auto",
        "Embedding backend for the dense channel. auto resolves to none: no embedding backend "
        "ships in this version, so retrieval is BM25 + RRF.",
        choice(*EMBEDDING_CHOICES, note="the dense (embedding) channel is not available yet; "),
        aliases=("RAGSPINE_EMBEDDING_BACKEND",),
    ),
    Setting(
        "RAGSPINE_VECTOR_STORE",
        "in_process",
        "Vector store `make_vector_store()` builds when no name is given. in_process: numpy, in "
        "memory, saved to a folder. pgvector: a PostgreSQL table [postgres]. qdrant: a Qdrant "
        "collection [qdrant]. Not yet used by retrieval (the dense channel is not wired in).",
        choice(*VECTOR_STORES),
    ),
    Setting(
        "RAGSPINE_LLM_BASE_URL",
        None,
        "Base URL of an OpenAI-compatible chat API (…/v1). Set: `ask` answers with the LLM and "
        "search reranks the head with the listwise LLM judge. Unset: no LLM anywhere.",
        HTTP_URL,
    ),
    Setting("RAGSPINE_LLM_MODEL", None, "Model name sent to the LLM API (required with the base URL)."),
    Setting(
        "RAGSPINE_LLM_API_KEY",
        None,
        "Bearer key for the LLM API (masked in all output).",
        SECRET,
        secret=True,
    ),
    Setting(
        "RAGSPINE_LLM_TIMEOUT",
        "30",
        "Seconds before one LLM request times out.",
        float_range(0.1, 600),
    ),
    Setting(
        "RAGSPINE_LLM_MAX_RETRIES",
        "2",
        "Retries (with exponential backoff) after a 429, a 5xx, a timeout or a connection error.",
        int_range(0, 10),
    ),
    Setting("RAGSPINE_HOST", "127.0.0.1", "Address `ragspine serve` binds.", HOST),
    Setting("RAGSPINE_PORT", "8000", "Port `ragspine serve` binds.", int_range(1, 65535)),
    Setting(
        "RAGSPINE_API_KEYS",
        None,
        "API keys accepted by the HTTP service (`Authorization: Bearer KEY` or `X-API-Key`), "
        "comma-separated; required on every route but /health. Without keys the service only "
        "binds a loopback address.",
        API_KEYS,
        secret=True,
    ),
    Setting(
        "RAGSPINE_MAX_BODY_BYTES",
        "10485760",
        "Largest HTTP request body accepted (larger: 413).",
        int_range(1024, 1 << 30),
    ),
    Setting(
        "RAGSPINE_MAX_TOP_K",
        "100",
        "Largest `top_k` an HTTP request may ask for (larger: 422).",
        int_range(1, 10000),
    ),
)


@dataclass(frozen=True)
class Settings:
    """The effective configuration."""

    db: str = DEFAULT_DB
    glossary: str | None = None
    filter_extractor: str = "none"
    config: str | None = None
    retrieval_mode: str = "auto"
    embedding: str = "auto"
    vector_store: str = "in_process"
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_api_key: Secret | None = None
    llm_timeout: float = 30.0
    llm_max_retries: int = 2
    host: str = "127.0.0.1"
    port: int = 8000
    api_keys: tuple[Secret, ...] = ()
    max_body_bytes: int = 10485760
    max_top_k: int = 100

    @property
    def embedding_backend(self) -> str | None:
        """The embedding backend in use: none in this version (`auto` resolves to none)."""
        return None

    @property
    def effective_retrieval_mode(self) -> str:
        """What retrieval actually runs: "hybrid" (BM25 + dense → RRF) or "bm25" (BM25 + RRF)."""
        if self.retrieval_mode in DENSE_MODES or self.retrieval_mode == "auto":
            return "hybrid" if self.embedding_backend else "bm25"
        return "bm25"

    @property
    def llm_configured(self) -> bool:
        """True when an OpenAI-compatible LLM endpoint is configured."""
        return self.llm_base_url is not None

    def channels(self) -> dict[str, str]:
        """The configured retrieval channels, for `config show` and the service's stats."""
        mode = self.effective_retrieval_mode
        return {
            "retrieval_mode": f"{self.retrieval_mode} -> {mode}",
            "lexical": "bm25 (CJK unigram+bigram) + rrf",
            "dense": self.embedding_backend or "none",
            "query_rewriter": f"glossary ({self.glossary or 'built-in'})",
            "reranker": "listwise LLM judge" if self.llm_configured else "none",
            "llm": f"{self.llm_model} at {self.llm_base_url}" if self.llm_configured else "none",
        }


@dataclass(frozen=True)
class ResolvedSettings:
    """Settings plus, for each variable, where its value came from."""

    settings: Settings
    sources: Mapping[str, str] = field(default_factory=dict)  # "default" | "environment" | "file" | "flag"


def load_settings(
    env: Mapping[str, str] | None = None,
    *,
    config_file: str | Path | None = None,
    flags: Mapping[str, object] | None = None,
) -> Settings:
    """Read and validate every RAGSPINE_* setting; see `resolve_settings`."""
    return resolve_settings(env, config_file=config_file, flags=flags).settings


def resolve_settings(
    env: Mapping[str, str] | None = None,
    *,
    config_file: str | Path | None = None,
    flags: Mapping[str, object] | None = None,
) -> ResolvedSettings:
    """Read, parse and validate every setting from `flags` (keyed by variable name; None means
    not given), `env` (default: the process environment), the config file (`config_file`, else
    RAGSPINE_CONFIG) and the defaults, in that order of precedence."""
    environ = os.environ if env is None else env
    given = {k: str(v) for k, v in (flags or {}).items() if v is not None}
    if config_file is not None:
        given["RAGSPINE_CONFIG"] = str(config_file)
    unknown = sorted(set(given) - {s.env for s in SETTINGS})
    if unknown:
        raise ConfigError(f"unknown setting(s) {', '.join(unknown)}")
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    in_file: dict[str, str] = {}
    for setting in SETTINGS:
        raw, source = given.get(setting.env), "flag"
        if raw is None:
            raw, source = _from_env(setting, environ), "environment"
        if raw is None:
            raw, source = in_file.get(setting.env), "file"
        if raw is None:
            raw, source = setting.default, "default"
        sources[setting.env] = source
        values[setting.field_name] = None if raw is None else _parse(setting, raw, source)
        if setting.env == "RAGSPINE_CONFIG" and values[setting.field_name] is not None:
            in_file = _read_config_file(values[setting.field_name])
    settings = Settings(**{k: v for k, v in values.items() if v is not None})
    _check_combinations(settings, sources)
    return ResolvedSettings(settings, sources)


def describe(resolved: ResolvedSettings) -> list[tuple[str, str, str]]:
    """(variable, value as shown, source) for every setting; secrets masked."""
    rows = []
    for setting in SETTINGS:
        value = getattr(resolved.settings, setting.field_name, None)
        rows.append((setting.env, _show(value), resolved.sources.get(setting.env, "default")))
    return rows


def markdown_table() -> str:
    """The table of every setting for docs/configuration.md, generated from SETTINGS."""
    lines = ["| Variable | Default | Accepted | Meaning |", "|---|---|---|---|"]
    for s in SETTINGS:
        name = f"`{s.env}`" + "".join(f" (alias `{a}`)" for a in s.aliases)
        default = "—" if s.default is None else f"`{s.default}`"
        meaning = s.help.replace("|", r"\|")
        lines.append(f"| {name} | {default} | {s.parse.accepts} | {meaning} |")
    return "\n".join(lines) + "\n"


def _from_env(setting: Setting, environ: Mapping[str, str]) -> str | None:
    found = {n: environ[n].strip() for n in (setting.env, *setting.aliases) if environ.get(n, "").strip()}
    if len(set(found.values())) > 1:
        raise ConfigError(f"{' and '.join(found)} are both set, to different values; set only {setting.env}")
    return next(iter(found.values()), None)


def _parse(setting: Setting, raw: str, source: str) -> Any:
    try:
        return setting.parse(raw.strip())
    except ValueError as exc:
        shown = MASK if setting.secret else raw
        raise ConfigError(f"{setting.env}={shown!r} (from {source}): {exc}") from None


def _read_config_file(path: str) -> dict[str, str]:
    try:
        data = tomllib.loads(Path(path).read_text("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"RAGSPINE_CONFIG={path!r}: not a readable UTF-8 TOML file: {exc}") from None
    names = {n: s.env for s in SETTINGS if s.env != "RAGSPINE_CONFIG" for n in (s.env, *s.aliases)}
    out: dict[str, str] = {}
    for key, value in data.items():
        if key not in names:
            raise ConfigError(
                f"{path}: unknown setting {key!r}; valid keys: {', '.join(sorted(set(names.values())))}"
            )
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            value = ",".join(value)
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ConfigError(f"{path}: {key} must be a string or a number, got {type(value).__name__}")
        out[names[key]] = str(value)
    return out


def _check_combinations(settings: Settings, sources: Mapping[str, str]) -> None:
    if settings.retrieval_mode in DENSE_MODES and settings.embedding_backend is None:
        raise ConfigError(
            f"RAGSPINE_RETRIEVAL_MODE={settings.retrieval_mode!r} (from "
            f"{sources['RAGSPINE_RETRIEVAL_MODE']}) needs the dense channel, but no embedding "
            f"backend is configured (RAGSPINE_EMBEDDING={settings.embedding!r}; the dense channel "
            "is not available yet); use auto or bm25"
        )
    if settings.filter_extractor == "llm" and not settings.llm_base_url:
        raise ConfigError(
            "RAGSPINE_FILTER_EXTRACTOR='llm' needs an LLM, but RAGSPINE_LLM_BASE_URL is not set; "
            "set it (and RAGSPINE_LLM_MODEL), or use rules or none"
        )
    if settings.llm_base_url and not settings.llm_model:
        raise ConfigError("RAGSPINE_LLM_BASE_URL is set but RAGSPINE_LLM_MODEL is not; name the model")
    for name in ("llm_model", "llm_api_key"):
        if getattr(settings, name) is not None and not settings.llm_base_url:
            raise ConfigError(
                f"RAGSPINE_{name.upper()} is set but RAGSPINE_LLM_BASE_URL is not; "
                "set the base URL too, or unset it"
            )


def _show(value: Any) -> str:
    if value is None:
        return "(unset)"
    if isinstance(value, tuple):
        return f"{MASK} ({len(value)} keys)" if value else "(none)"
    return str(value)
