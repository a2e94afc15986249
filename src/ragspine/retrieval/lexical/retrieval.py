"""The lexical scoring core's public face (the specification's module path).

Everything here is pure Python: the tokenizer, Okapi BM25, RRF, the glossary rewriter, and the
retrievers built from them. Implementations live in sibling modules with one job each.
"""

from __future__ import annotations

from ragspine.retrieval.model import FILTER_FIELDS
from ragspine.retrieval.lexical.bm25 import (
    DEFAULT_BM25_B,
    DEFAULT_BM25_K1,
    InvertedBM25,
    bm25_idf,
    bm25_scores,
)
from ragspine.retrieval.fusion.rrf import DEFAULT_RRF_K, rrf_fuse
from ragspine.retrieval.query.glossary import Glossary, GlossaryQueryRewriter, load_glossary
from ragspine.retrieval.pipeline.hybrid import (
    DEFAULT_TOP_K,
    HybridRetriever,
    RetrievalResult,
)
from ragspine.retrieval.pipeline.narrative_index import NarrativeIndex
from ragspine.retrieval.types import EmbeddingBackend, QueryRewriter
from ragspine.retrieval.lexical.tokenize import tokenize

__all__ = [
    "DEFAULT_BM25_B",
    "DEFAULT_BM25_K1",
    "DEFAULT_RRF_K",
    "DEFAULT_TOP_K",
    "FILTER_FIELDS",
    "EmbeddingBackend",
    "Glossary",
    "GlossaryQueryRewriter",
    "HybridRetriever",
    "InvertedBM25",
    "NarrativeIndex",
    "QueryRewriter",
    "RetrievalResult",
    "bm25_idf",
    "bm25_scores",
    "load_glossary",
    "rrf_fuse",
    "tokenize",
]
