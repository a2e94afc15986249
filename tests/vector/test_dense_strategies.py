"""The dense channel's two strategies (chosen once, from the store it is given) and "embed what has
no vector" (`dense.pending`), the one routine every embedding caller goes through."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ragspine.retrieval.chunking.chunking import Chunk
from ragspine.retrieval.lexical.index.segment import SegmentBuilder
from ragspine.retrieval.lexical.index.snapshot import IndexSnapshot
from ragspine.retrieval.pipeline.hybrid import ListChunks
from ragspine.retrieval.vector.dense.channel import DenseChannel, DenseView, StoreDenseView
from ragspine.retrieval.vector.dense.local import LocalVectors
from ragspine.retrieval.vector.dense.pending import embed_into, embed_missing, select_missing
from ragspine.retrieval.vector.dense.store_view import StoreVectors
from ragspine.retrieval.vector.embeddings.deterministic import DeterministicEmbeddingBackend
from ragspine.retrieval.vector.embeddings.support import EmbeddingBackendError
from ragspine.retrieval.vector.stores.inprocess import InProcessVectorStore
from ragspine.retrieval.vector.stores.sqlite import ChunkVectors


class Counting(DeterministicEmbeddingBackend):
    """The deterministic backend, remote or local, recording each call's texts."""

    def __init__(self, *, remote: bool = False) -> None:
        super().__init__(dim=16)
        self.is_remote = remote
        self.calls: list[list[str]] = []

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return super().embed_texts(texts)


CHUNKS = [
    Chunk("a:0", "a", 0, "cat food", "a#p1@0-8"),
    Chunk("b:0", "b", 0, "dog toys", "b#p1@0-8"),
    Chunk("c:0", "c", 0, "secret plan", "c#p1@0-11", sensitivity="RESTRICTED"),
    Chunk("d:0", "d", 0, "cat toys", "d#p1@0-8"),
]


def _snapshot() -> IndexSnapshot:
    builder = SegmentBuilder(first=0)
    builder.add([c.text.split() for c in CHUNKS], chunk_ids=[c.chunk_id for c in CHUNKS])
    return IndexSnapshot([builder.finish()])


@pytest.mark.parametrize(
    ("vectors", "strategy", "view"),
    [(None, LocalVectors, DenseView), ("memory-file", LocalVectors, DenseView), ("store", StoreVectors, StoreDenseView)],
)
def test_the_strategy_follows_the_store_and_both_rank_alike(vectors: Any, strategy: type, view: type) -> None:
    backend = Counting()
    store = {None: None, "memory-file": ChunkVectors(None, model_id=backend.model_id),
             "store": InProcessVectorStore(model_id=backend.model_id)}[vectors]  # fmt: skip
    channel = DenseChannel(backend, store)
    assert isinstance(channel._strategy, strategy)
    snapshot = _snapshot()
    ranking = channel.attach(snapshot, ListChunks(CHUNKS))
    assert isinstance(ranking, view)
    query = ranking.embed_queries(["cat toys"])[0]
    ranked, scores = ranking.rank(query, snapshot.active_positions(), 4)
    assert [snapshot.chunk_id(p) for p in ranked][0] == "d:0" and scores[ranked[0]] == pytest.approx(1.0)
    assert channel.coverage().with_vector == 4


def test_a_store_channel_keeps_the_settable_attributes() -> None:
    backend = Counting()
    channel = DenseChannel(backend, InProcessVectorStore(model_id=backend.model_id), cache_min_vectors=5)
    assert channel.cache_min_vectors == 5 and channel.cache_stats["matrix_loads"] == 0 and channel._ann is None
    channel.cache_min_vectors = None
    assert channel.cache_min_vectors is None


def test_select_missing_asks_the_store_and_keeps_restricted_from_a_remote_backend() -> None:
    backend = Counting(remote=True)
    store = InProcessVectorStore(model_id=backend.model_id)
    store.upsert(["a:0"], [[1.0] * 16])
    found = select_missing(store, backend, CHUNKS)
    assert [c.chunk_id for c in found.sendable] == ["b:0", "d:0"]
    assert [c.chunk_id for c in found.lexical_only] == ["c:0"] and found.present == 1
    placed = list(enumerate(CHUNKS))
    known = select_missing(store, backend, placed, chunk_of=lambda item: item[1], known_missing=True)
    assert [p for p, _ in known.sendable] == [0, 1, 3] and known.present == 0


def test_embed_into_batches_and_stores_with_metadata() -> None:
    backend = Counting()
    store = InProcessVectorStore(model_id=backend.model_id)
    batches = list(embed_into(store, backend, CHUNKS[:3], batch_size=2, index_text=lambda c: "ctx " + c.text))
    assert [len(b.chunks) for b in batches] == [2, 1] and backend.calls == [["ctx cat food", "ctx dog toys"], ["ctx secret plan"]]
    assert store.metadata("c:0")["sensitivity"] == "RESTRICTED" and store.count() == 3
    assert list(embed_into(store, backend, [])) == [] and len(backend.calls) == 2
    unit = next(embed_into(ChunkVectors(None, model_id=backend.model_id), backend, CHUNKS[:1], unit=True))
    assert unit.rows.dtype == np.float32 and np.linalg.norm(unit.rows[0]) == pytest.approx(1.0)


def test_embed_missing_embeds_once_and_a_short_answer_is_an_error() -> None:
    backend = Counting(remote=True)
    store = InProcessVectorStore(model_id=backend.model_id)
    assert embed_missing(store, backend, CHUNKS) == 3 and store.missing([c.chunk_id for c in CHUNKS]) == ["c:0"]
    assert embed_missing(store, backend, CHUNKS) == 0 and len(backend.calls) == 1

    class Short(Counting):
        def embed_texts(self, texts: list[str]) -> list[list[float]]:
            return super().embed_texts(texts)[:-1]

    with pytest.raises(EmbeddingBackendError, match="returned 1 vectors for 2 texts"):
        embed_missing(InProcessVectorStore(), Short(), CHUNKS[:2])


def test_the_centring_seam_is_what_a_local_channel_computes(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def centring(matrix: np.ndarray, *args: np.ndarray) -> tuple[None, None]:
        calls.append(len(matrix))
        return None, None

    monkeypatch.setattr(DenseChannel, "_centring", staticmethod(centring))
    DenseChannel(Counting()).attach(_snapshot(), ListChunks(CHUNKS))
    assert calls, "the channel's centring is the one its local strategy runs"
