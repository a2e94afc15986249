"""Shared fixtures: every store a test opens is closed by the fixture."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ragspine.retrieval.chunking.chunk_store import ChunkStore


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "store" / "chunks.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[ChunkStore]:
    chunk_store = ChunkStore(db_path)
    chunk_store.init_schema()
    yield chunk_store
    chunk_store.close()
