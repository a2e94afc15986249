"""The combinations of settings that cannot work together, refused before anything is built.

Invariant: each check reads only a `Settings` (and where its values came from) and raises
ConfigError naming the variables and the fix; the checks that need a component (an embedding
backend that resolves, fusion weights `Fusion` accepts) are `ragspine.assembly`'s.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from ragspine.models.hub import parse_hub_ref
from ragspine.settings.choices import (
    EMBEDDING_MODEL_OPTION,
    LEXICAL_MODES,
    LOCAL_MODEL_PATH,
    ONNX_EMBEDDINGS,
    QUERY_STAGE,
    REMOTE_EMBEDDINGS,
    TORCH_EMBEDDINGS,
    VISUAL_MODEL_FOLDER,
)
from ragspine.settings.errors import ConfigError
from ragspine.settings.schema import Settings


def check_combinations(settings: Settings, sources: Mapping[str, str]) -> None:
    """Raise ConfigError for the first combination of `settings` that cannot work."""
    _check_embedding(settings, sources)
    _check_query_stage(settings)
    _check_fusion(settings)
    _check_vector_store(settings)
    for var, value in (("RAGSPINE_RERANKER", settings.reranker), ("RAGSPINE_ROUTER", settings.router),
                       ("RAGSPINE_RELATION_EXTRACTOR", settings.relation_extractor)):  # fmt: skip
        if value == "llm" and not settings.llm_base_url:
            raise ConfigError(
                f"{var}='llm' needs an LLM, but RAGSPINE_LLM_BASE_URL is not set; set it (and "
                "RAGSPINE_LLM_MODEL), or choose another"
            )
    _check_reranker(settings)
    _check_visual(settings)
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


def _check_vector_store(settings: Settings) -> None:
    name, url, collection = settings.vector_store, settings.vector_url, settings.vector_collection
    if name == "in_process":
        for var, value in (("RAGSPINE_VECTOR_URL", url), ("RAGSPINE_VECTOR_COLLECTION", collection)):
            if value is not None:
                raise ConfigError(
                    f"{var} is set but RAGSPINE_VECTOR_STORE='in_process' keeps vectors beside the "
                    "store; set RAGSPINE_VECTOR_STORE=pgvector or qdrant, or unset it"
                )
    if collection is not None and not re.fullmatch(r"[a-z_][a-z0-9_]{0,50}", collection):
        raise ConfigError(
            f"RAGSPINE_VECTOR_COLLECTION={collection!r}: use lower-case letters, digits and _ "
            "(at most 51, not starting with a digit)"
        )
    if name == "pgvector":
        target = url if url is not None else settings.db
        if not target.startswith(("postgresql://", "postgres://")):
            raise ConfigError(
                "RAGSPINE_VECTOR_STORE='pgvector' needs a PostgreSQL database: set "
                "RAGSPINE_VECTOR_URL=postgresql://… (or keep the chunks in PostgreSQL with RAGSPINE_DB)"
            )
    if name == "qdrant" and url is None:
        raise ConfigError(
            "RAGSPINE_VECTOR_STORE='qdrant' needs RAGSPINE_VECTOR_URL: the server's http(s) URL, "
            "or a folder for Qdrant's local mode"
        )


def _check_reranker(settings: Settings) -> None:
    """A reranker that needs a model folder or a server URL has one; a URL or key without http."""
    name = settings.reranker
    if name == "colbert" and not settings.reranker_model:
        raise ConfigError(
            "RAGSPINE_RERANKER='colbert' needs a model (model.onnx + tokenizer.json); set "
            "RAGSPINE_RERANKER_MODEL to a folder or a hub id ORG/NAME[@REVISION], or choose "
            "cross_encoder, splade or none"
        )
    if name == "http" and not settings.reranker_url:
        raise ConfigError("RAGSPINE_RERANKER='http' needs RAGSPINE_RERANKER_URL (the rerank endpoint)")
    for var, value in (("RAGSPINE_RERANKER_URL", settings.reranker_url),
                       ("RAGSPINE_RERANKER_API_KEY", settings.reranker_api_key)):  # fmt: skip
        if value is not None and name != "http":
            raise ConfigError(f"{var} is set but RAGSPINE_RERANKER={name!r}; set RAGSPINE_RERANKER=http, or unset it")


def _check_visual(settings: Settings) -> None:
    """A ColPali-family embedder needs its weights folder; the page index lives beside a SQLite store."""
    name = settings.visual_embedder
    if name in VISUAL_MODEL_FOLDER and not settings.visual_model:
        raise ConfigError(
            f"RAGSPINE_VISUAL_EMBEDDER={name!r} needs RAGSPINE_VISUAL_MODEL: a local folder of the "
            "model's weights or a hub id (e.g. vidore/colqwen2-v1.0)"
        )
    if name != "none" and "://" in settings.db:
        raise ConfigError(
            "RAGSPINE_VISUAL_EMBEDDER is set, but the page index lives beside a SQLite store and "
            "RAGSPINE_DB is a server URL; unset RAGSPINE_VISUAL_EMBEDDER"
        )


def _check_query_stage(settings: Settings) -> None:
    """The query transforms that need an LLM, and Adaptive routing without a decomposer."""
    values = [(var, query_stage_value(settings, var)) for _, var in QUERY_STAGE]
    needs_llm = [f"{var}={value!r}" for var, value in values if value in ("llm", "hyde", "rag_fusion", "step_back")]
    if needs_llm and not settings.llm_base_url:
        raise ConfigError(
            f"{', '.join(needs_llm)} needs an LLM, but RAGSPINE_LLM_BASE_URL is not set; set it (and "
            "RAGSPINE_LLM_MODEL), or choose none (or rules)"
        )
    if settings.adaptive != "none" and settings.query_decompose == "none":
        raise ConfigError(
            f"RAGSPINE_ADAPTIVE={settings.adaptive!r} routes between single-shot and decomposition, "
            "but RAGSPINE_QUERY_DECOMPOSE=none; set RAGSPINE_QUERY_DECOMPOSE=llm, or RAGSPINE_ADAPTIVE=none"
        )


def query_stage_value(settings: Settings, var: str) -> str:
    """The value of one of the QUERY_STAGE variables."""
    value: str = getattr(settings, var.removeprefix("RAGSPINE_").lower())
    return value


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
    if settings.e5_engine is not None and name not in ("e5", "multilingual", "auto"):
        raise ConfigError(
            f"RAGSPINE_E5_ENGINE is set but {named} is not the e5 backend; set RAGSPINE_EMBEDDING=e5, "
            "or unset it"
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
    if name in TORCH_EMBEDDINGS and settings.embedding_model is None:
        raise ConfigError(f"{named} needs RAGSPINE_EMBEDDING_MODEL: the path of a local model folder")
    _check_embedding_model(settings, sources, named)


def _check_embedding_model(settings: Settings, sources: Mapping[str, str], named: str) -> None:
    """A local model path must exist, unless the backend takes a hub id and this is one (`hub`
    takes only a hub id)."""
    name, model = settings.embedding, settings.embedding_model
    hub_ok = name in ONNX_EMBEDDINGS and model is not None and parse_hub_ref(model) is not None
    if name == "hub" and not hub_ok:
        raise ConfigError(
            f"{named} needs a hub id: spell it RAGSPINE_EMBEDDING=hub:ORG/NAME[@REVISION] (or set "
            f"RAGSPINE_EMBEDDING_MODEL=ORG/NAME[@REVISION]); got {model!r}"
        )
    if name in LOCAL_MODEL_PATH and model is not None and not Path(model).exists() and not hub_ok:
        raise ConfigError(
            f"RAGSPINE_EMBEDDING_MODEL={model!r} (from "
            f"{sources.get('RAGSPINE_EMBEDDING_MODEL', 'default')}): no such file or folder; "
            f"{name} reads a local model folder (onnx and hub also a hub id ORG/NAME[@REVISION])"
        )


def _check_fusion(settings: Settings) -> None:
    for var, value, method in (
        ("RAGSPINE_FUSION_DENSE_SHARE", settings.fusion_dense_share, "zscore"),
        ("RAGSPINE_FUSION_BM25_K1", settings.fusion_bm25_k1, "zscore"),
        ("RAGSPINE_FUSION_WEIGHTS", settings.fusion_weights, "weighted"),
        ("RAGSPINE_FUSION_ADAPTIVE", settings.fusion_adaptive, "adaptive"),
    ):
        if value is not None and settings.fusion != method:
            raise ConfigError(
                f"{var} is set but RAGSPINE_FUSION={settings.fusion!r}; it is used only by "
                f"RAGSPINE_FUSION={method}: set that, or unset {var}"
            )


