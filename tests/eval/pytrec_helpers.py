"""Reference scores from pytrec_eval (trec_eval's C code) for the metric agreement tests."""

from __future__ import annotations

import pytest
import pytrec_eval

from ragspine.eval.metrics import evaluate_run


def pytrec_per_query(
    run: dict[str, list[str]], qrels: dict[str, dict[str, int]]
) -> dict[str, dict[str, float]]:
    """pytrec_eval's nDCG@10, Recall@100 and MRR@10 per query (distinct scores: no tie order)."""
    scored = {q: {d: float(len(r) - i) for i, d in enumerate(r)} for q, r in run.items() if r}
    top10 = {q: {d: s for d, s in docs.items() if s > len(run[q]) - 10} for q, docs in scored.items()}
    full = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100"}).evaluate(scored)
    mrr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(top10)
    return {
        q: {"ndcg": full[q]["ndcg_cut_10"], "recall": full[q]["recall_100"], "mrr": mrr[q]["recip_rank"]}
        for q in full
    }


def assert_agrees_with_pytrec_eval(run: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> None:
    ours = evaluate_run(run, qrels)
    theirs = pytrec_per_query(run, qrels)
    for qid, values in ours.per_query.items():
        if qid not in theirs:  # trec_eval skips a query with no ranking; ours scores it 0
            assert not run.get(qid) and values == {"ndcg": 0.0, "recall": 0.0, "mrr": 0.0}
            continue
        for name in ("ndcg", "recall", "mrr"):
            assert values[name] == pytest.approx(theirs[qid][name], abs=1e-6), (qid, name)
    if ours.queries:  # the means: trec_eval's per-query values, 0 for a query it skipped
        for name in ("ndcg", "recall", "mrr"):
            mean = sum(theirs[q][name] if q in theirs else 0.0 for q in ours.per_query) / ours.queries
            assert getattr(ours, name) == pytest.approx(mean, abs=1e-6), name
