"""The query-rewriter slot: `make_query_rewriter(spec, glossary=...)` (RAGSPINE_QUERY_REWRITER).

    from ragspine.retrieval.query.factory import make_query_rewriter

    rewriter = make_query_rewriter("glossary", glossary=load_glossary("my_terms.json"))
    rewriter.rewrite("为什么营收下滑")   # the original first, then glossary variants

Invariants: names and errors come from the QUERY_REWRITERS registry (`ragspine.catalog`'s table,
whose names RAGSPINE_QUERY_REWRITER accepts); "none" is None: each query is searched as given, alone. Every
rewriter returns the original query first. The LLM transforms (HyDE, RAG-Fusion, step-back) and
decomposition have their own registries in `transforms` (`make_query_transform`, re-exported
here); every variant any of them makes passes the security gate (`gate`) before it is searched.
"""

from __future__ import annotations

from typing import Any

from ragspine import catalog
from ragspine.registry import Registry
from ragspine.retrieval.query.transforms import QUERY_TRANSFORMS, make_query_transform
from ragspine.retrieval.types import QueryRewriter

__all__ = ["QUERY_REWRITERS", "QUERY_TRANSFORMS", "make_query_rewriter", "make_query_transform"]

QUERY_REWRITERS: Registry[QueryRewriter] = catalog.QUERY_REWRITERS.bind(QueryRewriter)


def make_query_rewriter(spec: str = "glossary", **options: Any) -> QueryRewriter | None:
    """The rewriter `spec` names, built with `options` (glossary: `glossary`, `max_queries`).

    >>> make_query_rewriter("glossary").rewrite("revenue")[0]
    'revenue'
    >>> make_query_rewriter("none") is None
    True
    """
    return QUERY_REWRITERS.make(spec, **options)
