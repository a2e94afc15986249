"""Where the chunk vectors file and the embed job used to live; their names, re-exported.

The SQLite vectors file beside a chunk store is a vector store like the others now
(`ragspine.retrieval.vector.stores.sqlite.ChunkVectors`, checked by `VectorStoreSuite`), and
"embed the chunks that have no vector" is written once, in `ragspine.retrieval.vector.dense.pending`
(`embed_chunks`, `vector_metadata`, …). Invariant: this module defines nothing; every name below
is the very object of its new home.
"""

from __future__ import annotations

from ragspine.retrieval.vector.dense.pending import (
    TEXT_LANGUAGE,
    BatchEmbedder,
    EmbedReport,
    check_vectors_for,
    embed_chunks,
    vector_metadata,
)
from ragspine.retrieval.vector.dense.progress import embed_progress
from ragspine.retrieval.vector.errors import VectorFilesDamaged, VectorModelMismatch
from ragspine.retrieval.vector.stores.sqlite import (
    LOAD_PART,
    VECTORS_SUFFIX,
    ChunkVectors,
    quarantine_if_damaged,
    record_checksums,
    remove_vectors_file,
)

__all__ = [
    "LOAD_PART",
    "TEXT_LANGUAGE",
    "VECTORS_SUFFIX",
    "BatchEmbedder",
    "ChunkVectors",
    "EmbedReport",
    "VectorFilesDamaged",
    "VectorModelMismatch",
    "check_vectors_for",
    "embed_chunks",
    "embed_progress",
    "quarantine_if_damaged",
    "record_checksums",
    "remove_vectors_file",
    "vector_metadata",
]
