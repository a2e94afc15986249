"""The models RAGSpine names: each slot's default hub id and the documented choices
(docs/models.md gives their sizes, licences, languages and published quality).

Invariant: a name here is a hub id `resolve_model` accepts; `slot` is the setting that uses it.
"""

from __future__ import annotations

from dataclasses import dataclass

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
