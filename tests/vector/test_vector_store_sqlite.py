"""The SQLite vectors file as a vector store in `retrieval.vector.stores`: the conformance suite at
its own path, reading in parts, and the old import path naming the very same objects."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from ragspine.retrieval.vector.dense import chunk_vectors, pending
from ragspine.retrieval.vector.stores import sqlite as sqlite_store
from ragspine.retrieval.vector.stores.inprocess import ChunkVectorStore, VectorStore
from ragspine.retrieval.vector.stores.sqlite import ChunkVectors
from ragspine.testing.vector_store import NewStore, Reopen, VectorStoreSuite


class TestSQLiteVectorStore(VectorStoreSuite):
    @pytest.fixture
    def new_store(self, tmp_path: Path) -> Iterator[NewStore]:
        opened: list[ChunkVectors] = []

        def new_store(dim: int) -> VectorStore:
            opened.append(ChunkVectors(tmp_path / f"s{len(opened)}.vectors.sqlite", model_id="m", dim=dim))
            return opened[-1]

        yield new_store
        for store in opened:
            store.close()

    @pytest.fixture
    def reopen(self) -> Iterator[Reopen]:
        opened: list[ChunkVectors] = []

        def reopen(store: VectorStore) -> VectorStore:
            assert isinstance(store, ChunkVectors)
            opened.append(ChunkVectors(store.path, model_id="m", dim=store.dim))
            return opened[-1]

        yield reopen
        for store in opened:
            store.close()


def test_it_is_a_chunk_vector_store() -> None:
    with ChunkVectors(None, model_id="m") as store:
        assert isinstance(store, ChunkVectorStore)


def test_loading_in_parts_reads_what_one_part_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = np.random.default_rng(3).normal(size=(9, 5)).astype(np.float32)
    ids = [f"c{i}" for i in range(9)]
    with ChunkVectors(tmp_path / "v.sqlite", model_id="m") as store:
        store.upsert(ids, rows, [{"text_language": "en" if i % 2 else "zh"} for i in range(9)])
        whole = store.load_all_with("text_language")
    monkeypatch.setattr(sqlite_store, "LOAD_PART", 2)
    with ChunkVectors(tmp_path / "v.sqlite", model_id="m") as store:
        parts = store.load_all_with("text_language")
    assert parts[0] == whole[0] and parts[2] == whole[2]
    np.testing.assert_array_equal(parts[1], whole[1])


def test_the_old_module_names_the_same_objects() -> None:
    assert chunk_vectors.ChunkVectors is ChunkVectors
    assert chunk_vectors.record_checksums is sqlite_store.record_checksums
    assert chunk_vectors.quarantine_if_damaged is sqlite_store.quarantine_if_damaged
    assert chunk_vectors.VECTORS_SUFFIX == sqlite_store.VECTORS_SUFFIX
    for name in ("embed_chunks", "vector_metadata", "EmbedReport", "BatchEmbedder", "TEXT_LANGUAGE", "check_vectors_for"):
        assert getattr(chunk_vectors, name) is getattr(pending, name)
