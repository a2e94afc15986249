"""The one way to pick a reranker: `make_reranker(spec, **options)` (RAGSPINE_RERANKER).

    from ragspine.retrieval.rerank.cross_encoder import make_reranker   # the specification's path

    make_reranker("none")                      # None: no second stage (the default)
    make_reranker("llm", provider=provider)    # the listwise LLM judge
    make_reranker("my_pkg.rerankers:Mine")     # a class of yours implementing Reranker

Invariants: names and errors come from the RERANKERS registry (a test keeps
`ragspine.settings.config.RERANKERS` equal to its names); whatever is built is checked against
the `Reranker` Protocol; every reranker runs behind `guard.rerank_head` (RESTRICTED exit #1).
"""

from __future__ import annotations

from typing import Any

from ragspine.registry import Entry, Registry
from ragspine.retrieval.rerank.protocol import Reranker

RERANKERS: Registry[Reranker] = Registry(
    "reranker",
    {"llm": Entry("ragspine.retrieval.rerank.llm_judge:ProviderListwiseJudge", "listwise LLM judge [llm]")},
    protocol=Reranker,
    none_names=("none",),
)


def make_reranker(spec: str = "none", **options: Any) -> Reranker | None:
    """The reranker `spec` names, built with `options`; None for "none".

    >>> make_reranker("none") is None
    True
    >>> try:
    ...     make_reranker("colbertish")
    ... except ValueError as exc:
    ...     print(exc)
    unknown reranker 'colbertish'; valid: none, llm, or a dotted path package.module:Class
    """
    return RERANKERS.make(spec, **options)
