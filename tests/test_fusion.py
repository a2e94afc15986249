"""Weighted RRF and the adaptive fusion policy."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragspine.retrieval.lexical.fusion import Fusion, rrf_fuse, weighted_rrf

rankings = st.lists(st.lists(st.sampled_from("abcdefgh"), unique=True, max_size=8), max_size=4)


@given(rankings, st.integers(min_value=0, max_value=100))
def test_weight_one_is_plain_rrf(runs: list[list[str]], k: int) -> None:
    assert weighted_rrf([(r, 1.0) for r in runs], k=k) == pytest.approx(rrf_fuse(runs, k=k))


def test_weights_scale_each_ranking() -> None:
    fused = weighted_rrf([(["a", "b"], 2.0), (["b", "a"], 0.0)], k=0)
    assert fused == {"a": 2.0, "b": 1.0}
    with pytest.raises(ValueError, match="weights must be >= 0"):
        weighted_rrf([(["a"], -1.0)])


@given(st.floats(min_value=0.0, max_value=1.0), st.floats(min_value=0.0, max_value=1.0))
def test_adaptive_dense_weight_falls_as_the_lexical_match_rises(m1: float, m2: float) -> None:
    fusion = Fusion()
    low, high = sorted((m1, m2))
    lex_low, dense_low_match = fusion.weights(low)
    lex_high, dense_high_match = fusion.weights(high)
    assert lex_low == lex_high == fusion.lexical_weight
    assert dense_high_match <= dense_low_match
    assert fusion.dense_low <= dense_high_match <= fusion.dense_high


def test_methods_and_validation() -> None:
    assert Fusion(method="rrf").weights(0.9) == (1.0, 1.0)
    assert Fusion(method="weighted", lexical_weight=1.0, dense_weight=0.4).weights(0.0) == (1.0, 0.4)
    adaptive = Fusion(method="adaptive", dense_low=0.5, dense_high=2.0, match_low=0.2, match_high=0.6)
    assert adaptive.weights(0.0) == (1.0, 2.0) and adaptive.weights(1.0) == (1.0, 0.5)
    assert adaptive.weights(0.4) == pytest.approx((1.0, 1.25))
    with pytest.raises(ValueError, match="unknown fusion method 'max'; valid: adaptive, weighted, rrf"):
        Fusion(method="max")
    with pytest.raises(ValueError, match="match_low < match_high"):
        Fusion(match_low=0.7, match_high=0.3)
    with pytest.raises(ValueError, match=">= 0"):
        Fusion(dense_high=-1.0)
