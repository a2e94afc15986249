"""The specification's path for the versioned SQLite chunk store (body: `retrieval.store.sqlite`)."""

from __future__ import annotations

from ragspine.retrieval.store.sqlite import (
    CHANGES_TABLE,
    META_TABLE,
    TABLE,
    ChunkStore,
    NotAChunkStoreError,
    StoredChunk,
    Transaction,
    iter_chunks_query,
)

__all__ = [
    "CHANGES_TABLE",
    "META_TABLE",
    "TABLE",
    "ChunkStore",
    "NotAChunkStoreError",
    "StoredChunk",
    "Transaction",
    "iter_chunks_query",
]
