"""The seam between retrieval and the agent; RESTRICTED exit #2.

Invariants: `NarrativeIndexRetriever.retrieve` drops every RESTRICTED chunk before any snippet
dict exists, so RESTRICTED text never reaches a synthesis prompt; an empty filtered result is
retried once without filters, and the snippet's `lineage` says so; an unknown filter key is a
ValueError that lists the valid keys.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ragspine.agent.agent import LLMProvider
from ragspine.retrieval.chunking.chunk_store import ChunkStore
from ragspine.retrieval.chunking.chunking import FILTER_FIELDS
from ragspine.retrieval.lexical.glossary import GlossaryQueryRewriter
from ragspine.retrieval.lexical.hybrid import DEFAULT_TOP_K, RetrievalResult
from ragspine.retrieval.lexical.narrative_index import NarrativeIndex
from ragspine.retrieval.lexical.protocols import EmbeddingBackend, QueryRewriter
from ragspine.retrieval.rerank.listwise_rerank import build_listwise_prompt, parse_listwise_response
from ragspine.retrieval.sensitivity import RESTRICTED_SENSITIVITY, is_restricted

__all__ = [
    "RESTRICTED_SENSITIVITY",
    "NarrativeIndexRetriever",
    "ProviderListwiseJudge",
    "build_narrative_retriever",
    "filter_kwargs",
]

_LOG = logging.getLogger(__name__)
_JUDGE_SYSTEM = "You are a precise search relevance judge. Follow the answer format exactly."


def filter_kwargs(filters: Mapping[str, Any] | None) -> dict[str, str]:
    """Validate a filters mapping and turn it into NarrativeIndex keyword arguments."""
    if not filters:
        return {}
    unknown = sorted(str(k) for k in filters if k not in FILTER_FIELDS)
    if unknown:
        raise ValueError(
            f"unknown filter key(s) {', '.join(unknown)}; valid keys: {', '.join(FILTER_FIELDS)}"
        )
    out: dict[str, str] = {}
    for key, value in filters.items():
        if value is None:
            continue
        if not isinstance(value, str):
            raise ValueError(f"filter {key!r} must be a string, got {type(value).__name__}")
        out[key] = value
    return out


class NarrativeIndexRetriever:
    """Adapts a NarrativeIndex to the agent's NarrativeRetriever contract.

    >>> retriever, store = build_narrative_retriever(":memory:")
    >>> retriever.retrieve("营收")
    []
    >>> store.close()
    """

    def __init__(self, index: NarrativeIndex, *, retry_without_filters: bool = True) -> None:
        self.index = index
        self.retry_without_filters = retry_without_filters

    def retrieve(
        self, query: str, *, filters: dict[str, str] | None = None, top_k: int = DEFAULT_TOP_K
    ) -> list[dict[str, Any]]:
        """RESTRICTED-free snippet dicts with full lineage, best first."""
        kwargs = filter_kwargs(filters)
        results = self.index.retrieve(query, top_k=top_k, **kwargs)
        lineage: dict[str, Any] = {"filters": kwargs, "retried_without_filters": False}
        if not results and kwargs and self.retry_without_filters:
            _LOG.info("no result with filters %s; retrying once without filters", kwargs)
            results = self.index.retrieve(query, top_k=top_k)
            lineage = {"filters": {}, "requested_filters": kwargs, "retried_without_filters": True}
        return [_to_snippet(r, lineage) for r in results if not is_restricted(r.chunk.sensitivity)]


class ProviderListwiseJudge:
    """A ListwiseJudge backed by the agent's LLMProvider: one chat call per rerank.

    Provider errors propagate; `listwise_rerank` turns them into the RRF fallback.
    """

    def __init__(self, provider: LLMProvider) -> None:
        self.provider = provider

    def judge(self, query: str, candidates: list[str]) -> list[int]:
        messages = [
            {"role": "system", "content": _JUDGE_SYSTEM},
            {"role": "user", "content": build_listwise_prompt(query, candidates)},
        ]
        reply = self.provider.chat(messages)
        return parse_listwise_response(reply, len(candidates))


def build_narrative_retriever(
    chunk_db: str | Path,
    provider: LLMProvider | None = None,
    *,
    embedding_backend: EmbeddingBackend | None = None,
    query_rewriter: QueryRewriter | None = None,
) -> tuple[NarrativeIndexRetriever, ChunkStore]:
    """The default assembly: store (schema ensured) → BM25 + RRF (+ vectors when a backend is
    given) → glossary multi-query (the configured glossary unless `query_rewriter` is given) →
    listwise rerank when a provider is given. The caller closes the returned store."""
    store = ChunkStore(chunk_db)
    try:
        store.init_schema()
        index = NarrativeIndex(
            store,
            embedding_backend=embedding_backend,
            query_rewriter=query_rewriter or GlossaryQueryRewriter(),
            judge=ProviderListwiseJudge(provider) if provider is not None else None,
        )
    except BaseException:
        store.close()
        raise
    return NarrativeIndexRetriever(index), store


def _to_snippet(result: RetrievalResult, lineage: dict[str, Any]) -> dict[str, Any]:
    chunk = result.chunk
    return {
        "text": chunk.text,
        "doc_id": chunk.doc_id,
        "title": chunk.title,
        "source_locator": chunk.source_locator,
        "chunk_id": chunk.chunk_id,
        "topic": chunk.topic,
        "entity": chunk.entity,
        "geography": chunk.geography,
        "period": chunk.period,
        "language": chunk.language,
        "sensitivity": chunk.sensitivity,
        "version": getattr(chunk, "version", None),
        "valid_as_of": getattr(chunk, "valid_as_of", ""),
        "scores": {
            "bm25": result.bm25_score,
            "vector": result.vector_score,
            "fused": result.fused_score,
        },
        "lineage": dict(lineage),
    }
