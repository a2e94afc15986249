"""A store ingested BM25-only stays BM25-only until the user embeds (issue 37, item 2): a search
with an embedding backend configured makes no vectors file, logs no WARNING and says in its
lineage, `/stats` and `config show` that there are no vectors and how to add them; a store whose vectors cover
part of the chunks says "embedding in progress" while an embed run holds the marker, else
"X of N … `ragspine embed` fills the rest", logged once per process and store state; after
`ragspine embed` the same search is hybrid. Real CLI (click's runner), real Workspace, real
SQLite files; the deterministic backend (hashed tokens) stands in for e5."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

import ragspine
from ragspine.cli import main
from ragspine.retrieval.model import DocumentMeta
from ragspine.retrieval.pipeline.narrative_index import NarrativeIndex
from ragspine.retrieval.pipeline.trace import Trace
from ragspine.retrieval.store.sqlite import ChunkStore
from ragspine.retrieval.vector.dense.pending import embed_missing
from ragspine.retrieval.vector.stores.sqlite import ChunkVectors
from ragspine.retrieval.vector.embeddings.deterministic import DeterministicEmbeddingBackend

NO_VECTORS = "no vectors for this store: ranked by BM25 only; `ragspine embed` adds them"


def _cli(*args: str, embedding: str) -> str:
    """What the command printed (standard output, then standard error: `--explain`'s trace)."""
    result = CliRunner().invoke(main, list(args), env={"RAGSPINE_EMBEDDING": embedding})
    assert result.exit_code == 0, result.output
    return result.stdout + result.stderr


def _dense_step(trace: Trace) -> dict[str, object]:
    (channels,) = trace.of("channels")
    dense = channels.decisions.get("dense")
    assert isinstance(dense, dict), channels.decisions
    return dense


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    root.mkdir()
    for i in range(5):
        (root / f"n{i}.md").write_text(f"# Note {i}\n\nUnit {i} reported a harbour crane outage in week {i}.\n", "utf-8")
    return root


def test_a_search_over_a_bm25_only_store_writes_nothing_and_says_how_to_embed(
    folder: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "store" / "s.db"
    _cli("ingest", str(folder), "--db", str(db), embedding="none")
    before = sorted(p.name for p in db.parent.iterdir())
    with caplog.at_level(logging.INFO):
        out = json.loads(_cli("search", "harbour crane outage", "--db", str(db), "--json", embedding="deterministic"))
        again = _cli("search", "harbour crane outage", "--db", str(db), "--explain", embedding="deterministic")
    assert out["snippets"] and all(s["scores"]["vector"] is None for s in out["snippets"])
    assert sorted(p.name for p in db.parent.iterdir()) == before  # no vectors file, nothing else
    assert not any("vectors.sqlite" in name for name in before)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert NO_VECTORS in again  # the lineage `--explain` prints

    with ragspine.open(db, embedding="deterministic") as ws:  # the Python path: the same pipeline
        trace = Trace()
        assert ws.search("harbour crane outage", trace=trace)
        assert _dense_step(trace) == {"vectors": {"with_vector": 0, "active": 5}, "note": NO_VECTORS}
        narrative = ws.retriever.index
        generation, searched = narrative._generation, narrative._notes.get(False)
        stats = ws.stats()
        # counted from the snapshot: no RESTRICTED-inclusive retriever made, the search's note kept
        assert True not in narrative._retrievers and narrative._generation == generation
        assert searched is not None and narrative._notes.get(False) is searched
    assert stats["index"]["retrieval"] == "hybrid" and stats["index"]["embedding_model"] is not None
    assert stats["index"]["dense"]["stored_vectors"] == 0 and stats["index"]["dense"]["with_vector"] == 0
    assert stats["index"]["dense"]["note"] == NO_VECTORS
    shown = _cli("config", "show", "--db", str(db), embedding="deterministic")
    assert shown.endswith(f"vectors:\n  {NO_VECTORS}\n")
    assert sorted(p.name for p in db.parent.iterdir()) == before


def test_ragspine_embed_makes_the_bm25_only_store_hybrid(folder: Path, tmp_path: Path) -> None:
    db = tmp_path / "store" / "s.db"
    _cli("ingest", str(folder), "--db", str(db), embedding="none")
    first = _cli("search", "harbour crane outage", "--db", str(db), "--explain", embedding="deterministic")
    assert NO_VECTORS in first and not list(db.parent.glob("*.vectors.sqlite"))
    _cli("embed", "--db", str(db), embedding="deterministic")
    assert list(db.parent.glob("*.vectors.sqlite"))
    out = json.loads(_cli("search", "harbour crane outage", "--db", str(db), "--json", embedding="deterministic"))
    assert out["snippets"] and all(isinstance(s["scores"]["vector"], float) for s in out["snippets"])
    explained = _cli("search", "harbour crane outage", "--db", str(db), "--explain", embedding="deterministic")
    assert "note=" not in explained and "with_vector=5, active=5" in explained
    shown = json.loads(_cli("config", "show", "--db", str(db), "--json", embedding="deterministic"))
    assert [(v["with_vector"], v["active"], v["in_progress"]) for v in shown["vectors"]] == [(5, 5, False)]


DOCS = 200  # one-chunk documents: more missing than the lazy limit (64), so a search embeds none


def _partly_embedded(db: Path, embedded: int) -> None:
    with ChunkStore(str(db)) as store:
        store.init_schema()
        index = NarrativeIndex(store)  # BM25-only ingest
        for i in range(DOCS):
            index.ingest(f"Unit {i} reported a harbour crane outage in week {i}.", DocumentMeta(doc_id=f"d{i:03d}"))
        backend = DeterministicEmbeddingBackend()
        with ChunkVectors.beside(store, model_id=backend.model_id) as vectors:  # an embed run stopped early
            assert embed_missing(vectors, backend, list(store.iter_chunks())[:embedded]) == embedded


def test_partial_vectors_are_reported_once_with_the_right_advice(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    db = tmp_path / "s.db"
    _partly_embedded(db, 20)
    rest = "20 of 200 chunks have vectors; `ragspine embed` fills the rest"
    with ChunkStore(str(db)) as store:
        index = NarrativeIndex(store, embedding_backend=DeterministicEmbeddingBackend())
        try:
            with caplog.at_level(logging.INFO):
                notes = []
                for _ in range(3):  # a long-lived server's searches
                    trace = Trace()
                    assert index.rank("harbour crane outage unit 37", top_k=5, trace=trace)
                    notes.append(_dense_step(trace)["note"])
            assert notes == [rest] * 3  # every search's lineage says it
            said = [r for r in caplog.records if "chunks have vectors" in r.getMessage() or "no vector" in r.getMessage()]
            assert [(r.levelno, r.getMessage()) for r in said] == [(logging.WARNING, f"{rest} ({db})")]
        finally:
            index.close()


class _Pausing(DeterministicEmbeddingBackend):
    """Waits inside its first batch until `go_on` is set, having set `paused`."""

    def __init__(self) -> None:
        super().__init__()
        self.paused, self.go_on = threading.Event(), threading.Event()

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        if not self.paused.is_set():
            self.paused.set()
            assert self.go_on.wait(30), "the test never let the embed run go on"
        return super().embed_texts(texts)


def test_a_search_while_an_embed_run_writes_says_embedding_in_progress(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "s.db"
    _partly_embedded(db, 20)
    slow, done = _Pausing(), []

    def run() -> None:  # `ragspine embed` in another process has its own connections, as here
        with ChunkStore(str(db)) as store:
            index = NarrativeIndex(store, embedding_backend=slow, embed_on_write=False)
            try:
                done.append(index.embed_pending(progress=False, batch_size=10))
            finally:
                index.close()

    job = threading.Thread(target=run, daemon=True)
    job.start()
    try:
        assert slow.paused.wait(30)
        with ChunkStore(str(db)) as store:
            index = NarrativeIndex(store, embedding_backend=DeterministicEmbeddingBackend())
            try:
                with caplog.at_level(logging.INFO):
                    for _ in range(2):
                        trace = Trace()
                        index.rank("harbour crane outage", top_k=5, trace=trace)
                        assert _dense_step(trace)["note"] == "embedding in progress: 20 of 200 chunks have vectors"
                said = [r.getMessage() for r in caplog.records if "have vectors" in r.getMessage()]
                assert said == [f"embedding in progress: 20 of 200 chunks have vectors ({db})"]
                assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
            finally:
                index.close()
    finally:
        slow.go_on.set()
        job.join(30)
    assert done and not list(tmp_path.glob("*.embedding"))  # the run removed its marker


def _public_embedded_restricted_not(db: Path) -> None:
    """100 public chunks, all with a vector, and 100 RESTRICTED ones without (more than the lazy
    limit, so a search embeds none of them)."""
    with ChunkStore(str(db)) as store:
        store.init_schema()
        index = NarrativeIndex(store)  # BM25-only ingest
        for i in range(DOCS):
            meta = DocumentMeta(doc_id=f"d{i:03d}", sensitivity="RESTRICTED" if i % 2 else "INTERNAL")
            index.ingest(f"Unit {i} reported a harbour crane outage in week {i}.", meta)
        backend = DeterministicEmbeddingBackend()
        public = [c for c in store.iter_chunks() if c.sensitivity != "RESTRICTED"]
        with ChunkVectors.beside(store, model_id=backend.model_id) as vectors:
            assert embed_missing(vectors, backend, public) == DOCS // 2


def test_restricted_chunks_never_change_what_a_caller_without_access_is_told(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "s.db"
    _public_embedded_restricted_not(db)
    with ChunkStore(str(db)) as store:
        index = NarrativeIndex(store, embedding_backend=DeterministicEmbeddingBackend())
        assert index.dense is not None
        index.dense.lazy_limit = 0  # a search embeds none of them (as a remote backend never would)
        try:
            with caplog.at_level(logging.INFO, logger="ragspine.retrieval.pipeline.narrative_index"):
                for _ in range(2):
                    trace = Trace()
                    assert index.rank("harbour crane outage unit 38", top_k=5, trace=trace)
                    # every chunk this caller may see has its vector: no note, and counts of its own chunks
                    assert _dense_step(trace)["vectors"] == {"with_vector": 100, "active": 100}
                    assert "note" not in _dense_step(trace)
                assert index.vectors_note() is None
            assert caplog.records == []  # nothing logged, no WARNING
            with caplog.at_level(logging.INFO, logger="ragspine.retrieval.pipeline.narrative_index"):
                trace = Trace()
                index.rank("harbour crane outage unit 37", top_k=5, include_restricted=True, trace=trace)
            # with RESTRICTED access (an admin): the RESTRICTED chunks count, as docs/dense.md says
            rest = "100 of 200 chunks have vectors; `ragspine embed` fills the rest"
            assert _dense_step(trace)["note"] == rest
            assert [(r.levelno, r.getMessage()) for r in caplog.records] == [(logging.WARNING, f"{rest} ({db})")]
            note = index.vectors_note(include_restricted=True)
            assert note is not None and (note.with_vector, note.active) == (100, 200)
        finally:
            index.close()


def test_the_note_is_worked_out_once_per_state_not_per_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragspine.retrieval.pipeline import narrative_index

    asked: list[str | None] = []
    running = [True]

    def marker(path: str | None) -> bool:
        asked.append(path)
        return running[0]

    monkeypatch.setattr(narrative_index, "embedding_in_progress", marker)
    db = tmp_path / "s.db"
    _partly_embedded(db, 20)
    with ChunkStore(str(db)) as store:
        index = NarrativeIndex(store, embedding_backend=DeterministicEmbeddingBackend())
        try:
            monkeypatch.setattr(narrative_index, "_MARKER_RECHECK_S", 60.0, raising=False)  # a slow machine asks no more
            notes = []
            for _ in range(6):
                trace = Trace()
                index.rank("harbour crane outage unit 37", top_k=5, trace=trace)
                notes.append(_dense_step(trace)["note"])
                if len(notes) == 2:  # the first search attached over no coverage, the second over the vectors' version
                    asked.clear()
            assert notes == ["embedding in progress: 20 of 200 chunks have vectors"] * 6
            assert asked == []  # the marker is asked once per attach state, not on every search
            running[0] = False  # the run was stopped: within _MARKER_RECHECK_S the note says so
            monkeypatch.setattr(narrative_index, "_MARKER_RECHECK_S", 0.0)
            trace = Trace()
            index.rank("harbour crane outage unit 37", top_k=5, trace=trace)
            assert _dense_step(trace)["note"] == "20 of 200 chunks have vectors; `ragspine embed` fills the rest"
        finally:
            index.close()
    asked.clear()
    full = tmp_path / "full.db"
    _partly_embedded(full, DOCS)
    with ChunkStore(str(full)) as store:
        index = NarrativeIndex(store, embedding_backend=DeterministicEmbeddingBackend())
        try:
            for _ in range(3):
                index.rank("harbour crane outage unit 37", top_k=5)
            assert asked == [] and index.vectors_note() is None  # every chunk has a vector: nothing asked
        finally:
            index.close()


def test_the_log_is_kept_once_per_vectors_file_not_per_store(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from ragspine.retrieval.chunking.contextual import ContextHeader

    db = tmp_path / "s.db"
    with ChunkStore(str(db)) as store:
        store.init_schema()
        NarrativeIndex(store).ingest("Unit 1 reported a harbour crane outage.", DocumentMeta(doc_id="d1"))
        with caplog.at_level(logging.INFO, logger="ragspine.retrieval.pipeline.narrative_index"):
            for index_text in (None, ContextHeader()):  # two index texts: two vectors files, each told once
                index = NarrativeIndex(store, embedding_backend=DeterministicEmbeddingBackend(), index_text=index_text)
                try:
                    index.rank("harbour crane", top_k=1)
                    index.rank("harbour crane", top_k=1)
                finally:
                    index.close()
    assert [r.getMessage() for r in caplog.records] == [f"{NO_VECTORS} ({db})"] * 2


def test_config_show_counts_as_a_search_does_and_reports_a_damaged_store_in_one_line(tmp_path: Path) -> None:
    from ragspine.config_show import is_remote_backend, vector_coverage, vector_lines

    db = tmp_path / "s.db"
    _public_embedded_restricted_not(db)
    # a local backend embeds RESTRICTED chunks too: they are what `ragspine embed` fills
    assert [(v["with_vector"], v["active"]) for v in vector_coverage(str(db))] == [(100, 200)]  # type: ignore[index]
    # a remote one never embeds them: not counted, so the line does not send the user to `ragspine embed`
    assert is_remote_backend("openai") and not is_remote_backend("deterministic") and not is_remote_backend("auto")
    remote = vector_coverage(str(db), remote=True)
    assert [(v["with_vector"], v["active"]) for v in remote] == [(100, 100)]  # type: ignore[index]
    assert "fills the rest" not in " ".join(vector_lines(remote))
    damaged = tmp_path / "bad.db"
    damaged.write_bytes(b"not a database at all " * 100)
    result = CliRunner().invoke(main, ["config", "show", "--db", str(damaged)], env={"RAGSPINE_EMBEDDING": "deterministic"})
    assert result.exit_code == 0 and result.exception is None, result.output
    assert f"  {damaged}: unreadable (file is not a database); run `ragspine check`" in result.stdout.splitlines()
