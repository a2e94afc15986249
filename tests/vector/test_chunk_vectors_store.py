"""ChunkVectors as the dense channel's persisted VectorStore: the conformance suite, per-record
checksums (damaged records skipped, repaired and re-embedded), a damaged file (BM25 only, never
an error; `ragspine embed` moves it aside), the v1 → v2 upgrade, and the dense channel ranking
through a store that ranks for it (InProcessVectorStore, Qdrant local mode) exactly as it ranks
from ChunkVectors."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from ragspine.retrieval.chunking.chunking import chunk_document
from ragspine.retrieval.model import DocumentMeta
from ragspine.retrieval.pipeline.narrative_index import NarrativeIndex
from ragspine.retrieval.store.sqlite import ChunkStore
from ragspine.retrieval.vector.dense.chunk_vectors import (
    VECTORS_SUFFIX,
    ChunkVectors,
    embed_chunks,
    quarantine_if_damaged,
    record_checksums,
)
from ragspine.retrieval.vector.embeddings.deterministic import DeterministicEmbeddingBackend
from ragspine.retrieval.vector.errors import VectorFilesDamaged
from ragspine.retrieval.vector.stores.inprocess import InProcessVectorStore, VectorStore
from ragspine.testing.vector_store import NewStore, Reopen, VectorStoreSuite

BACKEND = DeterministicEmbeddingBackend(dim=8)


class TestChunkVectorsConformance(VectorStoreSuite):
    @pytest.fixture
    def new_store(self, tmp_path: Path) -> Iterator[NewStore]:
        opened: list[ChunkVectors] = []

        def new_store(dim: int) -> VectorStore:
            opened.append(ChunkVectors(tmp_path / f"v{len(opened)}.sqlite", model_id="test-model", dim=dim))
            return opened[-1]

        yield new_store
        for store in opened:
            store.close()

    @pytest.fixture
    def reopen(self, tmp_path: Path) -> Iterator[Reopen]:
        opened: list[ChunkVectors] = []

        def reopen(store: VectorStore) -> VectorStore:
            assert isinstance(store, ChunkVectors)
            opened.append(ChunkVectors(store.path, model_id="test-model", dim=store.dim))
            return opened[-1]

        yield reopen
        for store in opened:
            store.close()


def _corpus(n: int = 12) -> list[tuple[str, str]]:
    topics = ["revenue fell", "exports rose", "margin grew", "costs cut", "debt repaid", "cash flow"]
    return [(f"d{i}", f"Report {i}: {topics[i % len(topics)]} in region {i % 4}.") for i in range(n)]


@pytest.fixture
def store_path(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "chunks.db"
    with ChunkStore(path) as store:
        store.init_schema()
        index = NarrativeIndex(store, embedding_backend=BACKEND)
        for doc_id, text in _corpus():
            index.ingest(text, DocumentMeta(doc_id, title=doc_id))
        index.close()
    yield path


def _search(path: Path, query: str = "revenue fell region") -> list[tuple[str, float | None]]:
    with ChunkStore(path) as store:
        index = NarrativeIndex(store, embedding_backend=BACKEND)
        try:
            return [(r.chunk.chunk_id, r.vector_score) for r in index.retrieve(query, top_k=5)]
        finally:
            index.close()


def _flip(path: Path, chunk_id: str, how: str) -> None:
    with sqlite3.connect(path) as conn:
        (blob,) = conn.execute("SELECT vec FROM chunk_vector WHERE chunk_id = ?", (chunk_id,)).fetchone()
        if how == "flip":
            damaged = bytes([blob[0] ^ 0xFF]) + blob[1:]
        elif how == "zero":
            damaged = bytes(len(blob))
        else:  # truncate
            damaged = blob[:-4]
        conn.execute("UPDATE chunk_vector SET vec = ? WHERE chunk_id = ?", (damaged, chunk_id))


def test_checksum_sees_any_flipped_bit_zeroing_and_swapped_words() -> None:
    rng = np.random.default_rng(3)
    row = rng.normal(size=(1, 16)).astype(np.float32)
    (base,) = record_checksums(row).tolist()
    words = row.view("<u4")
    for word in range(16):
        for bit in range(32):
            flipped = words.copy()
            flipped[0, word] ^= np.uint32(1 << bit)
            assert record_checksums(flipped.view("<f4"))[0] != base
    assert record_checksums(np.zeros_like(row))[0] != base
    assert record_checksums(row[:, ::-1].copy())[0] != base
    many = rng.normal(size=(20_000, 16)).astype(np.float32)  # rows checked in slices: same answer
    np.testing.assert_array_equal(record_checksums(many)[-3:], [record_checksums(many[i:i + 1])[0] for i in (19_997, 19_998, 19_999)])


@pytest.mark.parametrize("how", ["flip", "zero", "truncate"])
def test_damaged_record_is_skipped_reported_and_re_embedded(
    store_path: Path, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    vectors_path = Path(str(store_path) + VECTORS_SUFFIX)
    with ChunkVectors(vectors_path, model_id=BACKEND.model_id) as vectors:
        victim = vectors.ids()[3]
        good_rows, _ = vectors.get([victim])
    _flip(vectors_path, victim, how)
    with ChunkVectors(vectors_path, model_id=BACKEND.model_id) as vectors, caplog.at_level(logging.WARNING):
        ids, matrix = vectors.load_all()
        assert victim not in ids and len(ids) == 11  # never used, whatever the damage
        rows, present = vectors.get([victim])
        assert not present[0]
        assert vectors.damaged_ids() == [victim]
        assert vectors.query(np.ones(8), k=20) and victim not in dict(vectors.query(np.ones(8), k=20))
    assert any(victim in r.getMessage() and "damaged" in r.getMessage() for r in caplog.records)
    # `ragspine embed` (embed_chunks) deletes the damaged record and embeds that chunk again
    with ChunkStore(store_path) as store, ChunkVectors(vectors_path, model_id=BACKEND.model_id) as vectors:
        report = embed_chunks(store, vectors, BACKEND)
        assert (report.repaired, report.embedded, report.present) == (1, 1, 11)
        rows, present = vectors.get([victim])
        assert present[0] and vectors.damaged_ids() == []
        np.testing.assert_allclose(rows, good_rows, atol=1e-6)
    # a search meeting a damaged record answers, and (a few chunks) re-embeds it on the spot
    before = _search(store_path)
    _flip(vectors_path, victim, how)
    assert _search(store_path) == before
    with ChunkVectors(vectors_path, model_id=BACKEND.model_id) as vectors:
        rows, present = vectors.get([victim])
        assert present[0] and vectors.damaged_ids() == []


def test_loading_in_parts_equals_one_read_and_skips_a_damaged_record_in_a_middle_part(
    store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`load_all_with` reads LOAD_PART records at a time into one matrix: with parts of 2, the
    12 records span six parts; the ids, rows and stored languages equal the one-part read, and a
    damaged record in a middle part is left out (logged) without shifting its neighbours."""
    from ragspine.retrieval.vector.dense import chunk_vectors as module

    vectors_path = Path(str(store_path) + VECTORS_SUFFIX)
    with ChunkVectors(vectors_path, model_id=BACKEND.model_id) as vectors:
        whole = vectors.load_all_with("text_language")
        victim = whole[0][5]
    monkeypatch.setattr(module, "LOAD_PART", 2)
    with ChunkVectors(vectors_path, model_id=BACKEND.model_id) as vectors:
        ids, matrix, languages = vectors.load_all_with("text_language")
    assert ids == whole[0] and languages == whole[2]
    np.testing.assert_array_equal(matrix, whole[1])
    _flip(vectors_path, victim, "flip")
    with ChunkVectors(vectors_path, model_id=BACKEND.model_id) as vectors:
        ids, matrix, languages = vectors.load_all_with("text_language")
    keep = [i for i, chunk_id in enumerate(whole[0]) if chunk_id != victim]
    assert ids == [whole[0][i] for i in keep] and languages == [whole[2][i] for i in keep]
    np.testing.assert_array_equal(matrix, whole[1][keep])


def test_damaged_file_searches_by_bm25_and_embed_moves_it_aside(store_path: Path) -> None:
    vectors_path = Path(str(store_path) + VECTORS_SUFFIX)
    before = _search(store_path)
    data = bytearray(vectors_path.read_bytes())
    data[:100] = b"\x5a" * 100  # the header: SQLite cannot open it
    vectors_path.write_bytes(bytes(data))
    with pytest.raises(VectorFilesDamaged, match="ragspine embed"):
        ChunkVectors(vectors_path, model_id=BACKEND.model_id)
    with ChunkStore(store_path) as store:
        index = NarrativeIndex(store, embedding_backend=BACKEND)
        results = index.retrieve("revenue fell region", top_k=5)
        assert results  # BM25 (plus what fits in memory), never an error
        assert index.dense is not None
        index.retriever()
        coverage = index.dense.coverage()
        assert coverage.problem is not None and "unreadable" in coverage.problem
        index.close()
    moved = quarantine_if_damaged(vectors_path)
    assert moved is not None and Path(moved).exists() and not vectors_path.exists()
    with ChunkStore(store_path) as store, ChunkVectors.beside(store, model_id=BACKEND.model_id) as vectors:
        assert embed_chunks(store, vectors, BACKEND).embedded == 12
    assert _search(store_path) == before
    assert quarantine_if_damaged(vectors_path) is None  # a readable file stays where it is


def test_v1_file_is_upgraded_in_place(tmp_path: Path) -> None:
    path = tmp_path / "old.vectors.sqlite"
    blob = (np.array([0.6, 0.8], dtype="<f4")).tobytes()
    with sqlite3.connect(path) as conn:  # the v1 layout, as the previous release wrote it
        conn.execute("CREATE TABLE chunk_vector_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute("CREATE TABLE chunk_vector (chunk_id TEXT PRIMARY KEY, version INTEGER NOT NULL, vec BLOB NOT NULL)")
        conn.execute("CREATE TABLE chunk_vector_deleted (chunk_id TEXT PRIMARY KEY, version INTEGER NOT NULL)")
        conn.executemany("INSERT INTO chunk_vector_meta VALUES (?, ?)",
                         [("format", "ragspine-chunk-vectors-v1"), ("model_id", "m"), ("dim", "2"), ("version", "1")])
        conn.execute("INSERT INTO chunk_vector VALUES ('a:0', 1, ?)", (blob,))
    with ChunkVectors(path, model_id="m") as vectors:
        ids, matrix = vectors.load_all()
        assert ids == ["a:0"] and matrix.tolist() == [[pytest.approx(0.6), pytest.approx(0.8)]]
        assert vectors.damaged_ids() == []
        vectors.upsert(["b:0"], [[1.0, 0.0]], [{"doc_id": "b"}])
        assert vectors.delete_doc("b") == 1


def _channel_ranking(vectors: object, corpus: list[tuple[str, str]], queries: list[str]) -> list[list[tuple[str, float | None]]]:
    with ChunkStore(":memory:") as store:
        store.init_schema()
        index = NarrativeIndex(store, embedding_backend=BACKEND, vectors=vectors, channels="hybrid")  # type: ignore[arg-type]
        for doc_id, text in corpus:
            chunks = chunk_document(text, DocumentMeta(doc_id, title=doc_id))
            index.replace_chunks(doc_id, chunks)
        out = []
        for q in queries:
            out.append([(r.chunk.chunk_id, r.vector_score) for r in index.retrieve(q, top_k=6)])
            out.append([(r.chunk.chunk_id, r.vector_score) for r in index.retrieve(q, top_k=6, entity="none")])
        index.withdraw("d3")
        out.append([(r.chunk.chunk_id, r.vector_score) for r in index.retrieve(queries[0], top_k=6)])
        return out


@pytest.mark.parametrize("kind", ["in_process", "qdrant"])
def test_a_store_that_ranks_gives_the_channel_the_same_results(kind: str) -> None:
    corpus = _corpus(40)
    queries = ["revenue fell", "exports rose in region 2", "cash flow debt"]
    want = _channel_ranking(ChunkVectors(None, model_id=BACKEND.model_id), corpus, queries)
    if kind == "qdrant":
        pytest.importorskip("qdrant_client")
        from ragspine.retrieval.vector.stores.qdrant import QdrantVectorStore

        store: object = QdrantVectorStore("chunks", model_id=BACKEND.model_id, location=":memory:")
    else:
        store = InProcessVectorStore(model_id=BACKEND.model_id)
    got = _channel_ranking(store, corpus, queries)
    assert got == want
    assert any(got) and all(score is not None for run in got[:1] for _, score in run)


class CountingBackend(DeterministicEmbeddingBackend):
    """The deterministic backend, recording every text it embeds (a local backend: it may embed
    RESTRICTED text, so only the lazy limit's accounting is under test)."""

    def __init__(self) -> None:
        super().__init__(dim=8)
        self.texts: list[str] = []

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        self.texts += texts
        return super().embed_texts(texts)


@pytest.mark.parametrize("kind", ["chunk_vectors", "in_process_store"])
def test_restricted_chunks_never_use_up_the_lazy_limit(kind: str) -> None:
    """Three RESTRICTED chunks without vectors must not push two visible ones past a lazy limit
    of 2: the visible ones are embedded at search time and get a vector score, as they would
    if the RESTRICTED documents did not exist (issue 14 #1/#2)."""
    backend = CountingBackend()
    vectors = None if kind == "chunk_vectors" else InProcessVectorStore(model_id=backend.model_id)
    with ChunkStore(":memory:") as store:
        store.init_schema()
        index = NarrativeIndex(store, embedding_backend=backend, vectors=vectors, embed_on_write=False)  # type: ignore[arg-type]
        assert index.dense is not None
        index.dense.lazy_limit = 2
        for i in range(2):
            index.ingest(f"revenue fell in region {i}", DocumentMeta(f"open{i}"))
        for i in range(3):
            index.ingest(f"revenue secret plan {i}", DocumentMeta(f"hidden{i}", sensitivity="RESTRICTED"))
        results = index.retrieve("revenue fell region", top_k=5)
        assert [r.chunk.doc_id for r in results] and {r.chunk.doc_id for r in results} <= {"open0", "open1"}
        assert all(r.vector_score is not None for r in results)
        assert not any("secret" in t for t in backend.texts)  # not embedded lazily either
        index.close()


def test_a_store_that_ranks_embeds_the_index_text_lazily() -> None:
    """With Contextual Retrieval, a vector embedded at search time (the store path) is of the
    same index text `embed_chunks` embeds, not of the bare chunk text."""
    from ragspine.retrieval.chunking.contextual import indexed_text
    from ragspine.retrieval.chunking.factory import make_index_text_fn

    backend, header = CountingBackend(), make_index_text_fn("header")
    assert header is not None
    store_vectors = InProcessVectorStore(model_id=backend.model_id)
    with ChunkStore(":memory:") as store:
        store.init_schema()
        index = NarrativeIndex(store, embedding_backend=backend, vectors=store_vectors, embed_on_write=False,
                               index_text=header)  # fmt: skip
        index.ingest("Revenue fell in the north.", DocumentMeta("r1", title="Annual report", entity="ACME"))
        assert index.retrieve("revenue", top_k=1)[0].vector_score is not None
        (chunk,) = store.iter_chunks(doc_id="r1")
        assert backend.texts[0] == indexed_text(chunk, header) != chunk.text  # then the query
        index.close()
