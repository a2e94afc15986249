"""Shared fixtures: every store a test opens is closed by the fixture.

The product's default embedding (RAGSPINE_EMBEDDING=auto) is multilingual-e5 when installed,
which embeds a few dozen passages per second on a small machine. Tests run with
RAGSPINE_EMBEDDING=none unless they set it themselves (monkeypatch.setenv/delenv), so only the
tests about the dense channel pay for it; those name their backend explicitly.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ragspine.retrieval.store.sqlite import ChunkStore


@pytest.fixture(autouse=True)
def _bm25_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGSPINE_EMBEDDING", "none")


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "store" / "chunks.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[ChunkStore]:
    chunk_store = ChunkStore(db_path)
    chunk_store.init_schema()
    yield chunk_store
    chunk_store.close()
