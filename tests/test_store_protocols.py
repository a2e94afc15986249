"""The chunk-store seam is three narrow Protocols and their combination; the conformance suite is
split the same way, and the lexical index needs only the change-log part."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from ragspine.retrieval.lexical.index.store_index import StoreIndex
from ragspine.retrieval.lexical.tokenize import tokenize
from ragspine.retrieval.model import Chunk
from ragspine.retrieval.store.protocol import (
    ChangeLog,
    ChunkReader,
    ChunkStoreProtocol,
    ChunkWriter,
    StoreVersion,
)
from ragspine.retrieval.store.sqlite import ChunkStore
from ragspine.testing.chunk_store import ChangeLogSuite, ChunkReaderSuite, ChunkStoreSuite, ChunkWriterSuite

PARTS = (ChunkReader, ChunkWriter, ChangeLog)


def _members(protocol: type) -> set[str]:
    """The attributes and methods a Protocol declares, its bases' included."""
    ours = [k for k in protocol.__mro__ if k.__module__ == ChunkStoreProtocol.__module__]
    return {
        name for klass in ours for name in (*vars(klass), *vars(klass).get("__annotations__", {}))
        if not name.startswith("_") or name in ("__enter__", "__exit__")
    }


def test_the_store_protocol_is_its_parts_plus_closing() -> None:
    assert all(part in ChunkStoreProtocol.__mro__ for part in PARTS)
    own = _members(ChunkStoreProtocol) - set().union(*(_members(p) for p in PARTS))
    assert own == {"close", "__enter__", "__exit__"}
    shared = (_members(ChunkReader) & _members(ChangeLog)) | (_members(ChunkWriter) & _members(ChunkReader))
    assert shared == _members(StoreVersion) == {"db_path", "data_version"}  # the parts overlap only there


def test_the_suite_is_its_parts(tmp_path: Path) -> None:
    assert all(issubclass(ChunkStoreSuite, part) for part in (ChunkReaderSuite, ChunkWriterSuite, ChangeLogSuite))
    tests = {n for n, _ in inspect.getmembers(ChunkStoreSuite) if n.startswith("test_")}
    for suite in (ChunkReaderSuite, ChunkWriterSuite, ChangeLogSuite):
        assert {n for n in vars(suite) if n.startswith("test_")} <= tests
    with ChunkStore(tmp_path / "c.db") as store:
        assert all(isinstance(store, part) for part in (*PARTS, ChunkStoreProtocol))


class _ChangeLogOnly:
    """A store seen only through `ChangeLog` (and `StoreVersion`): what the lexical index reads."""

    def __init__(self, store: ChunkStore) -> None:
        self._store = store
        self.db_path = store.db_path

    def __getattr__(self, name: str) -> Any:
        if name not in _members(ChangeLog):
            raise AttributeError(f"the lexical index read {name!r}, which is not in ChangeLog")
        return getattr(self._store, name)

    def read_snapshot(self) -> Any:
        return self._store.read_snapshot()


def test_the_lexical_index_reads_only_the_change_log(tmp_path: Path) -> None:
    with ChunkStore(tmp_path / "c.db") as store:
        store.init_schema()
        store.replace_doc_chunks("a", [Chunk("a:0", "a", 0, "revenue fell", "a#p1")])
        view = _ChangeLogOnly(store)
        assert isinstance(view, ChangeLog) and not isinstance(view, ChunkReader)
        index = StoreIndex(view, tokenize, persist=False)
        assert index.snapshot().n_active == 1
        store.replace_doc_chunks("b", [Chunk("b:0", "b", 0, "exports grew", "b#p1")])
        assert index.snapshot().n_active == 2
