"""Weighted RRF and the adaptive fusion policy."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragspine.retrieval.fusion.rrf import Fusion, rrf_fuse, weighted_rrf

rankings = st.lists(st.lists(st.sampled_from("abcdefgh"), unique=True, max_size=8), max_size=4)


@given(rankings, st.integers(min_value=0, max_value=100))
def test_weight_one_is_plain_rrf(runs: list[list[str]], k: int) -> None:
    assert weighted_rrf([(r, 1.0) for r in runs], k=k) == pytest.approx(rrf_fuse(runs, k=k))


def test_weights_scale_each_ranking() -> None:
    fused = weighted_rrf([(["a", "b"], 2.0), (["b", "a"], 0.0)], k=0)
    assert fused == {"a": 2.0, "b": 1.0}
    with pytest.raises(ValueError, match="weights must be >= 0"):
        weighted_rrf([(["a"], -1.0)])


unit = st.floats(min_value=0.0, max_value=1.0)


@given(unit, unit, unit)
def test_adaptive_dense_weight_falls_as_lexical_evidence_rises(m1: float, m2: float, gap: float) -> None:
    fusion = Fusion()
    low, high = sorted((m1, m2))
    for (lex_a, dense_a), (lex_b, dense_b) in (
        (fusion.weights(low, gap), fusion.weights(high, gap)),
        (fusion.weights(high, min(m1, m2)), fusion.weights(high, max(m1, m2))),
    ):
        assert dense_b <= dense_a + 1e-12
        assert min(fusion.dense_low, fusion.dense_high) <= dense_b <= max(fusion.dense_mid, fusion.dense_high)
    assert fusion.weights(1.0, 1.0) == (fusion.lexical_weight, fusion.dense_low)


def test_methods_and_validation() -> None:
    assert Fusion(method="rrf").weights(0.9) == (1.0, 1.0)
    assert Fusion(method="weighted", lexical_weight=1.0, dense_weight=0.4).weights(0.0) == (1.0, 0.4)
    adaptive = Fusion(
        method="adaptive", dense_low=0.5, dense_mid=1.0, dense_high=2.0, match_low=0.2, match_high=0.6,
        gap_high=0.4, lexical_low=0.2,
    )  # fmt: skip
    assert adaptive.weights(0.0, gap=1.0) == pytest.approx((0.2, 2.0)), "BM25 matched nothing useful"
    assert adaptive.weights(1.0, gap=1.0) == (1.0, 0.5), "a clear BM25 winner: BM25 leads"
    assert adaptive.weights(1.0, gap=0.0) == (1.0, 1.0), "a BM25 tie: the vectors break it"
    assert adaptive.weights(1.0, gap=0.2) == pytest.approx((1.0, 0.75))
    assert adaptive.weights(0.4, gap=1.0) == pytest.approx((0.6, 1.25))
    with pytest.raises(ValueError, match="gap_high"):
        Fusion(gap_high=0.0)
    with pytest.raises(ValueError, match="unknown fusion method 'max'; valid: learned, adaptive, weighted, rrf"):
        Fusion(method="max")
    with pytest.raises(ValueError, match="match_low < match_high"):
        Fusion(match_low=0.7, match_high=0.3)
    with pytest.raises(ValueError, match=">= 0"):
        Fusion(dense_high=-1.0)
