"""The models RAGSpine names: each slot's default hub id and the documented choices
(docs/models.md gives their sizes, licences, languages and published quality).

Invariant: a name here is a hub id `resolve_model` accepts; `slot` is the setting that uses it.
An embedder's conventions come, most specific first, from what the caller passes, then the
repo's own sentence-transformers config (`sentence_transformers_convention`), then its family
by name (`embedding_convention`: E5, BGE-M3), then none (no prefix, mean pooling).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The specification's ms-marco MiniLM cross-encoder (the hub redirects its old id
# cross-encoder/ms-marco-MiniLM-L-6-v2 here); it ships int8 ONNX graphs under onnx/.
DEFAULT_CROSS_ENCODER = "cross-encoder/ms-marco-MiniLM-L6-v2"


@dataclass(frozen=True)
class KnownModel:
    """A model the docs name: its hub id, the setting that takes it, languages, licence."""

    repo_id: str
    setting: str
    languages: str
    licence: str
    note: str = ""


KNOWN_MODELS = (
    KnownModel(DEFAULT_CROSS_ENCODER, "RAGSPINE_RERANKER_MODEL", "en", "apache-2.0",
               "the default of RAGSPINE_RERANKER=cross_encoder (ONNX under onnx/)"),
    KnownModel("Xenova/ms-marco-MiniLM-L-6-v2", "RAGSPINE_RERANKER_MODEL", "en", "apache-2.0",
               "the same model, Transformers.js export (onnx/model_quantized.onnx)"),
    KnownModel("onnx-community/bge-reranker-v2-m3-ONNX", "RAGSPINE_RERANKER_MODEL", "multilingual (zh, en, ...)",
               "apache-2.0", "the multilingual choice for Chinese"),
)  # fmt: skip


def setting_of(repo_id: str) -> str:
    """The setting a known model is for, or "" when it is not one RAGSpine names.

    >>> setting_of("cross-encoder/ms-marco-MiniLM-L6-v2"), setting_of("me/mine")
    ('RAGSPINE_RERANKER_MODEL', '')
    """
    return next((m.setting for m in KNOWN_MODELS if m.repo_id == repo_id), "")


@dataclass(frozen=True)
class EmbeddingConvention:
    """How an embedding family is meant to be used: its query / passage prefixes and pooling."""

    query_prefix: str
    passage_prefix: str
    pooling: str


# Matched against the hub repo's name (lower case), first match wins: E5 models want "query: " /
# "passage: " and mean pooling (intfloat's model cards); BGE-M3's dense vector is the [CLS] token.
EMBEDDING_CONVENTIONS = (
    ("e5-", EmbeddingConvention("query: ", "passage: ", "mean")),
    ("bge-m3", EmbeddingConvention("", "", "cls")),
)


def embedding_convention(repo_id: str) -> EmbeddingConvention | None:
    """The convention of a hub embedding model by its name, or None.

    >>> embedding_convention("Xenova/multilingual-e5-base").query_prefix, embedding_convention("BAAI/bge-m3").pooling
    ('query: ', 'cls')
    >>> embedding_convention("sentence-transformers/all-MiniLM-L6-v2") is None
    True
    """
    name = repo_id.rsplit("/", 1)[-1].lower()
    return next((c for key, c in EMBEDDING_CONVENTIONS if key in name), None)


# What a sentence-transformers repo says about itself: its prompts, and its pooling module's config.
ST_FILES = ("config_sentence_transformers.json", "modules.json", "1_Pooling/config.json")
_ST_POOLING = "sentence_transformers.models.Pooling"


def sentence_transformers_convention(folder: Path) -> dict[str, str]:
    """The query / passage prefixes and pooling a sentence-transformers model folder declares
    (`query_prefix`, `passage_prefix`, `pooling` keys, each only where declared): the "query" and
    "passage" (or "document") prompts of config_sentence_transformers.json (a prompt missing
    beside a declared one is ""), and cls / mean from its Pooling module's config."""
    out: dict[str, str] = {}
    prompts = _json(folder / "config_sentence_transformers.json").get("prompts")
    if isinstance(prompts, dict) and prompts:
        out["query_prefix"] = str(prompts.get("query") or "")
        out["passage_prefix"] = str(prompts.get("passage") or prompts.get("document") or "")
    modules = _json_list(folder / "modules.json")
    path = next((m.get("path") for m in modules if isinstance(m, dict) and m.get("type") == _ST_POOLING), "1_Pooling")
    pooling = _json(folder / str(path) / "config.json")
    if pooling.get("pooling_mode_cls_token"):
        out["pooling"] = "cls"
    elif pooling.get("pooling_mode_mean_tokens"):
        out["pooling"] = "mean"
    return out


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _json_list(path: Path) -> list[Any]:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return []
    return data if isinstance(data, list) else []
