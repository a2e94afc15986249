"""The SQLite ChunkStore: the shared conformance suite, plus what only a SQLite file has."""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragspine.retrieval.chunking import chunk_store as spec_face
from ragspine.retrieval.chunking.chunking import chunk_document
from ragspine.retrieval.model import Chunk, DocumentMeta
from ragspine.retrieval.store.sqlite import ChunkStore, NotAChunkStoreError, StoredChunk
from ragspine.testing.chunk_store import ChunkStoreSuite, Opener, StoreHandles


class TestSQLiteChunkStore(ChunkStoreSuite):
    write_errors = (sqlite3.Error,)
    read_refusals = (sqlite3.ProgrammingError, sqlite3.Warning)  # a statement list

    @pytest.fixture
    def open_store(self, tmp_path: Path) -> Iterator[Opener]:
        with StoreHandles(lambda: ChunkStore(tmp_path / "chunks.db")) as handles:
            yield handles.open


def test_the_specification_path_is_the_sqlite_store(tmp_path: Path) -> None:
    assert spec_face.ChunkStore is ChunkStore and spec_face.StoredChunk is StoredChunk
    with spec_face.ChunkStore(tmp_path / "spec.db") as store:
        store.init_schema()
        assert store.replace_doc_chunks("d", _chunks("d", ["x"])) == 1


def _chunks(doc_id: str, texts: list[str], **meta: str) -> list[Chunk]:
    return [Chunk(f"{doc_id}:{i}", doc_id, i, t, f"{doc_id}#p{i + 1}@0-{len(t)}", **meta)
            for i, t in enumerate(texts)]  # fmt: skip


def test_init_schema_is_idempotent(store: ChunkStore) -> None:
    store.init_schema()
    store.init_schema()
    tables = store.execute_read("SELECT name FROM sqlite_master WHERE type = 'table'")
    assert ("narrative_chunk",) in tables


def test_stored_chunk_defaults() -> None:
    stored = StoredChunk("c", "d", 0, "t", "d#p1@0-1")
    assert (stored.valid_as_of, stored.ingested_at, stored.version, stored.active) == ("", "", 1, True)


def test_replace_versions_and_deactivates(store: ChunkStore) -> None:
    assert store.replace_doc_chunks("a", _chunks("a", ["one", "two"]), valid_as_of="2024-12-31") == 2
    assert store.replace_doc_chunks("a", _chunks("a", ["three"])) == 1
    active = store.iter_chunks(doc_id="a")
    assert [(c.text, c.version, c.active) for c in active] == [("three", 2, True)]
    every = store.iter_chunks(doc_id="a", include_inactive=True)
    assert [(c.text, c.version, c.active) for c in every] == [
        ("one", 1, False), ("two", 1, False), ("three", 2, True),
    ]
    assert every[0].valid_as_of == "2024-12-31" and every[0].ingested_at


def test_empty_list_withdraws(store: ChunkStore) -> None:
    store.replace_doc_chunks("a", _chunks("a", ["x"]))
    store.replace_doc_chunks("b", _chunks("b", ["y"]))
    assert store.replace_doc_chunks("a", []) == 0
    assert [c.doc_id for c in store.iter_chunks()] == ["b"]
    store.replace_doc_chunks("a", _chunks("a", ["back"]))
    assert store.iter_chunks(doc_id="a")[0].version == 2  # max(version) + 1; a withdrawal writes no row


def test_reingest_same_content_is_idempotent_in_effect(store: ChunkStore) -> None:
    chunks = chunk_document("同样的内容。\n\n第二段。", DocumentMeta("a"))
    store.replace_doc_chunks("a", chunks)
    store.replace_doc_chunks("a", chunks)
    assert [c.text for c in store.iter_chunks()] == [c.text for c in chunks]


def test_iter_chunks_filters_are_anded(store: ChunkStore) -> None:
    store.replace_doc_chunks("a", _chunks("a", ["x"], entity="ACME", period="2024", language="zh"))
    store.replace_doc_chunks("b", _chunks("b", ["y"], entity="ACME", period="2023", language="zh"))
    store.replace_doc_chunks("c", _chunks("c", ["z"], entity="OTHER", period="2024", topic="esg",
                                          geography="CN"))  # fmt: skip
    assert [c.doc_id for c in store.iter_chunks(entity="ACME")] == ["a", "b"]
    assert [c.doc_id for c in store.iter_chunks(entity="ACME", period="2024")] == ["a"]
    assert [c.doc_id for c in store.iter_chunks(topic="esg", geography="CN")] == ["c"]
    assert store.iter_chunks(entity="ACME", topic="esg") == []
    assert [c.doc_id for c in store.iter_chunks(language="zh")] == ["a", "b"]


def test_chunk_of_another_document_is_refused(store: ChunkStore) -> None:
    with pytest.raises(ValueError, match="belongs to"):
        store.replace_doc_chunks("a", _chunks("b", ["x"]))
    assert store.iter_chunks(include_inactive=True) == []


def test_failed_write_rolls_back_whole_version(store: ChunkStore) -> None:
    store.replace_doc_chunks("a", _chunks("a", ["old"]))
    version = store.data_version()
    broken = [Chunk("a:0", "a", 0, "new", "loc"), Chunk("a:1", "a", object(), "bad", "loc")]  # type: ignore[arg-type]
    with pytest.raises(sqlite3.Error):
        store.replace_doc_chunks("a", broken)
    assert [(c.text, c.version) for c in store.iter_chunks(include_inactive=True)] == [("old", 1)]
    assert store.data_version() == version


def test_data_version_grows_with_each_write(store: ChunkStore) -> None:
    v0 = store.data_version()
    store.replace_doc_chunks("a", _chunks("a", ["x"]))
    store.replace_doc_chunks("a", [])
    assert store.data_version() == v0 + 2


@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO narrative_chunk (chunk_id) VALUES ('x')",
        "UPDATE narrative_chunk SET active = 0",
        "DELETE FROM narrative_chunk",
        "DROP TABLE narrative_chunk",
        "CREATE TABLE evil (x)",
        "ATTACH DATABASE ':memory:' AS other",
        "PRAGMA journal_mode=DELETE",
        "SELECT 1; DELETE FROM narrative_chunk",
    ],
)
def test_execute_read_refuses_writes(store: ChunkStore, sql: str) -> None:
    store.replace_doc_chunks("a", _chunks("a", ["x"]))
    with pytest.raises((PermissionError, sqlite3.ProgrammingError, sqlite3.Warning)):
        store.execute_read(sql)
    assert len(store.iter_chunks()) == 1


def test_execute_read_reads_with_parameters(store: ChunkStore) -> None:
    store.replace_doc_chunks("a", _chunks("a", ["x", "y"], entity="ACME"))
    rows = store.execute_read(
        "SELECT text FROM narrative_chunk WHERE entity = ? AND active = 1 ORDER BY seq", ("ACME",)
    )
    assert rows == [("x",), ("y",)]
    store.replace_doc_chunks("b", _chunks("b", ["z"]))  # writes still work afterwards


def test_context_manager_closes(db_path: Path) -> None:
    with ChunkStore(db_path) as store:
        store.init_schema()
    with pytest.raises(sqlite3.ProgrammingError):
        store.iter_chunks()


def test_persists_across_handles(db_path: Path) -> None:
    with ChunkStore(db_path) as store:
        store.init_schema()
        store.replace_doc_chunks("a", _chunks("a", ["persisted"]))
    with ChunkStore(db_path) as again:
        again.init_schema()
        assert [c.text for c in again.iter_chunks()] == ["persisted"]


def test_migrates_older_schema_in_place(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    conn = sqlite3.connect(db_path)
    conn.execute(
        "CREATE TABLE narrative_chunk (chunk_id TEXT, doc_id TEXT, seq INTEGER, text TEXT,"
        " source_locator TEXT, title TEXT, version INTEGER)"
    )
    conn.execute("INSERT INTO narrative_chunk VALUES ('a:0', 'a', 0, 'legacy', 'a#p1', 'Old', 1)")
    conn.commit()
    conn.close()
    with ChunkStore(db_path) as store:
        store.init_schema()
        (chunk,) = store.iter_chunks()
        assert (chunk.text, chunk.title, chunk.active, chunk.parent_id, chunk.sensitivity) == (
            "legacy", "Old", True, "", "",
        )
        store.replace_doc_chunks("a", _chunks("a", ["new"]))
        assert [(c.text, c.version) for c in store.iter_chunks()] == [("new", 2)]


def test_refuses_a_file_that_is_not_a_store(tmp_path: Path) -> None:
    text_file = tmp_path / "notes.txt"
    text_file.write_text("hello")
    with pytest.raises(NotAChunkStoreError, match="not a SQLite file"):
        ChunkStore(text_file)
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE customers (id INTEGER)")
    conn.commit()
    conn.close()
    with pytest.raises(NotAChunkStoreError, match="narrative_chunk"):
        ChunkStore(other)
    with pytest.raises(NotAChunkStoreError, match="directory"):
        ChunkStore(tmp_path)


def test_user_metadata_round_trips(store: ChunkStore) -> None:
    meta = DocumentMeta("a", metadata={"pages": 12, "author": "王", "ratio": 0.5})
    store.replace_doc_chunks("a", chunk_document("正文。", meta))
    (chunk,) = store.iter_chunks()
    assert chunk.metadata == {"pages": 12, "author": "王", "ratio": 0.5}


@pytest.mark.parametrize(
    ("metadata", "message"),
    [({"entity": "x"}, "built-in field"), ({"bad key": 1}, "letters"), ({"k": [1]}, "string or a number"),
     ({"k": True}, "string or a number")],
)  # fmt: skip
def test_bad_user_metadata_is_refused(metadata: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DocumentMeta("a", metadata=metadata)


class _ThirdPartyStore(ChunkStore):
    """A store class from outside ragspine, opened by dotted path with the target it was given."""

    def __init__(self, target: str) -> None:
        super().__init__(":memory:")
        self.target = target


def test_the_factory_picks_the_class_from_the_registry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragspine.retrieval.store.factory import (
        CHUNK_STORES,
        open_chunk_store,
        store_kind,
    )

    assert [store_kind(t) for t in ("a.db", "Postgres://h/db", "postgresql://u@h/db")] == [
        "sqlite", "postgres", "postgresql",
    ]  # fmt: skip
    with open_chunk_store(f"sqlite://{tmp_path / 'u.db'}") as store:
        assert isinstance(store, ChunkStore) and store.db_path == str(tmp_path / "u.db")
    with pytest.raises(ValueError) as caught:
        open_chunk_store("mysql://user:secret@h/db")
    assert str(caught.value) == f"unknown chunk store 'mysql'; valid: {CHUNK_STORES.valid()}"
    assert "secret" not in str(caught.value) and "postgresql" in CHUNK_STORES.valid()
    module = type(sys)("thirdparty_store")
    module.MemStore = _ThirdPartyStore  # type: ignore[attr-defined]
    module.NotAStore = str  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "thirdparty_store", module)
    with open_chunk_store("mem://x", store="thirdparty_store:MemStore") as store:
        assert isinstance(store, _ThirdPartyStore) and store.target == "mem://x"
    with pytest.raises(TypeError, match="does not implement ChunkStoreProtocol"):
        open_chunk_store("mem://x", store="thirdparty_store:NotAStore")
