"""Searchable before embedding ends: while an embed job writes vectors (a thread here, with its
own store and vectors connections, as `ragspine embed` in another process has), a search over
the same real SQLite files answers at once from BM25 plus the vectors committed so far, and its
trace and `coverage()` say how many chunks have one; a long-lived index picks up the vectors
written since its last search. The embedding backend is the deterministic test backend, made
slow by pausing inside its batches until the test lets it go on."""

from __future__ import annotations

import threading
from pathlib import Path

from ragspine.retrieval.model import DocumentMeta
from ragspine.retrieval.pipeline.narrative_index import NarrativeIndex
from ragspine.retrieval.pipeline.trace import Trace
from ragspine.retrieval.store.sqlite import ChunkStore
from ragspine.retrieval.vector.embeddings.deterministic import DeterministicEmbeddingBackend

DOCS, BATCH = 200, 10  # one-chunk documents, embedded 10 per batch: more missing than the lazy limit (64)


class PausingBackend(DeterministicEmbeddingBackend):
    """The deterministic vectors; after `pause_after` batches it waits inside the next batch
    (before it is stored) until `go_on` is set, having set `paused`."""

    def __init__(self) -> None:
        super().__init__()
        self.batches, self.pause_after = 0, 2
        self.paused, self.go_on = threading.Event(), threading.Event()

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        if self.batches == self.pause_after:
            self.paused.set()
            assert self.go_on.wait(30), "the test never let the embed job go on"
            self.go_on.clear()
        self.batches += 1
        return super().embed_texts(texts)


def _store(db: Path) -> None:
    with ChunkStore(str(db)) as store:
        store.init_schema()
        index = NarrativeIndex(store)  # BM25-only ingest: no vectors yet
        for i in range(DOCS):
            meta = DocumentMeta(doc_id=f"d{i:02d}", title=f"Note {i}", entity="ACME", period="2024")
            index.ingest(f"Unit {i} reported a harbour crane outage in week {i}.", meta)


def _embed(db: Path, backend: PausingBackend, done: list[object]) -> None:
    with ChunkStore(str(db)) as store:
        index = NarrativeIndex(store, embedding_backend=backend, embed_on_write=False)
        try:
            done.append(index.embed_pending(progress=False, batch_size=BATCH))
        finally:
            index.close()


def _resume_until_paused(backend: PausingBackend, batches: int) -> None:
    backend.paused.clear()
    backend.pause_after = backend.batches + batches
    backend.go_on.set()
    assert backend.paused.wait(30)


def test_a_search_mid_embedding_ranks_bm25_and_the_vectors_done_so_far(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    _store(db)
    slow, done = PausingBackend(), []
    job = threading.Thread(target=_embed, args=(db, slow, done), daemon=True)
    job.start()
    assert slow.paused.wait(30)  # 2 batches stored, the third being embedded
    with ChunkStore(str(db)) as store:
        index = NarrativeIndex(store, embedding_backend=DeterministicEmbeddingBackend())
        try:
            trace = Trace()
            results = index.rank("harbour crane outage unit 37", top_k=5, trace=trace)
            assert results and results[0].chunk.doc_id == "d37"  # BM25 finds a chunk not embedded yet
            coverage = index.dense.coverage() if index.dense else None
            assert coverage is not None and (coverage.active, coverage.with_vector) == (DOCS, 2 * BATCH)
            channels = next(step for step in trace.steps if step.stage == "channels")
            assert channels.decisions["dense"]["vectors"] == {"with_vector": 2 * BATCH, "active": DOCS}
            assert channels.decisions["dense"]["ranked"] == [2 * BATCH]  # cosine over the embedded ones only
            assert job.is_alive() and not done  # the embed job is still running, and waited for nothing

            _resume_until_paused(slow, 2)  # two more batches stored: the same index sees them
            index.rank("harbour crane outage", top_k=5)
            assert index.dense is not None and index.dense.coverage().with_vector == 4 * BATCH
            stats_before = dict(index.lexical_index.stats)

            slow.pause_after = -1
            slow.go_on.set()
            job.join(30)
            assert not job.is_alive() and done
            results = index.rank("harbour crane outage unit 37", top_k=5)
            assert index.dense.coverage().with_vector == DOCS and results[0].chunk.doc_id == "d37"
            assert dict(index.lexical_index.stats) == stats_before  # vectors arriving never touch BM25
        finally:
            slow.go_on.set()
            index.close()


def test_the_traces_vector_counts_leave_restricted_chunks_out(tmp_path: Path) -> None:
    """The channels step counts what the caller may see: a RESTRICTED chunk (with a vector or
    not) never moves `with_vector` or `active`."""
    with ChunkStore(str(tmp_path / "s.db")) as store:
        store.init_schema()
        index = NarrativeIndex(store, embedding_backend=DeterministicEmbeddingBackend())
        try:
            index.ingest("Harbour crane outage in week 3.", DocumentMeta(doc_id="open", sensitivity="PUBLIC"))
            index.ingest("Harbour crane sale, board only.", DocumentMeta(doc_id="memo", sensitivity="RESTRICTED"))
            trace = Trace()
            index.rank("harbour crane", top_k=5, trace=trace)
            channels = next(step for step in trace.steps if step.stage == "channels")
            assert channels.decisions["dense"]["vectors"] == {"with_vector": 1, "active": 1}
        finally:
            index.close()


def test_a_few_embedded_chunks_in_another_language_do_not_silence_bm25(tmp_path: Path) -> None:
    """Mid-embedding, the dense channel's head holds only the chunks embedded so far. Those being
    in another language than the query is no sign that the answer is a translation: the exact
    BM25 match keeps its weight (before the fix the fusion let the vectors rank alone, and a
    Chinese question over a half-embedded mixed folder returned the five embedded English notes)."""
    from ragspine.retrieval.vector.dense.pending import embed_missing

    db = tmp_path / "s.db"
    _store(db)  # 200 English chunks, no vectors
    with ChunkStore(str(db)) as store:
        index = NarrativeIndex(store, embedding_backend=DeterministicEmbeddingBackend(), embed_on_write=False)
        try:
            index.ingest("港口起重机在第三周停运，维修需要两周。", DocumentMeta(doc_id="zh", title="港口"))
            for i in range(10):  # more Chinese text that BM25 matches less well
                index.ingest(f"港口第{i}号泊位的月度吞吐量报告。", DocumentMeta(doc_id=f"zh{i}", title="港口"))
            dense = index.open_vectors()  # the store had no vectors file: made now, as an embed run does
            assert dense is not None
            english = [c for c in store.iter_chunks() if c.doc_id in ("d00", "d01", "d02", "d03", "d04")]
            assert embed_missing(dense.vectors, dense.backend, english) == 5
            trace = Trace()
            results = index.rank("港口起重机停运", top_k=5, trace=trace)
            channels = next(step for step in trace.steps if step.stage == "channels")
            assert channels.decisions["dense"]["vectors"] == {"with_vector": 5, "active": DOCS + 11}
            fusion = next(step for step in trace.steps if step.stage == "fusion")
            assert fusion.decisions["signals"]["crosses_language"] is False
            assert results[0].chunk.doc_id == "zh"
        finally:
            index.close()
