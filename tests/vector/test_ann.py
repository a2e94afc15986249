"""The dense channel's HNSW index (faiss, the `ann` extra): exact results below the threshold,
exact scores and high recall above it, persisted beside the vectors and kept up to date,
filters as allowed-position masks with the exact scan for selective ones."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import numpy as np
import pytest

from ragspine.extras import MissingExtraError
from ragspine.retrieval.chunking.chunking import Chunk
from ragspine.retrieval.lexical.index.segment import SegmentBuilder
from ragspine.retrieval.lexical.index.snapshot import IndexSnapshot
from ragspine.retrieval.model import index_field_values
from ragspine.retrieval.pipeline.hybrid import ListChunks
from ragspine.retrieval.vector.dense.ann import AnnConfig, AnnIndex
from ragspine.retrieval.vector.dense.channel import DenseChannel, DenseView
from ragspine.retrieval.vector.dense.chunk_vectors import TEXT_LANGUAGE, ChunkVectors
from ragspine.retrieval.vector.embeddings.deterministic import DeterministicEmbeddingBackend

pytest.importorskip("faiss", reason="the ann extra (faiss-cpu) is in the test extra")

DIM = 32
N = 3_000
BACKEND = DeterministicEmbeddingBackend(dim=DIM)


def _vectors(n: int, seed: int = 0) -> np.ndarray:
    """Clustered unit vectors (like embeddings: neighbourhoods, not uniform noise)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(4, n // 50), DIM)).astype(np.float32)
    rows = centres[rng.integers(0, len(centres), n)] + 0.5 * rng.standard_normal((n, DIM)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return rows


def _corpus(n: int, first: int = 0) -> tuple[list[Chunk], IndexSnapshot]:
    chunks = [Chunk(f"c{i:05d}:0", f"c{i:05d}", 0, f"text {i}", f"c{i}#p1@0-1") for i in range(first, first + n)]
    builder = SegmentBuilder(first=0)
    builder.add([["text", str(i)] for i in range(first, first + n)], chunk_ids=[c.chunk_id for c in chunks])
    return chunks, IndexSnapshot([builder.finish()])


def _write(path: Path | None, chunks: list[Chunk], rows: np.ndarray) -> ChunkVectors:
    vectors = ChunkVectors(path, model_id=BACKEND.model_id)
    vectors.upsert([c.chunk_id for c in chunks], rows, [{"doc_id": c.doc_id, TEXT_LANGUAGE: "en"} for c in chunks])
    return vectors


def _view(channel: DenseChannel, snapshot: IndexSnapshot, chunks: list[Chunk]) -> DenseView:
    view = channel.attach(snapshot, ListChunks(chunks))
    assert isinstance(view, DenseView)
    return view


def _plain(view: DenseView) -> DenseView:
    """The same view with its index taken away: the exact scan."""
    return DenseView(view.backend, view.snapshot, view.rows, view.matrix, view.count, view.groups)


def _exact(view: DenseView, query: np.ndarray, allowed: np.ndarray, depth: int) -> list[int]:
    return _plain(view).rank(query, allowed, depth)[0]


def test_below_the_threshold_no_index_is_built_and_results_are_the_exact_scan(tmp_path: Path) -> None:
    chunks, snapshot = _corpus(N)
    rows = _vectors(N)
    with _write(tmp_path / "v.sqlite", chunks, rows) as vectors:
        channel = DenseChannel(BACKEND, vectors, ann=AnnConfig(min_vectors=N + 1))
        view = _view(channel, snapshot, chunks)
        assert view.ann is None and channel.ann_stats["builds"] == 0
        assert not (tmp_path / "v.sqlite.hnsw").exists()
        allowed = snapshot.active_positions()
        for q in _vectors(20, seed=1):
            ranked, scores = view.rank(q, allowed, 10)
            expected = np.argsort(-(rows @ q), kind="stable")[:10].tolist()  # ids sort like positions
            assert ranked == expected
            assert scores == {p: pytest.approx(float(rows[p] @ q), abs=1e-6) for p in ranked}


def test_above_the_threshold_candidates_are_rescored_exactly_with_high_recall(tmp_path: Path) -> None:
    chunks, snapshot = _corpus(N)
    rows = _vectors(N)
    with _write(tmp_path / "v.sqlite", chunks, rows) as vectors:
        channel = DenseChannel(BACKEND, vectors, ann=AnnConfig(min_vectors=1_000))
        view = _view(channel, snapshot, chunks)
        assert view.ann is not None and channel.ann_stats["builds"] == 1
        allowed = snapshot.active_positions()
        recall = []
        for q in _vectors(50, seed=2):
            ranked, scores = view.rank(q, allowed, 10)
            exact = _exact(view, q, allowed, 10)
            recall.append(len(set(ranked) & set(exact)) / 10)
            # the exact cosine; float32 sums over a subset and the whole matrix may differ in the last bit
            assert scores == pytest.approx(_plain(view).scores_at(q, ranked), abs=1.5e-6)
            assert ranked == sorted(ranked, key=lambda p: (-scores[p], chunks[p].chunk_id))
        assert np.mean(recall) >= 0.98


def test_the_index_is_persisted_reused_and_updated_incrementally(tmp_path: Path) -> None:
    chunks, snapshot = _corpus(N)
    path = tmp_path / "v.sqlite"
    config = AnnConfig(min_vectors=1_000)
    with _write(path, chunks, _vectors(N)) as vectors:
        _view(DenseChannel(BACKEND, vectors, ann=config), snapshot, chunks)
    assert (tmp_path / "v.sqlite.hnsw").is_file()
    more, bigger = _corpus(N + 200)
    new_rows = _vectors(200, seed=5)
    with ChunkVectors(path, model_id=BACKEND.model_id) as vectors:
        channel = DenseChannel(BACKEND, vectors, ann=config)  # a new process
        _view(channel, snapshot, chunks)
        assert channel.ann_stats == {"builds": 0, "loads": 1, "added": 0, "saves": 0}
        vectors.upsert([c.chunk_id for c in more[N:]], new_rows, [{"doc_id": c.doc_id} for c in more[N:]])
        view = _view(channel, bigger, more)  # the 200 new vectors are added, not rebuilt
        assert channel.ann_stats["builds"] == 0 and channel.ann_stats["added"] == 200
        for i, q in enumerate(new_rows[:20]):
            assert view.rank(q, bigger.active_positions(), 5)[0][0] == N + i, "a new vector finds itself"
    with ChunkVectors(path, model_id=BACKEND.model_id) as vectors:
        channel = DenseChannel(BACKEND, vectors, ann=config)
        _view(channel, bigger, more)
        assert channel.ann_stats["builds"] == 0 and channel.ann_stats["loads"] == 1
        assert channel.ann_stats["added"] == 200, "rows the file did not hold yet are added at load"
    with ChunkVectors(path, model_id=BACKEND.model_id) as vectors:  # other graph parameters: rebuilt
        channel = DenseChannel(BACKEND, vectors, ann=AnnConfig(min_vectors=1_000, m=8))
        _view(channel, bigger, more)
        assert channel.ann_stats["builds"] == 1 and channel.ann_stats["loads"] == 0


def test_deleted_chunks_are_never_returned_and_many_deletions_rebuild(tmp_path: Path) -> None:
    chunks, snapshot = _corpus(N)
    rows = _vectors(N)
    with _write(tmp_path / "v.sqlite", chunks, rows) as vectors:
        channel = DenseChannel(BACKEND, vectors, ann=AnnConfig(min_vectors=1_000))
        _view(channel, snapshot, chunks)
        gone = [c.chunk_id for c in chunks[: N // 2]]
        vectors.delete(gone)
        kept, smaller = chunks[N // 2 :], _corpus(N - N // 2, first=N // 2)[1]
        view = _view(channel, smaller, kept)
        assert channel.ann_stats["builds"] == 2, "half the labels dead: rebuilt over the live ones"
        assert view.ann is not None and len(view.ann.label_rows) == N - N // 2
        for q in rows[:20]:  # the deleted vectors themselves: their chunks must not come back
            ranked, _ = view.rank(q, smaller.active_positions(), 10)
            assert all(kept[p].chunk_id not in gone for p in ranked)
            assert ranked == _exact(view, q, smaller.active_positions(), 10)
        # chunks active again (their vectors still in memory) are added back, not lost to the rebuild
        view = _view(channel, snapshot, chunks)
        assert channel.ann_stats["builds"] == 2 and channel.ann_stats["added"] == N // 2
        assert view.rank(rows[3], snapshot.active_positions(), 5)[0][0] == 3


def test_filters_are_masks_and_a_selective_filter_takes_the_exact_scan(tmp_path: Path) -> None:
    chunks, snapshot = _corpus(N)
    rows = _vectors(N)
    with _write(None, chunks, rows) as vectors:
        view = _view(DenseChannel(BACKEND, vectors, ann=AnnConfig(min_vectors=1_000)), snapshot, chunks)
        half = np.arange(0, N, 2)  # a broad filter: ANN candidates, the disallowed ones dropped
        tiny = np.arange(0, N, 97)  # 1%: below min_fraction, the exact scan
        recall = []
        for q in _vectors(30, seed=3):
            ranked, _ = view.rank(q, half, 10)
            assert set(ranked) <= set(half.tolist())
            recall.append(len(set(ranked) & set(_exact(view, q, half, 10))) / 10)
            assert view.rank(q, tiny, 10)[0] == _exact(view, q, tiny, 10)
        assert np.mean(recall) >= 0.98


def test_without_the_extra_the_exact_scan_answers_and_the_extra_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "faiss", None)  # what a missing package looks like to import
    with pytest.raises(MissingExtraError, match=r"pip install 'ragspine\[ann\]'"):
        AnnIndex.build(["a"], np.ones((1, DIM), dtype=np.float32), model_id="m", config=AnnConfig())
    chunks, snapshot = _corpus(1_200)
    rows = _vectors(1_200)
    with _write(None, chunks, rows) as vectors, caplog.at_level(logging.WARNING):
        view = _view(DenseChannel(BACKEND, vectors, ann=AnnConfig(min_vectors=1_000)), snapshot, chunks)
        assert view.ann is None
        assert "ragspine[ann]" in caplog.text
        q = rows[7]
        assert view.rank(q, snapshot.active_positions(), 3)[0][0] == 7


def test_a_damaged_index_file_is_rebuilt(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    chunks, snapshot = _corpus(1_500)
    (tmp_path / "v.sqlite.hnsw").write_bytes(b"not an index")
    with _write(tmp_path / "v.sqlite", chunks, _vectors(1_500)) as vectors, caplog.at_level(logging.WARNING):
        channel = DenseChannel(BACKEND, vectors, ann=AnnConfig(min_vectors=1_000))
        _view(channel, snapshot, chunks)
        assert channel.ann_stats["builds"] == 1 and "cannot be read" in caplog.text
    assert AnnIndex.load(tmp_path / "v.sqlite.hnsw", model_id=BACKEND.model_id, dim=DIM, config=AnnConfig()) is not None
    assert AnnIndex.load(tmp_path / "v.sqlite.hnsw", model_id="another", dim=DIM, config=AnnConfig()) is None


def test_a_truncated_index_inside_a_sound_archive_is_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The index is streamed out of its archive: a member cut short is a read error (logged,
    None: the caller rebuilds), never a half-read index."""
    import zipfile

    chunks, snapshot = _corpus(1_500)
    with _write(tmp_path / "v.sqlite", chunks, _vectors(1_500)) as vectors:
        _view(DenseChannel(BACKEND, vectors, ann=AnnConfig(min_vectors=1_000)), snapshot, chunks)
    path = tmp_path / "v.sqlite.hnsw"
    config = AnnConfig(min_vectors=1_000)
    assert AnnIndex.load(path, model_id=BACKEND.model_id, dim=DIM, config=config) is not None
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    members["index.faiss"] = members["index.faiss"][: len(members["index.faiss"]) // 2]
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    with caplog.at_level(logging.WARNING):
        assert AnnIndex.load(path, model_id=BACKEND.model_id, dim=DIM, config=config) is None
    assert "cannot be read" in caplog.text


def test_bad_configuration_is_refused() -> None:
    with pytest.raises(ValueError, match="ef_search"):
        AnnConfig(ef_search=0)
    with pytest.raises(ValueError, match="min_fraction"):
        AnnConfig(min_fraction=2.0)


def test_embedding_above_the_threshold_builds_and_saves_the_index(tmp_path: Path) -> None:
    from ragspine.retrieval.model import DocumentMeta
    from ragspine.retrieval.pipeline.narrative_index import NarrativeIndex
    from ragspine.retrieval.store.sqlite import ChunkStore

    backend = DeterministicEmbeddingBackend(dim=16)
    with ChunkStore(tmp_path / "s.db") as store:
        store.init_schema()
        index = NarrativeIndex(store, embedding_backend=backend, embed_on_write=False, ann=AnnConfig(min_vectors=20))
        for i in range(30):
            index.ingest(f"document {i} about margin {i}", DocumentMeta(f"d{i}"))
        assert index.embed_pending() is not None
        files = list(tmp_path.glob("s.db*.hnsw"))
        assert len(files) == 1, "the index is built by the embedding pass, not the first search"
        assert index.dense is not None and index.dense.ann_stats["builds"] == 1
        index.close()


def test_restricted_vectors_neither_count_towards_the_threshold_nor_enter_the_index(tmp_path: Path) -> None:
    chunks, _ = _corpus(N)
    chunks = [
        Chunk(c.chunk_id, c.doc_id, c.seq, c.text, c.source_locator, sensitivity="RESTRICTED" if i % 3 == 0 else "INTERNAL")
        for i, c in enumerate(chunks)
    ]
    builder = SegmentBuilder(first=0)
    builder.add([["text", str(i)] for i in range(N)], chunk_ids=[c.chunk_id for c in chunks],
                fields=[index_field_values(c) for c in chunks])  # fmt: skip
    snapshot = IndexSnapshot([builder.finish()])
    visible = N - len(range(0, N, 3))
    rows = _vectors(N)
    with _write(tmp_path / "v.sqlite", chunks, rows) as vectors:
        below = DenseChannel(BACKEND, vectors, ann=AnnConfig(min_vectors=visible + 1))
        assert _view(below, snapshot, chunks).ann is None and below.ann_stats["builds"] == 0
        at = DenseChannel(BACKEND, vectors, ann=AnnConfig(min_vectors=visible))
        view = _view(at, snapshot, chunks)
        assert view.ann is not None and at.ann_stats["builds"] == 1
        assert len(at._ann) == visible  # type: ignore[arg-type]


def test_the_unfiltered_candidate_set_is_one_read_only_array_counted_once(tmp_path: Path) -> None:
    chunks, snapshot = _corpus(N)
    rows = _vectors(N)
    with _write(None, chunks, rows) as vectors:
        view = _view(DenseChannel(BACKEND, vectors, ann=AnnConfig(min_vectors=1_000)), snapshot, chunks)
        allowed = snapshot.allowed_positions({})
        assert allowed is snapshot.allowed_positions(None) and not allowed.flags.writeable
        assert allowed.tolist() == list(range(N))
        copy = allowed.copy()  # writable: counted every time, as before
        for q in _vectors(10, seed=4):
            assert view.rank(q, allowed, 10) == view.rank(q, copy, 10)
        ((kept, count),) = view._counted  # noqa: SLF001 - the remembered count is exact
        assert kept is allowed and count == int(np.count_nonzero(view.rows[copy] >= 0)) == N
        half = np.arange(0, N, 2)
        assert view.rank(_vectors(1, seed=5)[0], half, 10)[0] == view.rank(_vectors(1, seed=5)[0], half.copy(), 10)[0]
        assert view._counted[0][0] is allowed  # noqa: SLF001 - a writable filter set is not remembered
        frozen = half.view()  # read-only, yet its contents change with `half`: never remembered
        frozen.flags.writeable = False
        assert view.rank(_vectors(1, seed=6)[0], frozen, 10) == view.rank(_vectors(1, seed=6)[0], half.copy(), 10)
        assert view._counted[0][0] is allowed  # noqa: SLF001 - only the snapshot's own array is
        assert snapshot.is_unfiltered(allowed) and not snapshot.is_unfiltered(frozen) and not snapshot.is_unfiltered(copy)
