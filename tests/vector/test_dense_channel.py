"""The dense channel inside NarrativeIndex: vectors made at ingest, persisted beside the store,
never recomputed, filled lazily or with a logged fallback, RESTRICTED kept from remote backends."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from ragspine.retrieval.store.sqlite import ChunkStore
from ragspine.retrieval.model import Chunk, DocumentMeta
from ragspine.retrieval.pipeline.hybrid import HybridRetriever
from ragspine.retrieval.fusion.rrf import Fusion
from ragspine.retrieval.pipeline.narrative_index import NarrativeIndex
from ragspine.retrieval.vector.dense.chunk_vectors import VectorModelMismatch
from ragspine.retrieval.vector.embeddings.deterministic import DeterministicEmbeddingBackend

DOCS = {
    "rev": "Revenue fell because export demand weakened in the third quarter.",
    "hire": "The company hired two hundred engineers for its new battery plant.",
    "zh": "营收下滑的主要原因是海外需求减弱。",
    "memo": "Board memo: the dividend will be cut next year.",
}


class Recording(DeterministicEmbeddingBackend):
    """The deterministic test backend, recording every text it is given (test-only)."""

    def __init__(self, *, remote: bool = False, dim: int = 256) -> None:
        super().__init__(dim=dim)
        self.is_remote = remote
        self.seen: list[str] = []

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        self.seen.extend(texts)
        return super().embed_texts(texts)


def _ingest(index: NarrativeIndex) -> None:
    for doc_id, text in DOCS.items():
        sensitivity = "RESTRICTED" if doc_id == "memo" else "INTERNAL"
        index.ingest(text, DocumentMeta(doc_id, sensitivity=sensitivity))


def test_vectors_are_made_at_ingest_persisted_and_never_recomputed(db_path: Path) -> None:
    backend = Recording()
    with ChunkStore(db_path) as store:
        store.init_schema()
        _ingest(NarrativeIndex(store, embedding_backend=backend))
    assert sorted(backend.seen) == sorted(DOCS.values()), "each chunk embedded once, at ingest"
    assert Path(f"{db_path}.vectors.sqlite").is_file()
    again = Recording()
    with ChunkStore(db_path) as store:  # a new process: vectors come from the file
        index = NarrativeIndex(store, embedding_backend=again)
        results = index.retrieve("why did revenue fall", top_k=4)
        assert again.seen == ["why did revenue fall"], "only the query is embedded"
        assert results[0].chunk.doc_id == "rev" and results[0].vector_score is not None
        assert index.dense is not None and index.dense.coverage().with_vector == 4


def test_restricted_chunks_never_reach_a_remote_backend(db_path: Path) -> None:
    remote = Recording(remote=True)
    with ChunkStore(db_path) as store:
        store.init_schema()
        index = NarrativeIndex(store, embedding_backend=remote)
        _ingest(index)
        results = index.retrieve("dividend cut memo", top_k=4, include_restricted=True)
        assert DOCS["memo"] not in remote.seen
        memo = [r for r in results if r.chunk.doc_id == "memo"]
        assert memo and memo[0].vector_score is None, "RESTRICTED stays lexical-only"
        assert index.dense is not None and index.dense.coverage().lexical_only == 1
    local = Recording()
    with ChunkStore(db_path.parent / "local.db") as store:
        store.init_schema()
        _ingest(NarrativeIndex(store, embedding_backend=local))
        assert DOCS["memo"] in local.seen, "a local backend may embed it: the vector stays here"


def test_missing_vectors_are_filled_lazily_or_reported(db_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with ChunkStore(db_path) as store:
        store.init_schema()
        _ingest(NarrativeIndex(store))  # BM25 only: no vectors at all
        backend = Recording()
        index = NarrativeIndex(store, embedding_backend=backend)
        assert index.retrieve("revenue", top_k=2)[0].vector_score is None  # a BM25-only store stays so
        assert not backend.seen and not Path(f"{db_path}.vectors.sqlite").exists()
        assert index.open_vectors() is not None  # what a write does: the file is made
        with caplog.at_level(logging.INFO, logger="ragspine.retrieval.vector.dense.channel"):
            index.retrieve("revenue", top_k=2)
        assert "embedding 4 chunks that have no vector yet" in caplog.text
        assert len(backend.seen) == 5  # four chunks, then the query
        caplog.clear()
        index.ingest("Another text about factories.", DocumentMeta("late"))
        fallback = NarrativeIndex(store, embedding_backend=Recording(dim=256))
        assert fallback.dense is not None
        fallback.dense.lazy_limit = 0
        fallback.embed_on_write = False
        fallback.ingest("Freight costs rose sharply.", DocumentMeta("freight"))
        with caplog.at_level(logging.WARNING, logger="ragspine.retrieval.pipeline.narrative_index"):
            results = fallback.retrieve("freight costs", top_k=6)
        # a caller without RESTRICTED access is told about the chunks it may see: the memo is not counted
        assert "4 of 5 chunks have vectors; `ragspine embed` fills the rest" in caplog.text
        assert "of 6" not in caplog.text
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="ragspine.retrieval.pipeline.narrative_index"):
            fallback.retrieve("freight costs", top_k=6, include_restricted=True)
        assert "5 of 6 chunks have vectors; `ragspine embed` fills the rest" in caplog.text  # with access: all
        assert results[0].chunk.doc_id == "freight" and results[0].vector_score is None
        report = fallback.embed_pending(progress=False)
        assert report is not None and report.embedded == 1 and report.present == 5


def test_another_model_is_refused_with_the_fix(db_path: Path) -> None:
    with ChunkStore(db_path) as store:
        store.init_schema()
        _ingest(NarrativeIndex(store, embedding_backend=Recording(dim=256)))
        with pytest.raises(VectorModelMismatch, match="ragspine embed --db"):
            NarrativeIndex(store, embedding_backend=Recording(dim=16))


def test_vector_mode_and_fusion_methods(db_path: Path) -> None:
    with ChunkStore(db_path) as store:
        store.init_schema()
        backend = Recording()
        _ingest(NarrativeIndex(store, embedding_backend=backend))
        # a fusion that would give the dense ranking no weight must not matter in vector mode
        silent = Fusion(dense_low=0.0, dense_mid=0.0)
        vector = NarrativeIndex(store, embedding_backend=backend, channels="vector", fusion=silent)
        dense_only = vector.retrieve("export demand weakened", top_k=4)
        order = [r.chunk.doc_id for r in dense_only]
        scores = [r.vector_score for r in dense_only]
        assert scores == sorted(scores, reverse=True), "vector mode ranks by cosine alone"
        assert order[0] == "rev"
        for method in ("zscore", "rrf", "weighted", "adaptive"):
            index = NarrativeIndex(store, embedding_backend=backend, fusion=Fusion(method=method))
            assert index.retrieve("export demand", top_k=1)[0].chunk.doc_id == "rev"


def test_cross_lingual_query_leans_on_vectors(db_path: Path) -> None:
    """A query the corpus vocabulary does not cover gets a lexical match of 0, so the adaptive
    fusion gives the dense ranking its highest weight."""
    with ChunkStore(db_path) as store:
        store.init_schema()
        index = NarrativeIndex(store, embedding_backend=Recording(), fusion=Fusion(method="adaptive"))
        _ingest(index)
        retriever = index.retriever()
        tokens = retriever.analyzer("完全没有出现过的词语")
        assert retriever.lexical_match(tokens, 0.0) == 0.0
        assert retriever.fusion.weights(0.0)[1] == retriever.fusion.dense_high
        full = retriever.analyzer("revenue fell because export demand weakened")
        best = retriever.index.search(full, 1, k1=retriever.k1, b=retriever.b)[0][1]
        assert retriever.lexical_match(full, best) > 0.5


class Constant:
    """Every text gets the same vector (test-only): every cosine ties."""

    model_id = "constant"
    is_remote = False

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        return [[1.0, 2.0, 2.0] for _ in texts]


def test_dense_ranking_breaks_ties_by_chunk_id() -> None:
    chunks = [Chunk(f"{c}:0", c, 0, f"text {c}", f"{c}#p1@0-6") for c in "dbca"]
    retriever = HybridRetriever(chunks, embedding_backend=Constant(), channels="vector")
    results = retriever.search("anything at all", top_k=3)
    assert [r.chunk.chunk_id for r in results] == ["a:0", "b:0", "c:0"]
    assert all(r.vector_score == pytest.approx(1.0) for r in results)


def test_a_zero_fusion_weight_still_orders_what_only_that_channel_found(db_path: Path) -> None:
    """Weight 0 for BM25 (vectors decide) must not drop chunks that have no vector, and weight 0
    for the vectors must leave dense-only hits in cosine order, not chunk_id order."""
    with ChunkStore(db_path) as store:
        store.init_schema()
        backend = Recording()
        _ingest(NarrativeIndex(store, embedding_backend=backend))
        vectors_decide = Fusion(method="weighted", lexical_weight=0.0, dense_weight=1.0)
        index = NarrativeIndex(store, embedding_backend=backend, fusion=vectors_decide)
        assert index.dense is not None
        index.dense.lazy_limit = 0
        index.embed_on_write = False
        index.ingest("Quarterly freight surcharge notice.", DocumentMeta("freight"))
        results = index.retrieve("freight surcharge revenue", top_k=10)
        assert [r.chunk.doc_id for r in results][-1] == "freight", "no vector: still returned, last"
        assert results[-1].vector_score is None and results[-1].bm25_score > 0
        bm25_decides = Fusion(method="weighted", lexical_weight=1.0, dense_weight=0.0)
        ranked = NarrativeIndex(store, embedding_backend=backend, fusion=bm25_decides).retrieve("revenue", top_k=10)
        dense_only = [r.vector_score for r in ranked if r.bm25_score == 0.0 and r.vector_score is not None]
        assert dense_only == sorted(dense_only, reverse=True), "dense-only hits in cosine order"


def test_vectors_written_by_another_writer_are_picked_up(db_path: Path) -> None:
    from ragspine.retrieval.vector.dense.chunk_vectors import ChunkVectors, embed_chunks

    backend = Recording()
    with ChunkStore(db_path) as store:
        store.init_schema()
        _ingest(NarrativeIndex(store))  # no vectors yet
        index = NarrativeIndex(store, embedding_backend=backend)
        index.retrieve("revenue", top_k=2)
        assert index.dense is None and not backend.seen  # no vectors file: BM25 only, none made
        with ChunkVectors.beside(store, model_id=backend.model_id) as other:  # e.g. `ragspine embed`
            embed_chunks(store, other, backend, progress=False)
        index.retrieve("revenue", top_k=2)  # the file exists now: the search opens it
        assert index.dense is not None and index.dense.coverage().with_vector == 4
        index.dense.lazy_limit = 0  # this process will not embed missing ones itself
        index.ingest("A later note.", DocumentMeta("later"), valid_as_of="")  # embedded on write
        index.retrieve("revenue", top_k=2)
        assert index.dense.coverage().with_vector == 5


class AskedChunks:
    """A ListChunks that records which positions' texts were read (test-only)."""

    def __init__(self, chunks: list[object]) -> None:
        from ragspine.retrieval.pipeline.hybrid import ListChunks

        self._inner = ListChunks(chunks)  # type: ignore[arg-type]
        self.asked: list[int] = []

    def chunks_at(self, positions: list[int]) -> list[object]:
        self.asked.extend(positions)
        return self._inner.chunks_at(positions)


def test_languages_are_stored_with_the_vectors_and_read_back_at_start(tmp_path: Path) -> None:
    """A vector's text language is written with it (vector_metadata) and read back when a channel
    opens the file; only records written without it (older files) have their text re-detected."""
    from ragspine.retrieval.chunking.chunking import Chunk as TextChunk
    from ragspine.retrieval.lexical.index.segment import SegmentBuilder
    from ragspine.retrieval.lexical.index.snapshot import IndexSnapshot
    from ragspine.retrieval.vector.dense.channel import LANGUAGES, DenseChannel
    from ragspine.retrieval.vector.dense.chunk_vectors import TEXT_LANGUAGE, ChunkVectors, vector_metadata

    texts = ["Revenue fell because export demand weakened.", "营收下滑的主要原因是海外需求减弱。", "Hired engineers."]
    chunks = [TextChunk(f"d{i}:0", f"d{i}", 0, t, f"d{i}#p1@0-1") for i, t in enumerate(texts)]
    builder = SegmentBuilder(first=0)
    builder.add([t.split() for t in texts], chunk_ids=[c.chunk_id for c in chunks])
    snapshot = IndexSnapshot([builder.finish()])
    backend = DeterministicEmbeddingBackend(dim=16)
    assert vector_metadata(chunks[1])[TEXT_LANGUAGE] == "zh"
    path = tmp_path / "v.sqlite"
    vectors_of = backend.embed_texts(texts)
    with ChunkVectors(path, model_id=backend.model_id) as vectors:
        vectors.upsert(["d0:0"], [vectors_of[0]], [{"doc_id": "d0", TEXT_LANGUAGE: "zh"}])  # the stored code wins
        vectors.upsert(["d1:0"], [vectors_of[1]], [{"doc_id": "d1"}])  # an older record: detected
    with ChunkVectors(path, model_id=backend.model_id) as vectors:
        source = AskedChunks(chunks)
        view = DenseChannel(backend, vectors).attach(snapshot, source)  # type: ignore[arg-type]
        zh, en = LANGUAGES.index("zh"), LANGUAGES.index("en")
        assert view.groups.tolist() == [zh, zh, en]  # type: ignore[attr-defined]
        assert sorted(set(source.asked)) == [1, 2], "d2 had no vector (embedded now), d1 no stored language"
        assert vectors.metadata("d2:0")[TEXT_LANGUAGE] == "en", "the lazily embedded chunk stores its language"
    with ChunkVectors(path, model_id=backend.model_id) as vectors:
        ids, _, languages = vectors.load_all_with(TEXT_LANGUAGE)
        assert dict(zip(ids, languages)) == {"d0:0": "zh", "d1:0": None, "d2:0": "en"}
        source = AskedChunks(chunks)
        again = DenseChannel(backend, vectors).attach(snapshot, source)  # type: ignore[arg-type]
        assert again.groups.tolist() == [zh, zh, en]  # type: ignore[attr-defined]
        assert sorted(set(source.asked)) == [1], "only the record without a stored language is read"


def test_coverage_without_visible_counts_tells_a_caller_without_access_nothing() -> None:
    """A coverage whose non-RESTRICTED counts were not taken (a vector store's view, a channel
    before its first attach) fails closed: a caller without RESTRICTED access is told (0, 0),
    never counts that include RESTRICTED chunks; with access the whole is told."""
    from ragspine.retrieval.vector.dense.ranking import DenseCoverage

    whole = DenseCoverage(active=10, with_vector=4, lexical_only=0)  # 6 RESTRICTED chunks among the 10, say
    assert whole.seen_by(False) == (0, 0)  # nothing said: no note
    assert whole.seen_by(True) == (4, 10)
    assert DenseCoverage(10, 4, 0, visible=(3, 4)).seen_by(False) == (3, 4)


def test_a_note_worked_out_during_an_attach_is_not_kept_for_the_new_state(db_path: Path) -> None:
    """A search that works out its note from the coverage an attach is replacing (it read the
    generation once `retriever()` had begun) must not keep that note for the new state: the
    generation moves when the attach is done. Made deterministic with events around `_over`."""
    import threading

    with ChunkStore(db_path) as store:
        store.init_schema()
        _ingest(NarrativeIndex(store, embedding_backend=Recording()))  # every chunk embedded
        index = NarrativeIndex(store, embedding_backend=Recording())
        assert index.dense is not None
        index.dense.lazy_limit = 0
        index.embed_on_write = False
        index.retrieve("revenue", top_k=2)  # attached: 3 of 3 visible chunks have vectors, no note
        # another writer, no vector: 3 of 4 once this index attaches again
        NarrativeIndex(store).ingest("Freight costs rose sharply.", DocumentMeta("freight"))
        in_attach, computed, go = threading.Event(), threading.Event(), threading.Event()
        over, work_out = index._over, index._work_out_note

        def slow_over(*args: object, **kwargs: object) -> HybridRetriever:
            in_attach.set()
            assert go.wait(10)
            return over(*args, **kwargs)  # type: ignore[arg-type]

        def noting(include_restricted: bool) -> object:
            note = work_out(include_restricted)  # from the coverage being replaced
            computed.set()
            return note

        index._over = slow_over  # type: ignore[method-assign]
        index._work_out_note = noting  # type: ignore[method-assign]
        attach = threading.Thread(target=index.retriever)
        attach.start()
        assert in_attach.wait(10)
        search = threading.Thread(target=index.vectors_note)
        search.start()
        assert computed.wait(10)
        go.set()
        attach.join(10)
        search.join(10)
        note = index.vectors_note()
        assert note is not None and (note.with_vector, note.active) == (3, 4)


def test_each_in_memory_store_logs_its_own_vectors_note(caplog: pytest.LogCaptureFixture) -> None:
    """Two ":memory:" stores are two states: the second one's note is logged too (the log key
    is per index for an in-memory store, not the shared ":memory:" name)."""
    logged = []
    for _ in range(2):
        with ChunkStore(":memory:") as store:
            store.init_schema()
            _ingest(NarrativeIndex(store))  # no vectors
            index = NarrativeIndex(store, embedding_backend=Recording())
            assert index.dense is not None
            index.dense.lazy_limit = 0  # nothing embedded by the search: no vectors
            caplog.clear()
            with caplog.at_level(logging.WARNING, logger="ragspine.retrieval.pipeline.narrative_index"):
                index.retrieve("revenue", top_k=2)
            logged.append("no vectors for this store" in caplog.text)
    assert logged == [True, True]
