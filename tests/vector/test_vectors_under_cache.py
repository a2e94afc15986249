"""A damaged vectors file is noticed although a fresh `.matrix` cache sits beside it (issue 40):
the cache records the vectors file's size and modification time and is checked against a sample
of its records at open; either difference makes the channel read every record again, so a
damaged record is reported (WARNING, `coverage().damaged`, `/stats` healthy: false) and never
ranked, exactly as without a cache (a search re-embeds it on the spot within the lazy limit)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

import ragspine
from ragspine.retrieval.vector.dense import matrix_cache
from ragspine.retrieval.vector.dense.chunk_vectors import ChunkVectors


def _flip_record(vectors_file: Path, chunk_id: str, model_id: str, *, keep_mtime: bool) -> None:
    """Flip 4 bytes inside `chunk_id`'s stored vector, in place (as a disk or a stray writer would)."""
    with ChunkVectors(vectors_file, model_id=model_id) as vectors:
        rows, present = vectors.get([chunk_id])
    assert present.all()
    blob = rows[0].astype("<f4").tobytes()
    data = vectors_file.read_bytes()
    at = data.find(blob)
    assert at > 0 and data.find(blob, at + 1) < 0, "the record's bytes are found once in the file"
    before = vectors_file.stat()
    with open(vectors_file, "r+b") as handle:
        handle.seek(at + 8)
        handle.write(bytes(b ^ 0x5A for b in blob[8:12]))
    if keep_mtime:  # damage that leaves the size and time alone (bit rot): the sample finds it
        os.utime(vectors_file, ns=(before.st_atime_ns, before.st_mtime_ns))


@pytest.mark.parametrize("keep_mtime", [False, True], ids=["file-changed", "same-size-and-time"])
def test_a_damaged_vectors_file_is_reported_with_a_fresh_matrix_beside_it(
    tmp_path: Path, keep_mtime: bool, caplog: pytest.LogCaptureFixture
) -> None:
    settings = {"embedding": "deterministic"}
    texts = {f"d{i}": f"Document {i} says the margin fell {i} points in region {i % 3}." for i in range(30)}
    with ragspine.open(tmp_path, **settings) as ws:
        for doc_id, text in texts.items():
            ws.ingest_text(text, doc_id)
        dense = ws.retriever.index.dense
        assert dense is not None
        dense.cache_min_vectors = 1  # the product writes it from 10,000 vectors on
        ws.search("margin fell", top_k=3)
        assert dense.cache_stats["matrix_writes"] == 1
        vectors_file = Path(dense.vectors.path)  # type: ignore[attr-defined]
        model_id = str(dense.vectors.model_id)
    cached = matrix_cache.read_matrix(f"{vectors_file}.matrix")
    assert cached is not None
    victim = cached.ids[0]  # the first row is always among those sampled
    cached.read_rows.close()
    _flip_record(vectors_file, victim, model_id, keep_mtime=keep_mtime)

    with caplog.at_level(logging.WARNING), ragspine.open(tmp_path, **settings) as ws:
        dense = ws.retriever.index.dense
        assert dense is not None
        dense.cache_min_vectors = 1
        dense.lazy_limit = 0  # else the search re-embeds the damaged chunk at once (a repair)
        ws.search("margin fell", top_k=3)
        assert dense.cache_stats["matrix_loads"] == 0, "the cache is not trusted over a changed vectors file"
        stats = ws.stats()["index"]["dense"]
    assert stats["damaged"] == 1 and stats["healthy"] is False, stats
    assert any(victim in r.getMessage() and "damaged" in r.getMessage() for r in caplog.records)
