"""A LlamaIndex retriever over a RAGSpine workspace (local `ragspine.open(...)` or the HTTP API).

`RAGSpineRetriever(ws)` is a `llama_index.core.retrievers.BaseRetriever`: `retrieve(query)`
returns `NodeWithScore`s (score: the fused score) whose `TextNode` holds a snippet's text, with
id = chunk id and metadata doc_id, title, source_locator, chunk_id, the labels, per-channel
`scores` and `lineage`; `aretrieve` runs without blocking the event loop. It plugs into a
`RetrieverQueryEngine` like any LlamaIndex retriever. Needs `pip install 'ragspine[llamaindex]'`.

Invariant: the nodes are built only from `common.passages` (RESTRICTED never included).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ragspine.extras import require
from ragspine.integrations.common import Searcher, passages, search_async, snippet_metadata
from ragspine.retrieval.pipeline.request import check_relevance_floor, check_top_k

_retrievers = require("llama_index.core.retrievers", extra="llamaindex", purpose="RAGSpineRetriever (LlamaIndex)")
_schema = require("llama_index.core.schema", extra="llamaindex", purpose="RAGSpineRetriever (LlamaIndex)")

__all__ = ["RAGSpineRetriever", "to_nodes"]
LLM_VISIBLE = ("title", "source_locator")


def to_nodes(snippets: Iterable[Mapping[str, Any]]) -> list[Any]:
    """`NodeWithScore`s for `snippets` (RESTRICTED dropped). LlamaIndex's prompt templates show
    an LLM the text with its title and source_locator (to cite); no metadata is embedded."""
    nodes = []
    for s in passages(snippets):
        meta = snippet_metadata(s)
        node = _schema.TextNode(
            id_=s["chunk_id"], text=s["text"], metadata=meta, excluded_embed_metadata_keys=list(meta),
            excluded_llm_metadata_keys=[k for k in meta if k not in LLM_VISIBLE],
        )  # fmt: skip
        nodes.append(_schema.NodeWithScore(node=node, score=float(s.get("relevance") or 0.0)))
    return nodes


class RAGSpineRetriever(_retrievers.BaseRetriever):  # type: ignore[name-defined]
    """LlamaIndex retriever: ranked, cited RAGSpine snippets as `NodeWithScore`s.

    `searcher`: a `ragspine.open(...)` workspace or a `RemoteWorkspace`; `where`: a filter
    applied to every query (any form, the string form included: docs/filters.md); `top_k`:
    nodes per query, a whole number (checked as on every surface: `check_top_k`); `min_score`:
    the least `relevance` (each node's `score`) a node needs (None: the workspace's
    RAGSPINE_MIN_SCORE).
    """

    def __init__(
        self, searcher: Searcher, *, where: Any = None, top_k: int = 5, min_score: float | None = None, **kwargs: Any
    ) -> None:
        if not isinstance(searcher, Searcher):
            raise TypeError(f"searcher must be a ragspine workspace or RemoteWorkspace, got {type(searcher).__name__}")
        self.searcher, self.where, self.top_k = searcher, where, check_top_k(top_k)
        self.min_score = check_relevance_floor(min_score)
        super().__init__(**kwargs)

    def _retrieve(self, query_bundle: Any) -> list[Any]:
        found = self.searcher.search(query_bundle.query_str, where=self.where, top_k=self.top_k, min_score=self.min_score)
        return to_nodes(found)

    async def _aretrieve(self, query_bundle: Any) -> list[Any]:
        found = await search_async(
            self.searcher, query_bundle.query_str, where=self.where, top_k=self.top_k, min_score=self.min_score
        )
        return to_nodes(found)
