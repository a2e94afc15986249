"""Metrics: hand-checked values, edge cases, and agreement with pytrec_eval (trec_eval)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("pytrec_eval")
from pytrec_helpers import assert_agrees_with_pytrec_eval  # noqa: E402

from ragspine.eval.metrics import (
    evaluate_run,
    judged_queries,
    mrr_at_k,
    ndcg_at_k,
    recall_at_k,
)


def test_ndcg_uses_grades_as_gain_and_the_ideal_from_qrels() -> None:
    relevance = {"a": 2, "b": 1, "c": 0, "z": 1}  # z is judged but never retrieved
    dcg = 1 / math.log2(2) + 2 / math.log2(4)  # b at rank 1, a at rank 3
    ideal = 2 / math.log2(2) + 1 / math.log2(3) + 1 / math.log2(4)
    assert ndcg_at_k(["b", "c", "a"], relevance, 10) == pytest.approx(dcg / ideal)
    assert ndcg_at_k(["b", "c", "a"], relevance, 2) == pytest.approx(1 / (2 + 1 / math.log2(3)))


def test_recall_and_mrr_respect_the_cutoff() -> None:
    relevance = {"a": 1, "b": 1}
    assert recall_at_k(["x", "a", "b"], relevance, 2) == 0.5
    assert recall_at_k(["x", "a", "b"], relevance, 3) == 1.0
    assert mrr_at_k(["x", "y", "a"], relevance, 2) == 0.0
    assert mrr_at_k(["x", "y", "a"], relevance, 3) == pytest.approx(1 / 3)


def test_nothing_relevant_scores_zero_and_is_left_out_of_the_means() -> None:
    assert ndcg_at_k(["a"], {"a": 0}) == 0.0
    assert recall_at_k(["a"], {}) == 0.0
    qrels = {"q1": {"a": 1}, "q2": {"b": 0}, "q3": {"c": 1}}
    assert judged_queries(qrels) == ["q1", "q3"]
    metrics = evaluate_run({"q1": ["a"], "q2": ["b"]}, qrels)  # q3 has no ranking: scores 0
    assert metrics.queries == 2
    assert metrics.ndcg == pytest.approx(0.5)
    assert metrics.per_query["q3"] == {"ndcg": 0.0, "recall": 0.0, "mrr": 0.0}


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="each document once"):
        ndcg_at_k(["a", "a"], {"a": 1})
    with pytest.raises(ValueError, match="positive"):
        recall_at_k(["a"], {"a": 1}, 0)


docs = st.sampled_from([f"d{i}" for i in range(40)])


@settings(max_examples=60, deadline=None)
@given(
    qrels=st.dictionaries(
        st.sampled_from([f"q{i}" for i in range(6)]),
        st.dictionaries(docs, st.integers(min_value=0, max_value=3), min_size=1, max_size=12),
        min_size=1,
    ),
    rankings=st.dictionaries(
        st.sampled_from([f"q{i}" for i in range(6)]), st.lists(docs, unique=True, max_size=40)
    ),
)
def test_random_graded_runs_agree_with_pytrec_eval(
    qrels: dict[str, dict[str, int]], rankings: dict[str, list[str]]
) -> None:
    assert_agrees_with_pytrec_eval(rankings, qrels)
