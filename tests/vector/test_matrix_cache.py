"""The dense channel's memory-mapped matrix cache (`matrix_cache`): a fresh cache is attached
without reading the vector records; a stale one (new vectors, deletions, another model or file,
another lexical snapshot) is detected and rebuilt; a damaged one is ignored loudly and rebuilt;
and every ranking and score is the same with and without it (exact scan and HNSW, filters,
tombstones, RESTRICTED chunks, language centring)."""

from __future__ import annotations

import dataclasses
import logging
import os
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from ragspine.retrieval.chunking.chunking import Chunk
from ragspine.retrieval.lexical.index.segment import Segment, SegmentBuilder
from ragspine.retrieval.lexical.index.snapshot import IndexSnapshot
from ragspine.retrieval.model import index_field_values
from ragspine.retrieval.pipeline.hybrid import ListChunks
from ragspine.retrieval.vector.dense import matrix_cache
from ragspine.retrieval.vector.dense.ann import AnnConfig
from ragspine.retrieval.vector.dense.channel import DenseChannel, DenseView
from ragspine.retrieval.vector.dense.chunk_vectors import TEXT_LANGUAGE, ChunkVectors
from ragspine.retrieval.vector.embeddings.deterministic import (
    DeterministicEmbeddingBackend,
)

DIM = 32
N = 1_200
BACKEND = DeterministicEmbeddingBackend(dim=DIM)
NO_ANN = AnnConfig(min_vectors=None)
QUERIES = ["text 5", "text 17 and 300", "文本 五", "营收 下滑 文本"]


def _chunks(start: int, n: int) -> list[Chunk]:
    """Chunks `start`…: every third RESTRICTED; even ones Chinese text, odd ones English."""
    return [
        Chunk(
            f"c{i:05d}:0", f"c{i:05d}", 0, f"文本 {i}" if i % 2 == 0 else f"text {i}", f"c{i}#p1@0-1",
            sensitivity="RESTRICTED" if i % 3 == 0 else "INTERNAL",
        )
        for i in range(start, start + n)
    ]  # fmt: skip


def _segment(chunks: list[Chunk], first: int, name: str) -> Segment:
    builder = SegmentBuilder(first=first)
    builder.add([c.text.split() for c in chunks], chunk_ids=[c.chunk_id for c in chunks],
                fields=[index_field_values(c) for c in chunks])  # fmt: skip
    return dataclasses.replace(builder.finish(), name=name)  # as a written segment is named


def _rows(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    rows = rng.standard_normal((n, DIM)).astype(np.float32)
    rows[::2] += 1.5  # the "Chinese" half leans one way: centring has something to remove
    return rows


def _write(vectors: ChunkVectors, chunks: list[Chunk], rows: np.ndarray) -> None:
    languages = ["zh" if c.text.startswith("文本") else "en" for c in chunks]
    vectors.upsert([c.chunk_id for c in chunks], rows, [{"doc_id": c.doc_id, TEXT_LANGUAGE: lang} for c, lang in zip(chunks, languages)])


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, list[Chunk], IndexSnapshot]:
    chunks = _chunks(0, N)
    path = tmp_path / "v.sqlite"
    with ChunkVectors(path, model_id=BACKEND.model_id) as vectors:
        _write(vectors, chunks, _rows(N, 0))
    return path, chunks, IndexSnapshot([_segment(chunks, 0, "seg-a")])


def _channel(vectors: ChunkVectors, *, cache: bool, ann: AnnConfig = NO_ANN) -> DenseChannel:
    return DenseChannel(BACKEND, vectors, ann=ann, cache_min_vectors=1 if cache else None)


def _view(channel: DenseChannel, snapshot: IndexSnapshot, chunks: list[Chunk]) -> DenseView:
    view = channel.attach(snapshot, ListChunks(chunks))
    assert isinstance(view, DenseView)
    return view


def _results(view: DenseView, snapshot: IndexSnapshot) -> list[tuple[list[int], dict[int, float]]]:
    """Rankings of every query under several filters: everything a caller may see, a broad
    filter, a selective one."""
    shown = snapshot.visible().active_positions()
    out = []
    for allowed in (shown, shown[::2], shown[::37]):
        for query in view.embed_queries(QUERIES):
            out.append(view.rank(query, allowed, 10))
        out.append(({}, view.scores_at(view.embed_query(QUERIES[0]), allowed[:50].tolist())))  # type: ignore[arg-type]
    return out


def _uncached(path: Path, snapshot: IndexSnapshot, chunks: list[Chunk], ann: AnnConfig = NO_ANN) -> list[tuple[list[int], dict[int, float]]]:
    with ChunkVectors(path, model_id=BACKEND.model_id) as vectors:
        return _results(_view(_channel(vectors, cache=False, ann=ann), snapshot, chunks), snapshot)


def _no_full_read(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("every vector record was read although the cache is fresh")

    monkeypatch.setattr(ChunkVectors, "load_all_with", refuse)
    monkeypatch.setattr(DenseChannel, "_centring", refuse)


@pytest.mark.parametrize("ann", [NO_ANN, AnnConfig(min_vectors=100)], ids=["exact", "hnsw"])
def test_a_fresh_cache_is_attached_without_reading_the_records_and_ranks_identically(
    store: tuple[Path, list[Chunk], IndexSnapshot], monkeypatch: pytest.MonkeyPatch, ann: AnnConfig
) -> None:
    if ann.min_vectors is not None:
        pytest.importorskip("faiss", reason="the ann extra (faiss-cpu) is in the test extra")
    path, chunks, snapshot = store
    with ChunkVectors(path, model_id=BACKEND.model_id) as vectors:
        first = _channel(vectors, cache=True, ann=ann)
        written = _results(_view(first, snapshot, chunks), snapshot)
        assert first.cache_stats == {"matrix_loads": 0, "matrix_writes": 1, "align_loads": 0, "align_writes": 1, "records_read": N}
    assert Path(f"{path}.matrix").is_file() and Path(f"{path}.align").is_file()
    expected = _uncached(path, snapshot, chunks, ann)
    assert written == expected
    with monkeypatch.context() as patch, ChunkVectors(path, model_id=BACKEND.model_id) as vectors:
        _no_full_read(patch)  # a new process: no record read, no centring computed
        channel = _channel(vectors, cache=True, ann=ann)
        view = _view(channel, snapshot, chunks)
        assert channel.cache_stats == {"matrix_loads": 1, "matrix_writes": 0, "align_loads": 1, "align_writes": 0, "records_read": 0}
        assert not view.matrix.flags.writeable, "the rows are the file's, memory-mapped"
        assert view.centres is not None, "two languages: the stored centring is used"
        assert (view.ann is not None) == (ann.min_vectors is not None)
        assert _results(view, snapshot) == expected
        assert channel.coverage().with_vector == N  # every active chunk, as a records read counts them


def test_new_vectors_are_read_alone_and_the_cache_rewritten(store: tuple[Path, list[Chunk], IndexSnapshot], monkeypatch: pytest.MonkeyPatch) -> None:
    path, chunks, snapshot = store
    with ChunkVectors(path, model_id=BACKEND.model_id) as vectors:
        _view(_channel(vectors, cache=True), snapshot, chunks)
        more = _chunks(N, 30)
        _write(vectors, more, _rows(30, 1))
        _write(vectors, chunks[5:7], _rows(2, 2))  # two vectors rewritten in place
    everything = chunks + more
    bigger = IndexSnapshot([snapshot.segments[0], _segment(more, N, "seg-b")])
    with monkeypatch.context() as patch, ChunkVectors(path, model_id=BACKEND.model_id) as vectors:
        patch.setattr(ChunkVectors, "load_all_with", lambda *_: pytest.fail("a full read for 32 new vectors"))
        channel = _channel(vectors, cache=True)
        view = _view(channel, bigger, everything)
        assert channel.cache_stats["records_read"] == 32 and channel.cache_stats["matrix_writes"] == 1
        assert channel.cache_stats["align_loads"] == 1, "the old segment's alignment is kept"
        incremental = _results(view, bigger)
    expected = _uncached(path, bigger, everything)
    assert incremental == expected
    with monkeypatch.context() as patch, ChunkVectors(path, model_id=BACKEND.model_id) as vectors:
        _no_full_read(patch)
        channel = _channel(vectors, cache=True)
        view = _view(channel, bigger, everything)
        assert channel.cache_stats["matrix_loads"] == 1 and channel.cache_stats["records_read"] == 0
        assert _results(view, bigger) == expected


def test_deleted_vectors_rebuild_the_cache(store: tuple[Path, list[Chunk], IndexSnapshot]) -> None:
    path, chunks, snapshot = store
    with ChunkVectors(path, model_id=BACKEND.model_id) as vectors:
        _view(_channel(vectors, cache=True), snapshot, chunks)
        vectors.delete([c.chunk_id for c in chunks[:40]])
    with ChunkVectors(path, model_id=BACKEND.model_id) as vectors:
        channel = _channel(vectors, cache=True)
        view = _view(channel, snapshot, chunks)
        assert channel.cache_stats["records_read"] == N - 40 and channel.cache_stats["matrix_loads"] == 0
        assert channel.cache_stats["matrix_writes"] == 1
        # the deleted vectors are gone, as after a full read: their chunks were embedded again
        # on the spot (40 is within the lazy limit) and appended as new rows
        assert (view.rows[:40] >= N - 40).all()
        assert _results(view, snapshot) == _uncached(path, snapshot, chunks)


def test_another_model_or_a_recreated_file_is_never_served_from_the_cache(store: tuple[Path, list[Chunk], IndexSnapshot]) -> None:
    path, chunks, snapshot = store
    with ChunkVectors(path, model_id=BACKEND.model_id) as vectors:
        _view(_channel(vectors, cache=True), snapshot, chunks)
    cached = Path(f"{path}.matrix").read_bytes()
    os.remove(path)  # re-embedded from scratch by the same model: same version counter, another file
    with ChunkVectors(path, model_id=BACKEND.model_id) as vectors:
        _write(vectors, chunks, _rows(N, 9))
    with ChunkVectors(path, model_id=BACKEND.model_id) as vectors:
        channel = _channel(vectors, cache=True)
        view = _view(channel, snapshot, chunks)
        assert channel.cache_stats["matrix_loads"] == 0 and channel.cache_stats["records_read"] == N
        assert _results(view, snapshot) == _uncached(path, snapshot, chunks)
    other = DeterministicEmbeddingBackend(dim=DIM + 8)
    os.remove(path)  # another model (and dimension) in the same place
    with ChunkVectors(path, model_id=other.model_id) as vectors:
        vectors.upsert([c.chunk_id for c in chunks], np.ones((N, DIM + 8), dtype=np.float32))
    Path(f"{path}.matrix").write_bytes(cached)  # even the old model's cache put back is refused
    with ChunkVectors(path, model_id=other.model_id) as vectors:
        channel = DenseChannel(other, vectors, ann=NO_ANN, cache_min_vectors=1)
        view = _view(channel, snapshot, chunks)
        assert channel.cache_stats["matrix_loads"] == 0 and view.matrix.shape[1] == DIM + 8


def test_another_lexical_snapshot_recomputes_only_what_changed(store: tuple[Path, list[Chunk], IndexSnapshot]) -> None:
    path, chunks, snapshot = store
    with ChunkVectors(path, model_id=BACKEND.model_id) as vectors:
        _view(_channel(vectors, cache=True), snapshot, chunks)
    active = np.ones(N, dtype=bool)
    active[100:400] = False  # chunks deleted from the store: tombstones change the centring
    for changed in (
        IndexSnapshot(snapshot.segments, active=active),
        IndexSnapshot([_segment(chunks, 0, "seg-rewritten")]),  # a compaction: a new segment name
    ):
        with ChunkVectors(path, model_id=BACKEND.model_id) as vectors:
            channel = _channel(vectors, cache=True)
            view = _view(channel, changed, chunks)
            assert channel.cache_stats["matrix_loads"] == 1 and channel.cache_stats["align_writes"] == 1
            assert _results(view, changed) == _uncached(path, changed, chunks)
        with ChunkVectors(path, model_id=BACKEND.model_id) as vectors:  # and now that one is cached
            channel = _channel(vectors, cache=True)
            assert _results(_view(channel, changed, chunks), changed) == _uncached(path, changed, chunks)
            assert channel.cache_stats["align_writes"] == 0


@pytest.mark.parametrize("damage", ["truncate", "garbage", "flip-ids", "empty"])
def test_a_damaged_cache_is_ignored_loudly_and_rebuilt(
    store: tuple[Path, list[Chunk], IndexSnapshot], caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    path, chunks, snapshot = store
    with ChunkVectors(path, model_id=BACKEND.model_id) as vectors:
        _view(_channel(vectors, cache=True), snapshot, chunks)
    expected = _uncached(path, snapshot, chunks)
    for cache in (Path(f"{path}.matrix"), Path(f"{path}.align")):
        data = bytearray(cache.read_bytes())
        if damage == "truncate":
            data = data[: len(data) - 100]
        elif damage == "garbage":
            data[:64] = os.urandom(64)
        elif damage == "flip-ids":  # inside the first section (the ids / the rows per position)
            data[len(data) // 2 if cache.suffix == ".align" else data.index(b"c00001:0")] ^= 0x01
        else:
            data = bytearray()
        cache.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING), ChunkVectors(path, model_id=BACKEND.model_id) as vectors:
        channel = _channel(vectors, cache=True)
        view = _view(channel, snapshot, chunks)
        assert channel.cache_stats["matrix_loads"] == 0 and channel.cache_stats["records_read"] == N
        assert channel.cache_stats["matrix_writes"] == 1
        assert _results(view, snapshot) == expected
    assert any("cache file" in r.getMessage() and "ignored" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert matrix_cache.read_matrix(f"{path}.matrix") is not None, "rebuilt"


def test_a_damaged_alignment_alone_is_recomputed(store: tuple[Path, list[Chunk], IndexSnapshot], caplog: pytest.LogCaptureFixture) -> None:
    path, chunks, snapshot = store
    with ChunkVectors(path, model_id=BACKEND.model_id) as vectors:
        _view(_channel(vectors, cache=True), snapshot, chunks)
    align = Path(f"{path}.align")
    align.write_bytes(align.read_bytes()[:-10])
    with caplog.at_level(logging.WARNING), ChunkVectors(path, model_id=BACKEND.model_id) as vectors:
        channel = _channel(vectors, cache=True)
        view = _view(channel, snapshot, chunks)
        assert channel.cache_stats["matrix_loads"] == 1 and channel.cache_stats["align_loads"] == 0
        assert channel.cache_stats["align_writes"] == 1
        assert _results(view, snapshot) == _uncached(path, snapshot, chunks)
    assert any("truncated" in r.getMessage() for r in caplog.records)


def test_small_stores_and_in_memory_vectors_get_no_cache(tmp_path: Path) -> None:
    chunks = _chunks(0, 50)
    snapshot = IndexSnapshot([_segment(chunks, 0, "seg-a")])
    with ChunkVectors(tmp_path / "v.sqlite", model_id=BACKEND.model_id) as vectors:
        _write(vectors, chunks, _rows(50, 0))
        _view(DenseChannel(BACKEND, vectors, ann=NO_ANN), snapshot, chunks)  # default: 10,000 vectors and up
    assert not list(tmp_path.glob("*.matrix")) and not list(tmp_path.glob("*.align"))
    with ChunkVectors(None, model_id=BACKEND.model_id) as vectors:
        _write(vectors, chunks, _rows(50, 0))
        channel = DenseChannel(BACKEND, vectors, ann=NO_ANN, cache_min_vectors=1)
        _view(channel, snapshot, chunks)
        assert channel.cache_stats["matrix_writes"] == 0


def test_a_cache_written_under_a_reader_leaves_the_reader_intact(store: tuple[Path, list[Chunk], IndexSnapshot]) -> None:
    path, chunks, snapshot = store
    with ChunkVectors(path, model_id=BACKEND.model_id) as vectors:
        _view(_channel(vectors, cache=True), snapshot, chunks)
    reader = matrix_cache.read_matrix(f"{path}.matrix")
    assert reader is not None
    before = np.array(reader.matrix[:5])
    with ChunkVectors(path, model_id=BACKEND.model_id) as vectors:
        _write(vectors, chunks[:5], _rows(5, 3))  # a rewrite, then a new cache renamed over the old
        _view(_channel(vectors, cache=True), snapshot, chunks)
    assert np.array_equal(reader.matrix[:5], before) and np.array_equal(reader.read_rows(np.arange(5)), before)
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")], "no temporary file left behind"


def test_the_product_path_writes_and_uses_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through `NarrativeIndex` on a persisted store (segments written to disk, named): a second
    process maps the cache and ranks as a process without it."""
    from ragspine.retrieval.model import DocumentMeta
    from ragspine.retrieval.pipeline.narrative_index import NarrativeIndex
    from ragspine.retrieval.store.sqlite import ChunkStore

    db = tmp_path / "chunks.db"
    texts = {f"d{i}": (f"营收 下滑 原因 {i} 海外 需求" if i % 2 else f"revenue fell in quarter {i} because demand weakened") for i in range(40)}

    def ranked(min_vectors: int | None) -> tuple[list[tuple[str, float | None]], dict[str, int]]:
        with ChunkStore(db) as store:
            index = NarrativeIndex(store, embedding_backend=BACKEND)
            assert index.dense is not None
            index.dense.cache_min_vectors = min_vectors
            hits = [(r.chunk.chunk_id, r.vector_score) for q in ("revenue demand", "营收 下滑") for r in index.retrieve(q, top_k=8)]
            return hits, dict(index.dense.cache_stats)

    with ChunkStore(db) as store:
        store.init_schema()
        index = NarrativeIndex(store, embedding_backend=BACKEND)
        for doc_id, text in texts.items():
            index.ingest(text, DocumentMeta(doc_id))
    expected, _ = ranked(None)
    first, stats = ranked(1)
    assert stats["matrix_writes"] == 1 and stats["align_writes"] == 1 and first == expected
    with monkeypatch.context() as patch:
        _no_full_read(patch)
        again, stats = ranked(1)
    assert stats["matrix_loads"] == 1 and stats["align_loads"] == 1 and stats["records_read"] == 0
    assert again == expected


def test_positions_found_without_a_vector_are_looked_up_again_once_vectors_load(
    store: tuple[Path, list[Chunk], IndexSnapshot], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first load that fails (a locked file) aligns every position to "no vector"; the next
    attach loads the vectors and writes the cache, and the same segments must then find them."""
    path, chunks, snapshot = store
    real, calls = ChunkVectors.load_all_with, []

    def locked_once(self: ChunkVectors, *args: object, **kwargs: object) -> object:
        calls.append(1)
        if len(calls) == 1:
            raise sqlite3.OperationalError("database is locked")
        return real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ChunkVectors, "load_all_with", locked_once)
    with ChunkVectors(path, model_id=BACKEND.model_id) as vectors:
        channel = DenseChannel(BACKEND, vectors, ann=NO_ANN, cache_min_vectors=1, lazy_limit=10)
        first = channel.attach(snapshot, ListChunks(chunks))
        assert channel.coverage().with_vector == 0 and channel.coverage().problem is not None
        view = channel.attach(snapshot, ListChunks(chunks))
        assert channel.cache_stats["matrix_writes"] == 1 and first is not view
        assert channel.coverage().with_vector == N and isinstance(view, DenseView) and (view.rows >= 0).all()


def test_a_damaged_vector_rewritten_since_the_cache_is_no_longer_reported(
    store: tuple[Path, list[Chunk], IndexSnapshot],
) -> None:
    path, chunks, snapshot = store
    broken = chunks[1].chunk_id
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE chunk_vector SET crc = crc + 1 WHERE chunk_id = ?", (broken,))
    def reader(vectors: ChunkVectors) -> DenseChannel:  # no lazy embedding: it would repair it
        return DenseChannel(BACKEND, vectors, ann=NO_ANN, cache_min_vectors=1, lazy_limit=0)

    with ChunkVectors(path, model_id=BACKEND.model_id) as vectors:
        channel = reader(vectors)
        _view(channel, snapshot, chunks)
        assert channel.coverage().damaged == 1 and channel.cache_stats["matrix_writes"] == 1
    with ChunkVectors(path, model_id=BACKEND.model_id) as vectors:  # another process re-embeds it
        _write(vectors, [chunks[1]], _rows(2, 9)[:1])
    with ChunkVectors(path, model_id=BACKEND.model_id) as vectors:
        channel = reader(vectors)
        _view(channel, snapshot, chunks)
        assert channel.cache_stats["matrix_loads"] == 1 and channel.cache_stats["records_read"] == 1
        assert channel.coverage().damaged == 0


def test_a_cache_written_by_code_that_encodes_languages_otherwise_is_rebuilt(
    store: tuple[Path, list[Chunk], IndexSnapshot], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragspine.retrieval.vector.dense import channel as channel_module

    path, chunks, snapshot = store
    with ChunkVectors(path, model_id=BACKEND.model_id) as vectors:
        _view(_channel(vectors, cache=True), snapshot, chunks)
    monkeypatch.setattr(channel_module, "CACHE_MEANING", channel_module.CACHE_MEANING + ";another-language-table")
    with ChunkVectors(path, model_id=BACKEND.model_id) as vectors:
        channel = _channel(vectors, cache=True)
        _view(channel, snapshot, chunks)
        assert channel.cache_stats["matrix_loads"] == 0 and channel.cache_stats["records_read"] == N
    cached = matrix_cache.read_matrix(f"{path}.matrix")
    assert cached is not None and cached.key.meaning.endswith(";another-language-table")


def _plant(cache: Path, planted: dict[int, tuple[float, float]], dim: int = DIM) -> None:
    """Overwrite 8 bytes in the middle of each given matrix row of the `.matrix` file in place
    (as a bad disk or a stray write would): two floats no unit vector holds."""
    reader = matrix_cache.read_matrix(str(cache))
    assert reader is not None
    first = reader.read_rows._offset  # noqa: SLF001 - where the rows start in the file
    del reader  # its file is closed with it
    with open(cache, "r+b") as handle:
        for row, values in planted.items():
            handle.seek(first + row * dim * 4 + dim * 2)
            handle.write(np.array(values, dtype="<f4").tobytes())


MIDDLE = N // 2 + 1  # c00601: INTERNAL, so ranked under every filter of `_results`


@pytest.mark.parametrize("ann", [NO_ANN, AnnConfig(min_vectors=100)], ids=["exact", "hnsw"])
def test_flipped_bytes_in_the_middle_of_the_rows_are_detected_and_rebuilt(
    store: tuple[Path, list[Chunk], IndexSnapshot], caplog: pytest.LogCaptureFixture, ann: AnnConfig
) -> None:
    """Issue 40: 8 bytes flipped in the middle of the `.matrix` rows once made another document
    rank first with a cosine of 32; now the row blocks' checksums fail at open (WARNING), search
    ranks from the vectors file exactly as a store without the cache, and the file is rebuilt."""
    path, chunks, snapshot = store
    with ChunkVectors(path, model_id=BACKEND.model_id) as vectors:
        _view(_channel(vectors, cache=True, ann=ann), snapshot, chunks)
    expected = _uncached(path, snapshot, chunks, ann)
    cache = Path(f"{path}.matrix")
    _plant(cache, {MIDDLE: (30.0, 30.0)})
    damaged = cache.read_bytes()
    with caplog.at_level(logging.WARNING), ChunkVectors(path, model_id=BACKEND.model_id) as vectors:
        channel = _channel(vectors, cache=True, ann=ann)
        view = _view(channel, snapshot, chunks)
        assert _results(view, snapshot) == expected
        assert channel.cache_stats["matrix_loads"] == 0 and channel.cache_stats["matrix_writes"] == 1
        assert all(abs(s) <= 1.0001 for _, scores in _results(view, snapshot) for s in scores.values())
    assert any("fails its checksum" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert cache.read_bytes() != damaged
    rebuilt = matrix_cache.read_matrix(str(cache))
    assert rebuilt is not None and abs(float(np.linalg.norm(rebuilt.matrix[MIDDLE])) - 1.0) < 1e-5
    del rebuilt
    with ChunkVectors(path, model_id=BACKEND.model_id) as vectors:  # reopened: the rebuilt file is used
        channel = _channel(vectors, cache=True, ann=ann)
        assert _results(_view(channel, snapshot, chunks), snapshot) == expected
        assert channel.cache_stats["matrix_loads"] == 1 and channel.cache_stats["records_read"] == 0


def test_rows_damaged_under_a_running_channel_never_score_and_are_read_again(
    store: tuple[Path, list[Chunk], IndexSnapshot], caplog: pytest.LogCaptureFixture
) -> None:
    """A `.matrix` file written in place after it was mapped (checked at open, so only a stray
    write can do this): a score outside [-1.0001, 1.0001] is never returned, the channel is
    unhealthy until the next attach re-reads the vectors file, which fixes the answers."""
    path, chunks, snapshot = store
    with ChunkVectors(path, model_id=BACKEND.model_id) as vectors:
        _view(_channel(vectors, cache=True), snapshot, chunks)
    expected = _uncached(path, snapshot, chunks)
    cache = Path(f"{path}.matrix")
    with caplog.at_level(logging.WARNING), ChunkVectors(path, model_id=BACKEND.model_id) as vectors:
        channel = _channel(vectors, cache=True)
        view = _view(channel, snapshot, chunks)
        assert channel.cache_stats["matrix_loads"] == 1
        _plant(cache, {MIDDLE: (30.0, -30.0), MIDDLE + 3: (-30.0, 30.0)})
        found = _results(view, snapshot)
        assert all(abs(s) <= 1.0001 for _, scores in found for s in scores.values())
        assert any("outside" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
        assert channel.coverage().problem is not None, "unhealthy until read again"
        view = _view(channel, snapshot, chunks)
        assert channel.coverage().problem is None and channel.cache_stats["records_read"] == N
        assert _results(view, snapshot) == expected
    rebuilt = matrix_cache.read_matrix(str(cache))
    assert rebuilt is not None, "a whole cache was written again"
    del rebuilt


def test_ragspine_embed_removes_a_damaged_matrix_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    from click.testing import CliRunner

    from ragspine.cli import main

    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(8):
        (docs / f"d{i}.txt").write_text(f"Document {i} says the margin fell {i} points.", "utf-8")
    db = str(tmp_path / "s.db")
    assert CliRunner().invoke(main, ["ingest", str(docs), "--db", db]).exit_code == 0
    monkeypatch.setenv("RAGSPINE_EMBEDDING", "deterministic")
    assert CliRunner().invoke(main, ["embed", "--db", db]).exit_code == 0
    (vectors_file,) = tmp_path.glob("s.db*.vectors.sqlite")
    # a `.matrix` file as a store of 10,000 vectors and more has (written as the channel writes it)
    with ChunkVectors(vectors_file, model_id=DeterministicEmbeddingBackend().model_id) as vectors:
        ids, matrix, languages = vectors.load_all_with(TEXT_LANGUAGE)
        key = matrix_cache.MatrixKey(str(vectors.model_id), int(matrix.shape[1]), vectors.identity()[0], vectors.version())
        matrix_cache.write_matrix(f"{vectors_file}.matrix", key, ids, matrix, np.zeros(len(ids), np.int8), [])
    cache = Path(f"{vectors_file}.matrix")
    _plant(cache, {len(ids) // 2: (30.0, 30.0)}, int(matrix.shape[1]))
    with caplog.at_level(logging.WARNING):
        result = CliRunner().invoke(main, ["embed", "--db", db])
    assert result.exit_code == 0, result.stderr
    assert "removed the damaged" in result.stderr and not cache.exists()
    assert any("fails its checksum" in r.getMessage() for r in caplog.records)
