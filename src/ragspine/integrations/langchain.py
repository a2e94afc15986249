"""A LangChain retriever over a RAGSpine workspace (local `ragspine.open(...)` or the HTTP API).

`RAGSpineRetriever(searcher=ws)` is a `langchain_core.retrievers.BaseRetriever`: `invoke(query)`
returns `Document`s whose `page_content` is a snippet's text and whose `metadata` carries
doc_id, title, source_locator, chunk_id, the labels, per-channel `scores` and `lineage`;
`ainvoke` runs without blocking the event loop. Needs `pip install 'ragspine[langchain]'`.

Invariant: the documents are built only from `common.passages` (RESTRICTED never included).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated, Any

from ragspine.extras import require
from ragspine.integrations.common import Searcher, passages, search_async, snippet_metadata
from ragspine.retrieval.pipeline.request import check_relevance_floor, check_top_k

_core = require("langchain_core.retrievers", extra="langchain", purpose="RAGSpineRetriever (LangChain)")
_documents = require("langchain_core.documents", extra="langchain", purpose="RAGSpineRetriever (LangChain)")
_pydantic = require("pydantic", extra="langchain", purpose="RAGSpineRetriever (LangChain)")

__all__ = ["RAGSpineRetriever", "to_documents"]


def to_documents(snippets: Iterable[Mapping[str, Any]]) -> list[Any]:
    """LangChain `Document`s for `snippets` (RESTRICTED dropped), ids = chunk ids."""
    return [
        _documents.Document(page_content=s["text"], metadata=snippet_metadata(s), id=s.get("chunk_id"))
        for s in passages(snippets)
    ]


class RAGSpineRetriever(_core.BaseRetriever):  # type: ignore[name-defined]
    """LangChain retriever: ranked, cited RAGSpine snippets as `Document`s.

    `searcher`: a `ragspine.open(...)` workspace or a `RemoteWorkspace`; `where`: a filter
    applied to every query (any form, the string form included: docs/filters.md); `top_k`:
    documents per query, a whole number (checked as on every surface: `check_top_k`);
    `min_score`: the least `relevance` (metadata["relevance"]) a document needs (None: the
    workspace's RAGSPINE_MIN_SCORE).
    """

    model_config = _pydantic.ConfigDict(arbitrary_types_allowed=True)
    searcher: Any
    where: Any = None
    top_k: Annotated[int, _pydantic.BeforeValidator(check_top_k)] = 5
    min_score: Annotated[float | None, _pydantic.BeforeValidator(check_relevance_floor)] = None

    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Any]:
        found = _searcher(self.searcher).search(query, where=self.where, top_k=self.top_k, min_score=self.min_score)
        return to_documents(found)

    async def _aget_relevant_documents(self, query: str, *, run_manager: Any) -> list[Any]:
        found = await search_async(
            _searcher(self.searcher), query, where=self.where, top_k=self.top_k, min_score=self.min_score
        )
        return to_documents(found)


def _searcher(value: Any) -> Searcher:
    if not isinstance(value, Searcher):
        raise TypeError(f"searcher must be a ragspine workspace or RemoteWorkspace, got {type(value).__name__}")
    return value
