"""Ranking metrics as small pure functions, with trec_eval's conventions.

Invariants: a ranking is a sequence of distinct document ids, best first; `relevance` maps a
judged document id to its grade. A document counts as relevant when its grade is >= 1 (trec_eval's
default relevance level); nDCG uses the grade itself as the gain, a log2(rank + 1) discount and
the ideal ordering of the judged grades. Queries with no relevant document are left out of the
means (trec_eval and BEIR do the same); a judged query with no ranking scores 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

Relevance = Mapping[str, int]
Qrels = Mapping[str, Relevance]

NDCG_K = 10
RECALL_K = 100
MRR_K = 10


def _check(ranking: Sequence[str], k: int) -> None:
    if k <= 0:
        raise ValueError(f"cutoff k must be a positive integer, got {k}")
    if len(set(ranking)) != len(ranking):
        raise ValueError("a ranking must list each document once")


def ndcg_at_k(ranking: Sequence[str], relevance: Relevance, k: int = NDCG_K) -> float:
    """nDCG@k with gain = grade and discount log2(rank + 1); 0.0 when nothing is relevant.

    >>> round(ndcg_at_k(["a", "b"], {"b": 1}), 4)
    0.6309
    """
    _check(ranking, k)
    ideal_gains = sorted((g for g in relevance.values() if g > 0), reverse=True)[:k]
    ideal = sum(g / math.log2(i + 2) for i, g in enumerate(ideal_gains))
    if ideal == 0:
        return 0.0
    dcg = 0.0
    for i, doc in enumerate(ranking[:k]):
        gain = relevance.get(doc, 0)
        if gain > 0:
            dcg += gain / math.log2(i + 2)
    return dcg / ideal


def recall_at_k(ranking: Sequence[str], relevance: Relevance, k: int = RECALL_K) -> float:
    """Share of the relevant documents found in the top k; 0.0 when nothing is relevant.

    >>> recall_at_k(["a", "b", "c"], {"c": 1, "z": 1}, k=3)
    0.5
    """
    _check(ranking, k)
    relevant = sum(1 for g in relevance.values() if g > 0)
    if relevant == 0:
        return 0.0
    found = sum(1 for doc in ranking[:k] if relevance.get(doc, 0) > 0)
    return found / relevant


def mrr_at_k(ranking: Sequence[str], relevance: Relevance, k: int = MRR_K) -> float:
    """1 / rank of the first relevant document within the top k, else 0.0.

    >>> mrr_at_k(["a", "b", "c"], {"c": 1})
    0.3333333333333333
    """
    _check(ranking, k)
    for i, doc in enumerate(ranking[:k]):
        if relevance.get(doc, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


def judged_queries(qrels: Qrels) -> list[str]:
    """Query ids with at least one relevant document, in qrels order."""
    return [qid for qid, rel in qrels.items() if any(g > 0 for g in rel.values())]


@dataclass(frozen=True)
class RunMetrics:
    """Mean metrics over the judged queries, and the per-query values behind them."""

    queries: int
    ndcg: float
    recall: float
    mrr: float
    per_query: dict[str, dict[str, float]] = field(default_factory=dict, repr=False)


def evaluate_run(
    run: Mapping[str, Sequence[str]],
    qrels: Qrels,
    *,
    ndcg_k: int = NDCG_K,
    recall_k: int = RECALL_K,
    mrr_k: int = MRR_K,
) -> RunMetrics:
    """Score `run` (query id → ranking) against `qrels` (query id → doc id → grade).

    >>> m = evaluate_run({"q": ["a", "b"]}, {"q": {"b": 1}, "empty": {"x": 0}})
    >>> (m.queries, m.mrr)
    (1, 0.5)
    """
    per_query: dict[str, dict[str, float]] = {}
    for qid in judged_queries(qrels):
        ranking, relevance = run.get(qid, ()), qrels[qid]
        per_query[qid] = {
            "ndcg": ndcg_at_k(ranking, relevance, ndcg_k),
            "recall": recall_at_k(ranking, relevance, recall_k),
            "mrr": mrr_at_k(ranking, relevance, mrr_k),
        }
    n = len(per_query)

    def mean(name: str) -> float:
        return sum(v[name] for v in per_query.values()) / n if n else 0.0

    return RunMetrics(n, mean("ndcg"), mean("recall"), mean("mrr"), per_query)
