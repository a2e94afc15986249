"""Weighted RRF and the adaptive fusion policy."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragspine.retrieval.chunking.chunking import Chunk
from ragspine.retrieval.fusion.rrf import DEFAULT_DENSE_SHARE, Fusion, rrf_fuse, weighted_rrf
from ragspine.retrieval.lexical.bm25 import bm25_scores
from ragspine.retrieval.lexical.tokenize import tokenize
from ragspine.retrieval.fusion.signals import QuerySignals
from ragspine.retrieval.fusion.zscore import standardised, zscore_fuse
from ragspine.retrieval.pipeline import hybrid
from ragspine.retrieval.pipeline.hybrid import HybridRetriever
from ragspine.retrieval.vector.embeddings.deterministic import DeterministicEmbeddingBackend

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
    fusion = Fusion(method="adaptive")
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
    with pytest.raises(ValueError, match="unknown fusion method 'max'; valid: zscore, learned, adaptive, weighted, rrf"):
        Fusion(method="max")
    with pytest.raises(ValueError, match="match_low < match_high"):
        Fusion(match_low=0.7, match_high=0.3)
    with pytest.raises(ValueError, match=">= 0"):
        Fusion(dense_high=-1.0)


# -- zscore: score fusion --------------------------------------------------------------------------
score = st.integers(-500, 500).map(lambda i: i / 10)  # no near-ties: a z-score is defined to 1e-12
ranking = st.dictionaries(st.sampled_from("abcdefgh"), score, max_size=8)


@given(ranking, ranking, st.floats(0.0, 3.0), st.floats(0.0, 3.0), st.floats(0.01, 100.0), score)
def test_zscore_fusion_does_not_see_a_ranking_s_scale_or_offset(
    bm25: dict[str, float], cosine: dict[str, float], w1: float, w2: float, scale: float, offset: float
) -> None:
    """BM25 and cosines need no constant to meet: a ranking rescaled and shifted fuses the same."""
    fused = zscore_fuse([(bm25, w1, 3), (cosine, w2, None)])
    moved = zscore_fuse([({k: v * scale + offset for k, v in bm25.items()}, w1, 3), (cosine, w2, None)])
    assert fused.keys() == moved.keys() == bm25.keys() | cosine.keys()
    for item in fused:
        assert moved[item] == pytest.approx(fused[item], abs=1e-6 * (1 + abs(fused[item])))


@given(ranking, ranking)
def test_zscore_fusion_ignores_the_order_items_come_in(bm25: dict[str, float], cosine: dict[str, float]) -> None:
    forward = zscore_fuse([(bm25, 1.1, 4), (cosine, 0.9, None)])
    backward = zscore_fuse([(dict(reversed(list(bm25.items()))), 1.1, 4), (dict(reversed(list(cosine.items()))), 0.9, None)])
    assert forward == pytest.approx(backward)


def test_zscore_an_absent_item_counts_as_the_ranking_s_lowest() -> None:
    z, absent = standardised({"a": 4.0, "b": 2.0, "c": 0.0})
    assert absent == z["c"] == pytest.approx(-1.224744871)
    fused = zscore_fuse([({"a": 4.0, "b": 2.0, "c": 0.0}, 1.0, None), ({"d": 0.9, "a": 0.1}, 1.0, None)])
    assert fused["c"] == pytest.approx(z["c"] + -1.0)  # c: BM25's last, and below the dense ranking
    assert fused["d"] == pytest.approx(absent + 1.0)
    single = zscore_fuse([({"a": 2.0}, 1.0, None), ({"a": 0.5, "b": 0.1}, 1.0, None)])
    assert single == pytest.approx({"a": 2.0, "b": -1.0}), "one BM25 hit: 1.0 for it, 0.0 for the rest"
    empty = zscore_fuse([({}, 1.0, None), ({"x": 0.3, "y": 0.1}, 1.0, None)])
    assert empty == pytest.approx({"x": 1.0, "y": -1.0}), "an empty ranking adds nothing"
    with pytest.raises(ValueError, match="finite and >= 0"):
        zscore_fuse([({"a": 1.0}, -1.0, None)])
    with pytest.raises(ValueError, match="window must be >= 1"):
        standardised({"a": 1.0}, 0)


def test_zscore_a_clear_bm25_winner_keeps_its_place_and_a_bm25_tie_goes_to_the_vectors() -> None:
    fusion = Fusion(method="zscore")
    w_lexical, w_dense = fusion.weights(1.0)
    cosines = {"winner": 0.80, "other": 0.86, "x": 0.79, "y": 0.78, "z": 0.77}
    clear = {"winner": 30.0, "other": 9.0, "x": 8.5, "y": 8.0, "z": 7.5}
    fused = zscore_fuse([(clear, w_lexical, None), (cosines, w_dense, None)])
    assert max(fused, key=fused.__getitem__) == "winner"
    tie = {"winner": 10.0, "other": 9.9, "x": 3.0, "y": 2.5, "z": 2.0}
    fused = zscore_fuse([(tie, w_lexical, None), (cosines, w_dense, None)])
    assert max(fused, key=fused.__getitem__) == "other"


def test_zscore_weights_and_the_cross_language_rule() -> None:
    assert Fusion().method == "zscore" and Fusion().dense_share == DEFAULT_DENSE_SHARE
    assert Fusion(method="zscore", dense_share=0.25).weights(0.9) == (1.5, 0.5)
    signals = QuerySignals("营收下滑", 7, 1.0, 0.9, (4.0, 3.0), (0.9, 0.8), 0.5, False)
    assert Fusion(dense_share=0.25).weights_for(signals) == (1.5, 0.5), "BM25's match does not move zscore"
    crossing = QuerySignals("营收下滑", 7, 1.0, 0.9, (4.0, 3.0), (0.9, 0.8), 0.5, False, cross_share=1 / 3)
    assert Fusion(dense_share=0.25).weights_for(crossing) == (0.0, 2.0), "a translation: the vectors decide"
    assert Fusion().reads_signals and Fusion().fuses_scores and not Fusion(method="rrf").fuses_scores
    with pytest.raises(ValueError, match="dense_share"):
        Fusion(dense_share=1.5)


@given(st.lists(score, min_size=1, max_size=60, unique=True), st.integers(1, 20), st.integers(0, 40))
def test_zscore_a_deeper_ranking_fuses_the_same_inside_the_window(values: list[float], window: int, extra: int) -> None:
    """What a search that asks for more results adds below the window changes no fused score
    (distinct scores: a window whose scores are all equal cannot tell a tie below it apart)."""
    scores = dict(enumerate(values))
    ranked = sorted(scores, key=lambda i: (-scores[i], i))
    shallow = {i: scores[i] for i in ranked[:window]}
    deep = {i: scores[i] for i in ranked[: window + extra]}
    other = {i: float(i % 7) for i in range(0, 80, 3)}
    fused_shallow = zscore_fuse([(shallow, 1.1, window), (other, 0.9, None)])
    fused_deep = zscore_fuse([(deep, 1.1, window), (other, 0.9, None)])
    for item, value in fused_shallow.items():
        assert fused_deep[item] == pytest.approx(value)
    _, absent = standardised(shallow, window)
    z_other, absent_other = standardised(other)
    for item in fused_deep.keys() - fused_shallow.keys():  # below the window: as if not returned
        assert fused_deep[item] == pytest.approx(1.1 * absent + 0.9 * z_other.get(item, absent_other))


def _corpus() -> list[Chunk]:
    words = ["revenue", "export", "margin", "demand", "europe", "orders", "cost", "steel", "营收", "出口", "需求", "利润"]
    texts = [" ".join(words[(i * 7 + j * 3) % len(words)] for j in range(2 + i % 5)) for i in range(40)]
    chunks = [Chunk(f"d{i}:0", f"d{i}", 0, text, f"d{i}#p1@0-{len(text)}") for i, text in enumerate(texts)]
    hidden = "revenue export margin demand board only"
    return [*chunks, Chunk("memo:0", "memo", 0, hidden, f"memo#p1@0-{len(hidden)}", sensitivity="RESTRICTED")]


def test_the_retriever_s_score_fusion_gives_one_head_whatever_top_k_asks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default retriever fuses scores over a fixed window: asking for 3 results or 30 gives the
    same first 3 with the same fused scores (what `ragspine eval`, which asks for more, relies on)."""
    monkeypatch.setattr(hybrid, "WINDOW", 6)  # a window smaller than the lists this corpus gives
    retriever = HybridRetriever(_corpus(), embedding_backend=DeterministicEmbeddingBackend(dim=64), rank_depth=3)
    assert retriever.fusion.method == "zscore"
    for query in ("revenue export", "margin demand europe", "出口 需求", "steel cost orders"):
        head = retriever.search(query, top_k=3)
        deep = retriever.search(query, top_k=30)
        assert [r.chunk.chunk_id for r in head] == [r.chunk.chunk_id for r in deep[:3]]
        assert [r.fused_score for r in head] == pytest.approx([r.fused_score for r in deep[:3]], abs=1e-4)  # float32 cosines
        assert all(r.chunk.doc_id != "memo" for r in deep), "RESTRICTED never ranks"
    rrf = HybridRetriever(_corpus(), embedding_backend=DeterministicEmbeddingBackend(dim=64), fusion=Fusion(method="rrf"))
    differs = [q for q in ("revenue export", "margin demand europe", "出口 需求", "steel cost orders")
               if [r.chunk.chunk_id for r in rrf.search(q, top_k=5)] != [r.chunk.chunk_id for r in retriever.search(q, top_k=5)]]  # fmt: skip
    assert differs, "score fusion and RRF order this corpus differently somewhere"


@pytest.mark.parametrize(("fusion", "k1"), [(Fusion(), Fusion().lexical_k1), (Fusion(lexical_k1=2.0), 2.0), (Fusion(method="rrf"), 1.5)])
def test_every_bm25_score_of_a_query_uses_the_fusion_s_k1(
    fusion: Fusion, k1: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """zscore ranks, fuses and reports BM25 at its own k1 (`lexical_k1`); the RRF fusions keep the
    retriever's (the specification's 1.5). A result the vectors brought from below BM25's top k
    gets its BM25 score at that same k1."""
    monkeypatch.setattr(hybrid, "WINDOW", 5)  # zscore ranks 5 deep too: the vectors bring the rest
    corpus = _corpus()
    visible = [c for c in corpus if c.sensitivity != "RESTRICTED"]  # RESTRICTED chunks are not counted
    retriever = HybridRetriever(
        corpus, embedding_backend=DeterministicEmbeddingBackend(dim=64), fusion=fusion, rank_depth=5
    )
    below = 0
    for query in ("revenue export", "margin demand europe", "出口 需求", "steel cost orders"):
        expected = bm25_scores(tokenize(query), [tokenize(c.text) for c in visible], k1=k1)
        by_id = dict(zip((c.chunk_id for c in visible), expected, strict=True))
        results = retriever.search(query, top_k=5)
        assert [r.bm25_score for r in results] == pytest.approx([by_id[r.chunk.chunk_id] for r in results])
        fifth = sorted(expected, reverse=True)[4]
        below += sum(r.bm25_score < fifth for r in results)
    assert below, "some result came from below BM25's top 5 (its score computed apart)"
    assert Fusion().lexical_k1 < 1.5
    with pytest.raises(ValueError, match="lexical_k1"):
        Fusion(lexical_k1=0.0)
    with pytest.raises(ValueError, match="lexical_k1"):
        Fusion(lexical_k1=float("nan"))


def test_the_k1_bench_picks_the_best_mean_that_leaves_no_set_below_k1_1_5() -> None:
    """`bench.fusion_k1`'s rule, the one DEFAULT_LEXICAL_K1 was chosen by."""
    path = Path(__file__).resolve().parents[1] / "bench" / "fusion_k1.py"
    spec = importlib.util.spec_from_file_location("fusion_k1_bench", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    figures = {
        "a/dev": {0.2: 0.99, 0.4: 0.80, 0.9: 0.70, 1.5: 0.70},
        "b/dev": {0.2: 0.40, 0.4: 0.52, 0.9: 0.60, 1.5: 0.50},
    }
    assert bench.choose(figures) == 0.4, "0.2 has the best mean but puts b below its k1-1.5 figure"
    figures["a/dev"][0.4] = 0.69
    assert bench.choose(figures) == 0.9
    assert bench.choose({"a/dev": {0.4: 0.8}}) is None, "no baseline, no choice"
