"""ChunkVectors (persisted per-chunk vectors) and embed_chunks (the ingest batch job)."""

from __future__ import annotations

import doctest
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from ragspine.retrieval.store.sqlite import ChunkStore
from ragspine.retrieval.chunking.chunking import chunk_document
from ragspine.retrieval.model import Chunk, DocumentMeta
from ragspine.retrieval.vector.dense import chunk_vectors
from ragspine.retrieval.vector.embeddings.support import EmbeddingBackendError
from ragspine.retrieval.vector.dense.chunk_vectors import (
    ChunkVectors,
    EmbedReport,
    VectorModelMismatch,
    embed_chunks,
)
from ragspine.retrieval.vector.embeddings.deterministic import (
    DeterministicEmbeddingBackend,
)

MODEL = DeterministicEmbeddingBackend(dim=8).model_id


def _chunks(
    doc_id: str, paragraphs: int, *, sensitivity: str = "INTERNAL", tag: str = ""
) -> list[Chunk]:
    text = "\n\n".join(
        f"{doc_id} {tag} paragraph {i} revenue fell {'x' * (i % 7)}." for i in range(paragraphs)
    )
    meta = DocumentMeta(doc_id, title=doc_id, sensitivity=sensitivity)
    chunks = chunk_document(text, meta, max_chars=60, overlap_chars=0)
    assert len(chunks) == paragraphs  # one chunk per paragraph at this budget
    return chunks


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ChunkStore]:
    with ChunkStore(tmp_path / "chunks.db") as s:
        s.init_schema()
        yield s


def _counts(report: EmbedReport) -> tuple[int, int, int, int]:
    return report.embedded, report.present, report.lexical_only, report.removed


def _active_ids(store: ChunkStore) -> list[str]:
    return [c.chunk_id for c in store.iter_chunks()]


class RecordingBackend:
    """Wraps the deterministic backend: records every batch; can fail on one call."""

    def __init__(self, *, remote: bool = False, fail_on_call: int | None = None) -> None:
        self.inner = DeterministicEmbeddingBackend(dim=8)
        self.model_id = self.inner.model_id
        self.dim = self.inner.dim
        self.is_remote = remote
        self.fail_on_call = fail_on_call
        self.calls: list[list[str]] = []

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        if self.fail_on_call is not None and len(self.calls) == self.fail_on_call:
            raise EmbeddingBackendError("boom", status=503)
        return self.inner.embed_texts(texts)

    @property
    def texts(self) -> list[str]:
        return [t for call in self.calls for t in call]


# -- ChunkVectors ---------------------------------------------------------------------------------
def test_docstring_examples() -> None:
    failures, _ = doctest.testmod(chunk_vectors, optionflags=doctest.ELLIPSIS)
    assert failures == 0


def test_round_trip_across_reopen(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite"
    raw = np.array([[3.0, 4.0, 0.0], [0.0, 0.0, 2.0], [0.0, 0.0, 0.0]])
    with ChunkVectors(path, model_id="m") as vectors:
        assert vectors.dim is None and vectors.count() == 0
        vectors.add(["b", "a", "z"], raw)
        assert vectors.dim == 3
    with ChunkVectors(path, model_id="m") as vectors:  # dim read back from the file
        assert vectors.dim == 3 and vectors.count() == 3
        assert vectors.missing(["a", "q", "b", "q", "y"]) == ["q", "q", "y"]
        rows, present = vectors.get(["a", "q", "b", "z"])
        assert rows.dtype == np.float32 and rows.shape == (4, 3)
        assert present.tolist() == [True, False, True, True]
        np.testing.assert_allclose(rows[0], [0.0, 0.0, 1.0])
        np.testing.assert_allclose(rows[1], 0.0)
        np.testing.assert_allclose(rows[2], [0.6, 0.8, 0.0], rtol=1e-6)
        np.testing.assert_allclose(rows[3], 0.0)  # an all-zero vector stays all zero
        ids, matrix = vectors.load_all()
        assert ids == ["a", "b", "z"]
        assert matrix.dtype == np.float32 and matrix.shape == (3, 3)
        np.testing.assert_allclose(np.linalg.norm(matrix[:2], axis=1), 1.0, rtol=1e-6)
        vectors.add(["a"], [[1.0, 0.0, 0.0]])  # upsert replaces
        np.testing.assert_allclose(vectors.get(["a"])[0][0], [1.0, 0.0, 0.0])
        assert vectors.count() == 3


def test_empty_store_reads() -> None:
    with ChunkVectors(":memory:", model_id="m", dim=4) as vectors:
        ids, matrix = vectors.load_all()
        assert ids == [] and matrix.shape == (0, 4)
        rows, present = vectors.get(["a"])
        assert rows.shape == (1, 4) and not present.any()
        assert vectors.version() == 0 and vectors.retain([]) == 0


def test_model_mismatch_names_both_models_and_the_fix(store: ChunkStore) -> None:
    with ChunkVectors.beside(store, model_id="model-a", dim=4) as vectors:
        vectors.add(["x"], [[1.0, 0, 0, 0]])
        assert vectors.path == f"{store.db_path}.vectors.sqlite"
    with pytest.raises(VectorModelMismatch) as info:
        ChunkVectors.beside(store, model_id="model-b")
    message = str(info.value)
    assert "'model-a'" in message and "'model-b'" in message and "dim 4" in message
    assert f"ragspine embed --db {store.db_path} --reembed" in message
    assert isinstance(info.value, ValueError)


def test_dim_mismatch_on_open_and_on_add(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite"
    with ChunkVectors(path, model_id="m", dim=4) as vectors:
        with pytest.raises(ValueError, match="dimension 3, expected 4"):
            vectors.add(["a"], [[1.0, 2.0, 3.0]])
        assert vectors.count() == 0
    with pytest.raises(VectorModelMismatch) as info:
        ChunkVectors(path, model_id="m", dim=5)
    message = str(info.value)
    assert "dimension 4" in message and "makes 5" in message and "--reembed" in message
    with ChunkVectors(path, model_id="m") as vectors:  # dim None adopts the stored one
        assert vectors.dim == 4


def test_nan_and_bad_shapes_write_nothing(tmp_path: Path) -> None:
    with ChunkVectors(tmp_path / "v.sqlite", model_id="m") as vectors:
        vectors.add(["a"], [[1.0, 0.0]])
        before = vectors.version()
        with pytest.raises(ValueError, match="NaN or infinity"):
            vectors.add(["b", "c"], [[1.0, 0.0], [float("nan"), 1.0]])
        with pytest.raises(ValueError, match="NaN or infinity"):
            vectors.add(["b"], [[float("inf"), 1.0]])
        with pytest.raises(ValueError, match="2 chunk_ids but 1 vectors"):
            vectors.add(["b", "c"], [[1.0, 0.0]])
        with pytest.raises(ValueError, match="not one string"):
            vectors.add("b", [[1.0, 0.0]])  # type: ignore[arg-type]
        assert vectors.missing(["b", "c"]) == ["b", "c"]
        assert vectors.count() == 1 and vectors.version() == before


def test_not_a_vectors_file(store: ChunkStore) -> None:
    with pytest.raises(ValueError, match="not a chunk vectors file"):
        ChunkVectors(store.db_path, model_id="m")


def test_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite"
    ChunkVectors(path, model_id="m").close()
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()


def test_changed_since_reports_adds_and_deletes(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite"
    with ChunkVectors(path, model_id="m", dim=2) as vectors:
        v0 = vectors.version()
        vectors.add(["a", "b", "c"], [[1, 0], [0, 1], [1, 1]])
        v1 = vectors.version()
        assert v1 > v0
        assert vectors.changed_since(v0) == (v1, ["a", "b", "c"], [])
        assert vectors.retain(["a", "c", "unknown"]) == 1
        vectors.add(["d"], [[1, 0]])
    with ChunkVectors(path, model_id="m") as vectors:  # the log survives a reopen
        v3 = vectors.version()
        assert v3 == v1 + 2
        assert vectors.changed_since(v1) == (v3, ["d"], ["b"])
        assert vectors.changed_since(v3) == (v3, [], [])
        vectors.add(["b"], [[1, 0]])  # re-added: no longer reported as deleted
        assert vectors.changed_since(v1) == (v3 + 1, ["b", "d"], [])
        assert vectors.retain(["b"]) == 3
        assert vectors.changed_since(v3 + 1) == (v3 + 2, [], ["a", "c", "d"])
        assert vectors.retain(["b"]) == 0 and vectors.version() == v3 + 2  # no-op: no bump
        with pytest.raises(ValueError, match="load_all"):
            vectors.changed_since(v3 + 10)


def test_catching_up_an_in_memory_matrix(tmp_path: Path) -> None:
    """What changed_since is for: apply the delta and get what load_all would give."""
    rng = np.random.default_rng(0)
    with ChunkVectors(tmp_path / "v.sqlite", model_id="m", dim=4) as vectors:
        vectors.add([f"id{i}" for i in range(20)], rng.normal(size=(20, 4)))
        version = vectors.version()
        ids, matrix = vectors.load_all()
        cache = dict(zip(ids, matrix, strict=True))
        vectors.retain([f"id{i}" for i in range(0, 20, 2)])
        vectors.add(["id3", "new"], rng.normal(size=(2, 4)))
        version, added, deleted = vectors.changed_since(version)
        for cid in deleted:
            cache.pop(cid, None)
        rows, present = vectors.get(added)
        assert present.all()
        cache.update(zip(added, rows, strict=True))
        ids, matrix = vectors.load_all()
        assert sorted(cache) == ids
        np.testing.assert_array_equal(np.stack([cache[i] for i in ids]), matrix)


def test_missing_on_50k_ids(tmp_path: Path) -> None:
    ids = [f"doc{i // 10}:{i % 10}:{i:08x}" for i in range(50_000)]
    have = ids[::3]
    with ChunkVectors(tmp_path / "v.sqlite", model_id="m", dim=2) as vectors:
        vectors.add(have, np.ones((len(have), 2)))
        assert vectors.count() == len(have)
        have_set = set(have)
        assert vectors.missing(ids) == [cid for cid in ids if cid not in have_set]
        rows, present = vectors.get(ids)
        assert int(present.sum()) == len(have) and rows.shape == (50_000, 2)
        assert vectors.retain(ids[:25_000]) == len(have) - len(ids[:25_000:3])


# -- embed_chunks ---------------------------------------------------------------------------------
def test_embeds_every_active_chunk_once(store: ChunkStore) -> None:
    store.replace_doc_chunks("a", _chunks("a", 5))
    store.replace_doc_chunks("b", _chunks("b", 4))
    backend = RecordingBackend()
    with ChunkVectors.beside(store, model_id=backend.model_id) as vectors:
        report = embed_chunks(store, vectors, backend, batch_size=4, progress=False)
        assert isinstance(report, EmbedReport)
        assert _counts(report) == (9, 0, 0, 0)
        assert report.seconds >= 0
        assert [len(call) for call in backend.calls] == [4, 4, 1]
        lengths = [len(t) for t in backend.texts]
        assert lengths == sorted(lengths)  # shortest first: less padding
        assert vectors.missing(_active_ids(store)) == [] and vectors.dim == 8
        by_text = {c.chunk_id: c.text for c in store.iter_chunks()}
        rows, _ = vectors.get(list(by_text))
        expected = DeterministicEmbeddingBackend(dim=8).embed_texts(list(by_text.values()))
        np.testing.assert_allclose(rows, expected, atol=1e-6)

        again = RecordingBackend()
        report = embed_chunks(store, vectors, again, progress=False)
        assert _counts(report) == (0, 9, 0, 0)
        assert again.calls == []


def test_resume_after_a_failed_batch(store: ChunkStore) -> None:
    store.replace_doc_chunks("a", _chunks("a", 10))
    failing = RecordingBackend(fail_on_call=3)
    with ChunkVectors.beside(store, model_id=MODEL) as vectors:
        with pytest.raises(EmbeddingBackendError, match="boom"):
            embed_chunks(store, vectors, failing, batch_size=3, progress=False)
        assert len(failing.calls) == 3
        assert vectors.count() == 6  # the first two batches stayed committed
    with ChunkVectors.beside(store, model_id=MODEL) as vectors:
        rerun = RecordingBackend()
        report = embed_chunks(store, vectors, rerun, batch_size=3, progress=False)
        assert (report.embedded, report.present) == (4, 6)
        assert [len(call) for call in rerun.calls] == [3, 1]
        assert not set(rerun.texts) & set(failing.texts[:6])  # finished batches not redone
        assert vectors.missing(_active_ids(store)) == []


def test_restricted_chunks_never_reach_a_remote_backend(store: ChunkStore) -> None:
    store.replace_doc_chunks("open", _chunks("open", 3))
    store.replace_doc_chunks("secret", _chunks("secret", 2, sensitivity=" restricted "))
    secret_texts = {c.text for c in store.iter_chunks(doc_id="secret")}
    remote = RecordingBackend(remote=True)
    with ChunkVectors(None, model_id=MODEL) as vectors:
        report = embed_chunks(store, vectors, remote, progress=False)
        assert (report.embedded, report.present, report.lexical_only) == (3, 0, 2)
        assert not secret_texts & set(remote.texts) and len(remote.texts) == 3
        assert len(vectors.missing(_active_ids(store))) == 2

        local = RecordingBackend(remote=False)
        report = embed_chunks(store, vectors, local, progress=False)
        assert (report.embedded, report.present, report.lexical_only) == (2, 3, 0)
        assert set(local.texts) == secret_texts
        assert vectors.missing(_active_ids(store)) == []


def test_prune_after_replace_and_withdraw(store: ChunkStore) -> None:
    store.replace_doc_chunks("a", _chunks("a", 3))
    store.replace_doc_chunks("b", _chunks("b", 2))
    backend = DeterministicEmbeddingBackend(dim=8)
    with ChunkVectors.beside(store, model_id=MODEL) as vectors:
        embed_chunks(store, vectors, backend, progress=False)
        old_a = [c.chunk_id for c in store.iter_chunks(doc_id="a")]
        version = vectors.version()

        store.replace_doc_chunks("a", _chunks("a", 3, tag="v2"))  # new text: new chunk_ids
        store.replace_doc_chunks("b", [])  # withdrawn
        kept = embed_chunks(store, vectors, backend, prune=False, progress=False)
        assert (kept.embedded, kept.removed) == (3, 0)
        assert vectors.count() == 8

        report = embed_chunks(store, vectors, backend, progress=False)
        assert (report.embedded, report.present, report.removed) == (0, 3, 5)
        ids, _ = vectors.load_all()
        assert ids == sorted(_active_ids(store))
        _, added, deleted = vectors.changed_since(version)
        assert set(old_a) <= set(deleted) and len(deleted) == 5
        assert sorted(added) == sorted(_active_ids(store))


def test_model_checks_before_any_work(store: ChunkStore) -> None:
    store.replace_doc_chunks("a", _chunks("a", 2))
    backend = RecordingBackend()
    other = ChunkVectors(None, model_id="another-model")
    with other, pytest.raises(VectorModelMismatch, match="another-model.*--reembed"):
        embed_chunks(store, other, backend, progress=False)
    wider = ChunkVectors(None, model_id=MODEL, dim=16)
    with wider, pytest.raises(VectorModelMismatch, match="dimension 16"):
        embed_chunks(store, wider, backend, progress=False)
    assert backend.calls == []
    vectors = ChunkVectors(None, model_id=MODEL)
    with vectors, pytest.raises(ValueError, match="batch_size"):
        embed_chunks(store, vectors, backend, batch_size=0)


def test_progress_bar_counts_chunks(store: ChunkStore, capsys: pytest.CaptureFixture[str]) -> None:
    store.replace_doc_chunks("a", _chunks("a", 3))
    with ChunkVectors(None, model_id=MODEL) as vectors:
        embed_chunks(store, vectors, DeterministicEmbeddingBackend(dim=8), progress=True)
    err = capsys.readouterr().err
    assert "embed" in err and "3/3" in err and "chunk" in err
    with ChunkVectors(None, model_id=MODEL) as vectors:
        embed_chunks(store, vectors, DeterministicEmbeddingBackend(dim=8), progress=False)
    assert capsys.readouterr().err == ""


def test_in_memory_store_gives_in_memory_vectors() -> None:
    with ChunkStore(":memory:") as store:
        store.init_schema()
        store.replace_doc_chunks("a", _chunks("a", 2))
        with ChunkVectors.beside(store, model_id=MODEL) as vectors:
            assert vectors.path == ":memory:"
            backend = DeterministicEmbeddingBackend(dim=8)
            report = embed_chunks(store, vectors, backend, progress=False)
            assert report.embedded == 2 and vectors.count() == 2
