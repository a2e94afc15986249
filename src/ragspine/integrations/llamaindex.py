"""A LlamaIndex retriever over a RAGSpine workspace (local `ragspine.open(...)` or the HTTP API).

`RAGSpineRetriever(ws)` is a `llama_index.core.retrievers.BaseRetriever`: `retrieve(query)`
returns `NodeWithScore`s (score: the fused score) whose `TextNode` holds a snippet's text, with
id = chunk id and flat metadata (`common.snippet_metadata`: doc_id, title, source_locator,
chunk_id, the labels, `score_<channel>`, `scores_json`, `lineage_json`, `filters_dropped`);
`aretrieve` runs without blocking the event loop. It plugs into a `RetrieverQueryEngine` like
any LlamaIndex retriever. `filters=MetadataFilters(...)` is translated into RAGSpine's filter
language (`metadata_filters.from_metadata_filters`; an operator it cannot honour is refused by
name) and AND-ed with `where`. Needs `pip install 'ragspine[llamaindex]'`.

Invariant: the nodes are built only from `common.passages` (RESTRICTED never included).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ragspine.extras import require
from ragspine.integrations.common import (
    Searcher,
    dropped_of,
    optional_kw,
    passages,
    search_async,
    snippet_metadata,
)
from ragspine.integrations.metadata_filters import TO_LLAMAINDEX, from_metadata_filters
from ragspine.retrieval.filters import And, Filter, Or, Predicate, parse_filter
from ragspine.retrieval.pipeline.request import check_filter_fallback, check_relevance_floor, check_top_k, check_where

_retrievers = require("llama_index.core.retrievers", extra="llamaindex", purpose="RAGSpineRetriever (LlamaIndex)")
_schema = require("llama_index.core.schema", extra="llamaindex", purpose="RAGSpineRetriever (LlamaIndex)")
_types = require("llama_index.core.vector_stores.types", extra="llamaindex", purpose="RAGSpineRetriever (LlamaIndex)")

__all__ = ["RAGSpineRetriever", "from_metadata_filters", "to_metadata_filters", "to_nodes"]
LLM_VISIBLE = ("title", "source_locator")


def to_nodes(snippets: Iterable[Mapping[str, Any]]) -> list[Any]:
    """`NodeWithScore`s for `snippets` (RESTRICTED dropped). LlamaIndex's prompt templates show
    an LLM the text with its title and source_locator (to cite); no metadata is embedded."""
    nodes, dropped = [], dropped_of(snippets)
    for s in passages(snippets):
        meta = snippet_metadata(s, dropped)
        node = _schema.TextNode(
            id_=s["chunk_id"], text=s["text"], metadata=meta, excluded_embed_metadata_keys=list(meta),
            excluded_llm_metadata_keys=[k for k in meta if k not in LLM_VISIBLE],
        )  # fmt: skip
        nodes.append(_schema.NodeWithScore(node=node, score=float(s.get("relevance") or 0.0)))
    return nodes


class RAGSpineRetriever(_retrievers.BaseRetriever):  # type: ignore[name-defined]
    """LlamaIndex retriever: ranked, cited RAGSpine snippets as `NodeWithScore`s.

    `searcher`: a `ragspine.open(...)` workspace or a `RemoteWorkspace`; `where`: a filter
    applied to every query (any form, the string form included: docs/filters.md); `filters`:
    a LlamaIndex `MetadataFilters`, AND-ed with `where`; `top_k`: nodes per query, a whole
    number (checked as on every surface: `check_top_k`); `filter_fallback`: "strict" or
    "retry" (None: the searcher's RAGSPINE_FILTER_FALLBACK); `min_score`: the least `relevance`
    (each node's `score`) a node needs (None: the workspace's RAGSPINE_MIN_SCORE).
    """

    def __init__(
        self,
        searcher: Searcher,
        *,
        where: Any = None,
        filters: Any = None,
        top_k: int = 5,
        filter_fallback: str | None = None,
        min_score: float | None = None,
        **kwargs: Any,
    ) -> None:
        if not isinstance(searcher, Searcher):
            raise TypeError(f"searcher must be a ragspine workspace or RemoteWorkspace, got {type(searcher).__name__}")
        translated = from_metadata_filters(filters)
        where = check_where(where)
        self.where = [w for w in (where, translated) if w] if translated else where
        self.searcher, self.top_k = searcher, check_top_k(top_k)
        self.filter_fallback = check_filter_fallback(filter_fallback)
        self.min_score = check_relevance_floor(min_score)
        super().__init__(**kwargs)

    def _retrieve(self, query_bundle: Any) -> list[Any]:
        return to_nodes(self.searcher.search(query_bundle.query_str, where=self.where, top_k=self.top_k,
                                             **optional_kw(filter_fallback=self.filter_fallback, min_score=self.min_score)))  # fmt: skip

    async def _aretrieve(self, query_bundle: Any) -> list[Any]:
        found = await search_async(self.searcher, query_bundle.query_str, where=self.where, top_k=self.top_k,
                                   filter_fallback=self.filter_fallback, min_score=self.min_score)  # fmt: skip
        return to_nodes(found)


def to_metadata_filters(spec: Any) -> Any:
    """A LlamaIndex `MetadataFilters` for a RAGSpine filter (any form, the string form
    included); `from_metadata_filters` reads it back to the same filter. None: no filter."""
    parsed = parse_filter(spec)
    return None if parsed is None else _to_llama(parsed)


def _to_llama(spec: Filter) -> Any:
    if isinstance(spec, And | Or):
        condition = _types.FilterCondition.AND if isinstance(spec, And) else _types.FilterCondition.OR
        return _types.MetadataFilters(filters=[_member(item) for item in spec.items], condition=condition)
    return _types.MetadataFilters(filters=[_member(spec)])


def _member(spec: Filter) -> Any:
    if not isinstance(spec, Predicate):
        return _to_llama(spec)
    if spec.op == "between":
        low, high = spec.value
        return _to_llama(And((Predicate(spec.field, "gte", low), Predicate(spec.field, "lte", high))))
    value = list(spec.value) if isinstance(spec.value, tuple) else spec.value
    return _types.MetadataFilter(key=spec.field, value=value, operator=_types.FilterOperator(TO_LLAMAINDEX[spec.op]))
