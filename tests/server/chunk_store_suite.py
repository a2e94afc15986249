"""The conformance suite every chunk store (SQLite `ChunkStore`, `PostgresChunkStore`) runs.

Subclass `ChunkStoreSuite` in a `Test*` class and give it two fixtures:
- `store`: an open, empty store with its schema created;
- `second`: a callable `() -> store` opening another handle (connection) on the same store.
and a class attribute `write_errors`: the exception types a failed database write raises.
The fixtures own cleanup.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ragspine.retrieval.chunking.chunking import chunk_document
from ragspine.retrieval.model import Chunk, DocumentMeta
from ragspine.retrieval.lexical.index.store_reads import (
    active_fingerprint,
    active_pages,
    row_states,
    rows_by_id,
    store_uid,
)

Second = Callable[[], Any]


def chunks(doc_id: str, texts: list[str], **meta: Any) -> list[Chunk]:
    return [Chunk(f"{doc_id}:{i}", doc_id, i, t, f"{doc_id}#p{i + 1}@0-{len(t)}", **meta)
            for i, t in enumerate(texts)]  # fmt: skip


WRITES = [
    "INSERT INTO narrative_chunk (chunk_id) VALUES ('x')",
    "UPDATE narrative_chunk SET active = 0",
    "DELETE FROM narrative_chunk",
    "DROP TABLE narrative_chunk",
    "CREATE TABLE evil (x INTEGER)",
    "UPDATE ragspine_meta SET value = '99' WHERE key = 'data_version'",
    "SELECT 1; DELETE FROM narrative_chunk",
]


class ChunkStoreSuite:
    write_errors: tuple[type[BaseException], ...] = ()

    def test_init_schema_is_idempotent(self, store: Any) -> None:
        store.replace_doc_chunks("a", chunks("a", ["x"]))
        uid, version = store_uid(store), store.data_version()
        store.init_schema()
        store.init_schema()
        assert (store_uid(store), store.data_version()) == (uid, version)
        assert len(uid) == 32 and [c.text for c in store.iter_chunks()] == ["x"]

    def test_versioning(self, store: Any) -> None:
        assert store.replace_doc_chunks("a", chunks("a", ["one", "two"]), valid_as_of="2024-12-31") == 2
        assert store.replace_doc_chunks("a", chunks("a", ["three"])) == 1
        assert [(c.text, c.version, c.active) for c in store.iter_chunks(doc_id="a")] == [("three", 2, True)]
        every = store.iter_chunks(doc_id="a", include_inactive=True)
        assert [(c.text, c.version, c.active) for c in every] == [
            ("one", 1, False), ("two", 1, False), ("three", 2, True),
        ]  # fmt: skip
        assert every[0].valid_as_of == "2024-12-31" and every[0].ingested_at
        assert every[2].valid_as_of == ""

    def test_withdraw_keeps_rows_inactive_and_next_version_continues(self, store: Any) -> None:
        store.replace_doc_chunks("a", chunks("a", ["x"]))
        assert store.replace_doc_chunks("a", []) == 0
        assert store.iter_chunks() == []
        assert [(c.version, c.active) for c in store.iter_chunks(include_inactive=True)] == [(1, False)]
        store.replace_doc_chunks("a", chunks("a", ["y"]))
        assert [(c.text, c.version) for c in store.iter_chunks()] == [("y", 2)]  # a withdrawal writes no rows

    def test_iter_chunks_filters_and_order(self, store: Any) -> None:
        store.replace_doc_chunks("b", chunks("b", ["b0", "b1"], entity="ACME", period="2024"))
        store.replace_doc_chunks("a", chunks("a", ["a0"], entity="ACME", period="2023", language="zh"))
        store.replace_doc_chunks("C", chunks("C", ["c0"], entity="LOTUS", topic="t", geography="CN"))
        assert [c.chunk_id for c in store.iter_chunks()] == ["C:0", "a:0", "b:0", "b:1"]
        assert [c.chunk_id for c in store.iter_chunks(entity="ACME")] == ["a:0", "b:0", "b:1"]
        assert [c.chunk_id for c in store.iter_chunks(entity="ACME", period="2024")] == ["b:0", "b:1"]
        assert [c.chunk_id for c in store.iter_chunks(language="zh")] == ["a:0"]
        assert [c.chunk_id for c in store.iter_chunks(topic="t", geography="CN")] == ["C:0"]
        assert store.iter_chunks(entity="ACME", geography="CN") == []
        assert [c.chunk_id for c in store.iter_chunks(doc_id="b")] == ["b:0", "b:1"]

    def test_stored_chunk_round_trips_every_field(self, store: Any) -> None:
        original = Chunk("d:0", "d", 0, "营收下滑。", "d#p1@0-5", title="T", topic="tp", entity="E",
                         geography="CN", period="2024-H1", language="zh", sensitivity="RESTRICTED",
                         parent_id="d:p0", heading="H", window_text="W", parent_locator="d#p1",
                         metadata={"pages": 12, "author": "王", "ratio": 0.5})  # fmt: skip
        store.replace_doc_chunks("d", [original], valid_as_of="2024-06-30")
        (got,) = store.iter_chunks()
        for name in Chunk.__dataclass_fields__:
            assert getattr(got, name) == getattr(original, name), name
        assert (got.version, got.active, got.valid_as_of) == (1, True, "2024-06-30")

    def test_user_metadata_round_trips(self, store: Any) -> None:
        meta = DocumentMeta("a", metadata={"pages": 12, "author": "王", "ratio": 0.5})
        store.replace_doc_chunks("a", chunk_document("正文。", meta))
        (chunk,) = store.iter_chunks()
        assert chunk.metadata == {"pages": 12, "author": "王", "ratio": 0.5}
        (row,) = store.execute_read("SELECT metadata FROM narrative_chunk")
        assert row == ('{"author": "王", "pages": 12, "ratio": 0.5}',)  # canonical JSON text

    def test_chunk_of_another_document_is_refused(self, store: Any) -> None:
        with pytest.raises(ValueError, match="belongs to"):
            store.replace_doc_chunks("a", chunks("b", ["x"]))
        assert store.iter_chunks(include_inactive=True) == []
        assert store.data_version() == 0

    def test_failed_write_rolls_back_whole_version(self, store: Any) -> None:
        store.replace_doc_chunks("a", chunks("a", ["old"]))
        version = store.data_version()
        bad = Chunk("a:1", "a", object(), "bad", "loc")  # type: ignore[arg-type]
        broken = [Chunk("a:0", "a", 0, "new", "loc"), bad]
        with pytest.raises(self.write_errors):
            store.replace_doc_chunks("a", broken)
        assert [(c.text, c.version, c.active) for c in store.iter_chunks(include_inactive=True)] == [
            ("old", 1, True)
        ]
        assert store.data_version() == version
        assert store.changes_since(version) == (version, [])
        store.replace_doc_chunks("a", chunks("a", ["next"]))  # the store still works
        assert [(c.text, c.version) for c in store.iter_chunks()] == [("next", 2)]

    def test_data_version_and_change_log(self, store: Any) -> None:
        v0 = store.data_version()
        store.replace_doc_chunks("a", chunks("a", ["x"]))
        store.replace_doc_chunks("b", chunks("b", ["y"]))
        store.replace_doc_chunks("a", [])
        assert store.data_version() == v0 + 3
        assert store.changes_since(v0) == (v0 + 3, ["a", "b"])
        assert store.changes_since(v0 + 1) == (v0 + 3, ["b", "a"])
        assert store.changes_since(v0 + 3) == (v0 + 3, [])
        assert store.changes_since(v0 + 4) is None  # a version the store never reached
        assert store.changes_since(v0 - 1) is None  # before the log began

    def test_a_second_handle_sees_committed_writes(self, store: Any, second: Second) -> None:
        other = second()
        store.replace_doc_chunks("a", chunks("a", ["x"]))
        assert other.data_version() == store.data_version() == 1
        assert [c.text for c in other.iter_chunks()] == ["x"]
        other.replace_doc_chunks("a", chunks("a", ["y"]))
        assert [(c.text, c.version) for c in store.iter_chunks()] == [("y", 2)]
        assert store_uid(other) == store_uid(store)

    @pytest.mark.parametrize("sql", WRITES)
    def test_execute_read_refuses_writes(self, store: Any, sql: str) -> None:
        store.replace_doc_chunks("a", chunks("a", ["x"]))
        with pytest.raises((PermissionError, *self.read_refusals())):
            store.execute_read(sql)
        assert len(store.iter_chunks()) == 1 and store.data_version() == 1
        store.replace_doc_chunks("b", chunks("b", ["y"]))  # writes still work afterwards
        assert len(store.iter_chunks()) == 2

    def read_refusals(self) -> tuple[type[BaseException], ...]:
        return ()

    def test_execute_read_reads_with_qmark_parameters(self, store: Any) -> None:
        store.replace_doc_chunks("a", chunks("a", ["x", "y?"], entity="ACME"))
        rows = store.execute_read(
            "SELECT text, '?' FROM narrative_chunk WHERE entity = ? AND active = 1 AND text LIKE '%' "
            "ORDER BY seq LIMIT ?",
            ("ACME", 5),
        )
        assert rows == [("x", "?"), ("y?", "?")]

    def test_the_lexical_index_reads(self, store: Any) -> None:
        store.replace_doc_chunks("a", chunks("a", ["x", "y"], entity="E"))
        store.replace_doc_chunks("b", chunks("b", ["z"]))
        store.replace_doc_chunks("a", chunks("a", ["w"]))
        pages = list(active_pages(store, 1))
        assert [[r[1] for r in page] for page in pages] == [["b:0"], ["a:0"]]
        row_ids = [page[0][0] for page in pages]
        assert active_fingerprint(store) == (2, sum(row_ids))
        assert all(isinstance(v, int) for v in active_fingerprint(store))
        states = sorted(row_states(store, ["a"]))
        assert [a for _, a in states] == [False, False, True]
        assert [r[1] for r in rows_by_id(store, [row_ids[1], 10_000])] == ["a:0"]
        got = store.chunks_by_row_ids([row_ids[1], 10_000, row_ids[0], row_ids[1]])
        assert [c.chunk_id if c else None for c in got] == ["a:0", None, "b:0", "a:0"]
        assert store.chunks_by_row_ids([]) == []

    def test_context_manager_closes(self, second: Second) -> None:
        with second() as other:
            assert other.data_version() == 0
        with pytest.raises(Exception):
            other.data_version()
