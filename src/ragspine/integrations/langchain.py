"""A LangChain retriever over a RAGSpine workspace (local `ragspine.open(...)` or the HTTP API).

`RAGSpineRetriever(searcher=ws)` is a `langchain_core.retrievers.BaseRetriever`: `invoke(query)`
returns `Document`s whose `page_content` is a snippet's text and whose flat `metadata`
(`common.snippet_metadata`) carries doc_id, title, source_locator, chunk_id, the labels,
`score_<channel>`, `scores_json`, `lineage_json` and `filters_dropped`; `ainvoke` runs without
blocking the event loop. `StructuredQueryTranslator` turns LangChain's structured query (what
a self-query chain writes) into `ws.search` arguments in RAGSpine's filter language. Needs
`pip install 'ragspine[langchain]'`.

Invariant: the documents are built only from `common.passages` (RESTRICTED never included).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated, Any

from ragspine.extras import require
from ragspine.integrations.common import (
    Searcher,
    dropped_of,
    optional_kw,
    passages,
    search_async,
    snippet_metadata,
)
from ragspine.retrieval.pipeline.request import check_filter_fallback, check_relevance_floor, check_top_k

_core = require("langchain_core.retrievers", extra="langchain", purpose="RAGSpineRetriever (LangChain)")
_documents = require("langchain_core.documents", extra="langchain", purpose="RAGSpineRetriever (LangChain)")
_pydantic = require("pydantic", extra="langchain", purpose="RAGSpineRetriever (LangChain)")
_query = require("langchain_core.structured_query", extra="langchain", purpose="StructuredQueryTranslator (LangChain)")

__all__ = ["RAGSpineRetriever", "StructuredQueryTranslator", "to_documents"]


def to_documents(snippets: Iterable[Mapping[str, Any]]) -> list[Any]:
    """LangChain `Document`s for `snippets` (RESTRICTED dropped), ids = chunk ids; each one's
    metadata carries the search's `filters_dropped`."""
    dropped = dropped_of(snippets)
    return [
        _documents.Document(page_content=s["text"], metadata=snippet_metadata(s, dropped), id=s.get("chunk_id"))
        for s in passages(snippets)
    ]


class RAGSpineRetriever(_core.BaseRetriever):  # type: ignore[name-defined]
    """LangChain retriever: ranked, cited RAGSpine snippets as `Document`s.

    `searcher`: a `ragspine.open(...)` workspace or a `RemoteWorkspace`; `where`: a filter
    applied to every query (any form, the string form included: docs/filters.md); `top_k`:
    documents per query, a whole number (checked as on every surface: `check_top_k`);
    `filter_fallback`: "strict" or "retry" (None: the searcher's RAGSPINE_FILTER_FALLBACK).
    `min_score`: the least `relevance` (metadata["relevance"]) a document needs (None: the
    workspace's RAGSPINE_MIN_SCORE).
    """

    model_config = _pydantic.ConfigDict(arbitrary_types_allowed=True)
    searcher: Any
    where: Any = None
    top_k: Annotated[int, _pydantic.BeforeValidator(check_top_k)] = 5
    filter_fallback: Annotated[str | None, _pydantic.BeforeValidator(check_filter_fallback)] = None
    min_score: Annotated[float | None, _pydantic.BeforeValidator(check_relevance_floor)] = None

    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Any]:
        found = _searcher(self.searcher).search(
            query, where=self.where, top_k=self.top_k,
            **optional_kw(filter_fallback=self.filter_fallback, min_score=self.min_score),
        )  # fmt: skip
        return to_documents(found)

    async def _aget_relevant_documents(self, query: str, *, run_manager: Any) -> list[Any]:
        found = await search_async(_searcher(self.searcher), query, where=self.where, top_k=self.top_k,
                                   filter_fallback=self.filter_fallback, min_score=self.min_score)  # fmt: skip
        return to_documents(found)


def _searcher(value: Any) -> Searcher:
    if not isinstance(value, Searcher):
        raise TypeError(f"searcher must be a ragspine workspace or RemoteWorkspace, got {type(value).__name__}")
    return value


class StructuredQueryTranslator(_query.Visitor):  # type: ignore[name-defined]
    """LangChain's `StructuredQuery` as `(query, {"where": ..., "top_k": ...})` for
    `ws.search(query, **kwargs)` or `RAGSpineRetriever(searcher=ws, **kwargs)`.

    Comparators eq, ne, gt, gte, lt, lte, in, nin and operators and, or map one to one;
    `contain`, `like` and `not` are refused by name (a one-line ValueError): RAGSpine filters
    match whole values and have no negation of a group.
    """

    allowed_comparators = tuple(_query.Comparator(op) for op in ("eq", "ne", "gt", "gte", "lt", "lte", "in", "nin"))
    allowed_operators = (_query.Operator.AND, _query.Operator.OR)

    def visit_operation(self, operation: Any) -> dict[str, Any]:
        name = operation.operator.value
        if operation.operator not in self.allowed_operators:
            raise ValueError(f"LangChain operator {name!r} is not supported (RAGSpine has and, or)")
        return {name: [argument.accept(self) for argument in operation.arguments]}

    def visit_comparison(self, comparison: Any) -> dict[str, Any]:
        name = comparison.comparator.value
        if comparison.comparator not in self.allowed_comparators:
            raise ValueError(f"LangChain comparator {name!r} on {comparison.attribute!r} is not supported: "
                             "RAGSpine filters match whole values (use eq or in)")  # fmt: skip
        return {comparison.attribute: {name: comparison.value}}

    def visit_structured_query(self, structured_query: Any) -> tuple[str, dict[str, Any]]:
        kwargs: dict[str, Any] = {}
        if structured_query.filter is not None:
            kwargs["where"] = structured_query.filter.accept(self)
        if structured_query.limit is not None:
            kwargs["top_k"] = check_top_k(structured_query.limit)
        return structured_query.query, kwargs
