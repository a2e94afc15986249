"""The learned fusion: the shipped model, the signals it reads, its extremes, RESTRICTED masking."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ragspine.retrieval.chunking.chunking import Chunk
from ragspine.retrieval.fusion.learned import LearnedFusion, load_model, model_from_json
from ragspine.retrieval.fusion.rrf import Fusion
from ragspine.retrieval.fusion.signals import (
    CROSS_DEPTH,
    FEATURE_NAMES,
    QuerySignals,
    query_features,
    top_overlap,
)
from ragspine.retrieval.language import detect_language
from ragspine.retrieval.link.narrative_link import build_narrative_retriever
from ragspine.retrieval.model import DocumentMeta
from ragspine.retrieval.pipeline.hybrid import HybridRetriever
from ragspine.retrieval.vector.embeddings.deterministic import (
    DeterministicEmbeddingBackend,
)

TEXTS = [
    "revenue fell on weak export orders",
    "export orders rose and revenue grew",
    "salary cuts and layoffs at the plant",
    "dividend plan approved by the board",
    "营收下滑 出口订单减少",
    "薪酬 裁员 计划",
    "利润增长 出口 营收",
    "the board discussed the revenue plan",
]
QUERIES = ["revenue export", "营收 出口", "layoffs salary plan", "board dividend", "利润"]


def chunks(texts: list[str] = TEXTS) -> list[Chunk]:
    return [Chunk(f"d{i}:0", f"d{i}", 0, t, f"d{i}#p1@0-{len(t)}") for i, t in enumerate(texts)]


def constant(share_logit: float) -> LearnedFusion:
    """A model whose dense share is sigmoid(share_logit) for every query."""
    n = len(FEATURE_NAMES)
    return LearnedFusion(coef=(0.0,) * n, intercept=share_logit, mean=(0.0,) * n, scale=(1.0,) * n,
                         dense_alone_across_languages=False)  # fmt: skip


def test_the_shipped_model_loads_and_answers_the_same_every_time() -> None:
    model = load_model()
    assert load_model() is model  # read once per process
    from importlib import resources

    raw = json.loads(resources.files("ragspine.data").joinpath("fusion-model-v1.json").read_text("utf-8"))
    assert raw["features"] == list(FEATURE_NAMES) and raw["version"] == 1
    again = model_from_json(raw)
    assert again == model
    signals = QuerySignals("revenue export", 2, 1.0, 0.6, (5.0, 3.0), (0.82, 0.80), 0.4, False)
    lexical, dense = model.weights(signals)
    assert (lexical, dense) == again.weights(signals)
    assert lexical >= 0 and dense >= 0 and lexical + dense == pytest.approx(2.0)
    # the shipped model trusts the vectors alone when their best answer is in another language
    assert model.weights(replace(signals, crosses=True)) == (0.0, 2.0)


def test_a_bad_model_file_is_refused_with_what_is_wrong() -> None:
    good = constant(0.0).to_json()
    with pytest.raises(ValueError, match="version"):
        model_from_json({**good, "version": 99})
    with pytest.raises(ValueError, match="retrain"):
        model_from_json({**good, "features": ["match", "gap"]})
    with pytest.raises(ValueError, match="scales must be > 0"):
        model_from_json({**good, "scale": [0.0] * len(FEATURE_NAMES)})
    with pytest.raises(ValueError, match="lacks or mistypes"):
        model_from_json({k: v for k, v in good.items() if k != "coef"})
    with pytest.raises(ValueError, match="weights_for"):
        Fusion(method="learned").weights(0.5)


def test_shares_map_to_weights_with_rrf_in_the_middle() -> None:
    signals = QuerySignals("q", 1, 1.0, 0.5, (1.0,), (0.5,), 0.0, False)
    assert constant(0.0).weights(signals) == (1.0, 1.0)  # plain RRF
    lexical, dense = constant(40.0).weights(signals)
    assert lexical < 1e-12 and dense == pytest.approx(2.0)
    assert Fusion(method="learned", model=constant(0.0)).weights_for(signals) == (1.0, 1.0)
    assert Fusion(method="adaptive").weights_for(replace(signals, crosses=True)) == Fusion(method="adaptive").weights(0.0, 1.0)
    # a translation at rank 2 or 3 of the dense channel: BM25 cannot see it either
    assert Fusion(method="adaptive").weights_for(replace(signals, cross_share=1 / 3)) == Fusion(method="adaptive").weights(0.0, 1.0)
    assert Fusion(method="adaptive").weights_for(signals) == Fusion(method="adaptive").weights(0.5, 1.0)
    assert load_model().weights(replace(signals, cross_share=1 / 3)) == (0.0, 2.0)


class Spy(LearnedFusion):
    """Records what the retriever handed the model (the same signals a recording would keep)."""

    seen: list[tuple[QuerySignals, tuple[float, ...]]]

    def dense_share(self, signals: QuerySignals) -> float:
        self.seen.append((signals, query_features(signals)))
        return super().dense_share(signals)


def spy_of(model: LearnedFusion) -> Spy:
    """A spy with `model`'s parameters and nothing seen yet."""
    spy = Spy(**{k: v for k, v in model.__dict__.items()})
    object.__setattr__(spy, "seen", [])
    return spy


def test_the_signals_are_what_the_channels_returned() -> None:
    backend = DeterministicEmbeddingBackend()
    spy = spy_of(constant(0.0))
    hybrid = HybridRetriever(chunks(), embedding_backend=backend, fusion=Fusion(method="learned", model=spy))
    bm25 = HybridRetriever(chunks())
    vector = HybridRetriever(chunks(), embedding_backend=backend, channels="vector")
    for query in QUERIES:
        hybrid.search(query, top_k=10)
        signals, features = spy.seen[-1]
        lexical = bm25.search(query, top_k=10)
        dense = vector.search(query, top_k=10)
        tokens = hybrid.analyzer(query)
        assert signals.tokens == len(tokens)
        assert signals.lexical_top == pytest.approx(tuple(r.bm25_score for r in lexical[:2]))
        assert signals.match == pytest.approx(hybrid.lexical_match(tokens, lexical[0].bm25_score))
        assert signals.dense_top == pytest.approx(tuple(r.vector_score for r in dense[:2]))
        assert signals.overlap == top_overlap([r.chunk.chunk_id for r in lexical], [r.chunk.chunk_id for r in dense])
        head = [detect_language(r.chunk.text) for r in dense[:CROSS_DEPTH]]
        asked = detect_language(query)
        assert signals.cross_share == pytest.approx(sum(lang != asked for lang in head) / len(head))
        assert signals.crosses == (head[0] != asked)
        assert features == query_features(signals)
        assert dict(zip(FEATURE_NAMES, features, strict=True))["zh"] == (1.0 if "营" in query or "利" in query else 0.0)


def ids(results: list[Any]) -> list[str]:
    return [r.chunk.chunk_id for r in results]


@pytest.mark.parametrize("query", QUERIES)
def test_weight_extremes_are_the_single_channel_orders(query: str) -> None:
    backend = DeterministicEmbeddingBackend()
    bm25_only = ids(HybridRetriever(chunks()).search(query, top_k=8))
    dense_only = ids(HybridRetriever(chunks(), embedding_backend=backend, channels="vector").search(query, top_k=8))
    lexical_side = HybridRetriever(chunks(), embedding_backend=backend, fusion=Fusion(method="learned", model=constant(-40.0)))
    dense_side = HybridRetriever(chunks(), embedding_backend=backend, fusion=Fusion(method="learned", model=constant(40.0)))
    assert ids(lexical_side.search(query, top_k=8))[: len(bm25_only)] == bm25_only
    assert ids(dense_side.search(query, top_k=8)) == dense_only


def test_restricted_chunks_stay_masked_under_the_learned_fusion() -> None:
    backend = DeterministicEmbeddingBackend()
    hidden = Chunk("s:0", "s", 0, "revenue export 营收 出口 secret", "s#p1@0-24", sensitivity="RESTRICTED")
    spies = (spy_of(load_model()), spy_of(load_model()))
    with_hidden = HybridRetriever([*chunks(), hidden], embedding_backend=backend, fusion=Fusion(method="learned", model=spies[0]))
    without = HybridRetriever(chunks(), embedding_backend=backend, fusion=Fusion(method="learned", model=spies[1]))
    for query in [*QUERIES, "secret"]:
        got = with_hidden.search(query, top_k=10)
        assert "s:0" not in ids(got)
        expected = without.search(query, top_k=10)
        assert [(r.chunk.chunk_id, r.bm25_score, r.vector_score, r.fused_score) for r in got] == [
            (r.chunk.chunk_id, r.bm25_score, r.vector_score, r.fused_score) for r in expected
        ]
    # the fusion read the same signals (hence features, weights, order) with or without it
    assert spies[0].seen == spies[1].seen and len(spies[0].seen) == len(QUERIES) + 1


def test_restricted_chunks_change_no_signal_on_the_store_path(tmp_path: Path) -> None:
    """`ragspine search`'s path: a SQLite store whose dense channel is attached to every chunk
    (RESTRICTED ones included) and masks them per query."""
    seen: list[list[QuerySignals]] = []
    public = [(f"d{i}", text) for i, text in enumerate(TEXTS)]
    for name, docs in (("without", public), ("with", [*public[:4], ("s", "revenue export 营收 出口 secret orders"), *public[4:]])):
        spy = spy_of(load_model())
        retriever, store = build_narrative_retriever(
            tmp_path / f"{name}.db", embedding_backend=DeterministicEmbeddingBackend(),
            fusion=Fusion(method="learned", model=spy), query_rewriter=None,
        )  # fmt: skip
        try:
            for doc_id, text in docs:
                retriever.index.ingest(text, DocumentMeta(doc_id=doc_id, sensitivity="RESTRICTED" if doc_id == "s" else "PUBLIC"))
            for query in [*QUERIES, "secret orders"]:
                assert all(r.chunk.doc_id != "s" for r in retriever.index.retrieve(query, top_k=10, rerank=False))
        finally:
            if retriever.index.dense is not None:
                retriever.index.dense.vectors.close()
            store.close()
        seen.append([signals for signals, _ in spy.seen])
    assert seen[0] == seen[1] and len(seen[0]) == len(QUERIES) + 1


@pytest.mark.parametrize("method", ["rrf", "weighted"])
def test_fixed_weight_fusions_compute_no_signals(method: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """rrf and weighted read no query signal, so the retriever computes none (a coverage pass,
    a language check and, over a vector store, a chunk read per query); the fused order is the
    one their fixed weights give."""
    backend = DeterministicEmbeddingBackend()
    fusion = Fusion(method=method)
    expected = {q: ids(HybridRetriever(chunks(), embedding_backend=backend, fusion=fusion).search(q, top_k=8)) for q in QUERIES}

    def unwanted(*args: object, **kwargs: object) -> None:
        raise AssertionError("signals computed for a fixed-weight fusion")

    monkeypatch.setattr(HybridRetriever, "_signals", unwanted)
    retriever = HybridRetriever(chunks(), embedding_backend=backend, fusion=fusion)
    assert {q: ids(retriever.search(q, top_k=8)) for q in QUERIES} == expected
    adaptive = HybridRetriever(chunks(), embedding_backend=backend, fusion=Fusion(method="adaptive"))
    with pytest.raises(AssertionError, match="signals computed"):
        adaptive.search(QUERIES[0], top_k=8)  # the adaptive fusion does read them
