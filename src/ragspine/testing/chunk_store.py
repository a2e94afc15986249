"""The conformance suite every chunk store runs (SQLite `ChunkStore`, `PostgresChunkStore`, yours).

One suite per Protocol of `ragspine.retrieval.store.protocol`, Haystack-mixin style:
`ChunkReaderSuite`, `ChunkWriterSuite`, `ChangeLogSuite`; `ChunkStoreSuite` is their
combination (the whole `ChunkStoreProtocol`) and is what a store's tests inherit. Each suite
pins down one Protocol's methods; its tests set up and check through the others (a reader test
writes first, a writer test reads back), so they run against a whole store.

Inherit `ChunkStoreSuite` in a `Test*` class and override one fixture, `open_store`: a callable
that opens a new handle (a connection) on ONE fresh, empty store and creates its schema;
the fixture closes every handle it opened (`StoreHandles` does that). Set `write_errors` to the
exception types a failed database write raises, and `read_refusals` to any a refused
`execute_read` may raise besides PermissionError.

    from ragspine.testing.chunk_store import ChunkStoreSuite, StoreHandles

    class TestMyStore(ChunkStoreSuite):
        write_errors = (MyDriverError,)

        @pytest.fixture
        def open_store(self, tmp_path):
            with StoreHandles(lambda: MyStore(tmp_path / "chunks")) as handles:
                yield handles.open

Needs pytest; import this module from tests only.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any, Self

import pytest

from ragspine.retrieval.chunking.chunking import chunk_document
from ragspine.retrieval.model import Chunk, DocumentMeta, index_field_values
from ragspine.retrieval.store.protocol import (
    INDEX_ROW_FIELDS,
    ChangeLog,
    ChunkCounts,
    ChunkReader,
    ChunkStoreProtocol,
    ChunkWriter,
)

Opener = Callable[[], Any]  # () -> a new handle (schema created) on the store under test


class StoreHandles:
    """Opens handles with `opener` (running `init_schema` on each) and closes them all on exit."""

    def __init__(self, opener: Callable[[], Any]) -> None:
        self._opener = opener
        self.opened: list[Any] = []

    def open(self) -> Any:
        store = self._opener()
        self.opened.append(store)
        store.init_schema()
        return store

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for store in self.opened:
            try:
                store.close()
            except Exception:  # noqa: BLE001,S110 - a handle the test closed already
                pass


def chunks(doc_id: str, texts: list[str], **meta: Any) -> list[Chunk]:
    """One chunk per text, numbered from 0, with the given metadata."""
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


class StoreFixtures:
    """The fixtures every suite below shares. See the module docstring for how to inherit them."""

    write_errors: tuple[type[BaseException], ...] = (Exception,)
    read_refusals: tuple[type[BaseException], ...] = ()

    @pytest.fixture
    def open_store(self) -> Iterator[Opener]:
        raise NotImplementedError(
            f"{type(self).__name__} must override the `open_store` fixture: a callable opening a "
            "new handle on one fresh, empty store (see ragspine.testing.chunk_store)"
        )

    @pytest.fixture
    def store(self, open_store: Opener) -> Any:
        return open_store()

    @pytest.fixture
    def second(self, open_store: Opener) -> Opener:
        return open_store


class ChunkReaderSuite(StoreFixtures):
    """`ChunkReader`: chunks by field, every field round-trips, counts, document versions,
    read-only SQL. (Its tests write through `ChunkWriter` to set up.)"""

    def test_implements_chunk_reader(self, store: Any) -> None:
        assert isinstance(store, ChunkReader)
        assert isinstance(store.db_path, str)

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

    def test_a_second_handle_sees_committed_writes(self, store: Any, second: Opener) -> None:
        other = second()
        store.replace_doc_chunks("a", chunks("a", ["x"]))
        assert other.data_version() == store.data_version() == 1
        assert [c.text for c in other.iter_chunks()] == ["x"]
        other.replace_doc_chunks("a", chunks("a", ["y"]))
        assert [(c.text, c.version) for c in store.iter_chunks()] == [("y", 2)]
        assert other.store_uid() == store.store_uid()

    @pytest.mark.parametrize("sql", WRITES)
    def test_execute_read_refuses_writes(self, store: Any, sql: str) -> None:
        store.replace_doc_chunks("a", chunks("a", ["x"]))
        with pytest.raises((PermissionError, *self.read_refusals)):
            store.execute_read(sql)
        assert len(store.iter_chunks()) == 1 and store.data_version() == 1
        store.replace_doc_chunks("b", chunks("b", ["y"]))  # writes still work afterwards
        assert len(store.iter_chunks()) == 2

    def test_execute_read_reads_with_qmark_parameters(self, store: Any) -> None:
        store.replace_doc_chunks("a", chunks("a", ["x", "y?"], entity="ACME"))
        rows = store.execute_read(
            "SELECT text, '?' FROM narrative_chunk WHERE entity = ? AND active = 1 AND text LIKE '%' "
            "ORDER BY seq LIMIT ?",
            ("ACME", 5),
        )
        assert rows == [("x", "?"), ("y?", "?")]

    def test_counts_and_active_documents(self, store: Any) -> None:
        assert store.counts() == ChunkCounts(0, 0) and store.active_doc_ids() == []
        store.replace_doc_chunks("b", chunks("b", ["x", "y"]))
        store.replace_doc_chunks("a", chunks("a", ["z"]))
        store.replace_doc_chunks("C", chunks("C", ["w"]))
        store.replace_doc_chunks("b", chunks("b", ["x2"]))
        store.replace_doc_chunks("a", [])
        assert store.counts() == ChunkCounts(documents=2, chunks=2)
        assert store.counts(include_inactive=True) == ChunkCounts(documents=3, chunks=5)
        assert all(type(n) is int for n in store.counts())
        assert store.active_doc_ids() == ["C", "b"]  # byte order

    def test_versions_of_a_document(self, store: Any) -> None:
        assert (store.active_version("a"), store.latest_version("a")) == (None, 0)
        store.replace_doc_chunks("a", chunks("a", ["x"]))
        store.replace_doc_chunks("b", chunks("b", ["y"]))
        assert (store.active_version("a"), store.latest_version("a")) == (1, 1)
        store.replace_doc_chunks("a", [])
        assert (store.active_version("a"), store.latest_version("a")) == (None, 1)
        store.replace_doc_chunks("a", chunks("a", ["x"]))
        assert (store.active_version("a"), store.latest_version("a")) == (2, 2)
        assert (store.active_version("b"), store.latest_version("b")) == (1, 1)


class ChunkWriterSuite(StoreFixtures):
    """`ChunkWriter`: versions, withdrawals, refused and failed writes (all or nothing),
    concurrent writers, store notes. (Its tests check through `ChunkReader`.)"""

    def test_implements_chunk_writer(self, store: Any) -> None:
        assert isinstance(store, ChunkWriter)

    def test_init_schema_is_idempotent(self, store: Any) -> None:
        store.replace_doc_chunks("a", chunks("a", ["x"]))
        uid, version = store.store_uid(), store.data_version()
        store.init_schema()
        store.init_schema()
        assert (store.store_uid(), store.data_version()) == (uid, version)
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

    def test_sensitivity_is_stored_normalised(self, store: Any) -> None:
        labels = ["ＲＥＳＴＲＩＣＴＥＤ", " restricted\u3000", "Public", ""]
        written = [Chunk(f"a:{i}", "a", i, "t", "a#p1", sensitivity=label) for i, label in enumerate(labels)]
        store.replace_doc_chunks("a", written)
        assert [c.sensitivity for c in store.iter_chunks()] == ["RESTRICTED", "RESTRICTED", "PUBLIC", ""]

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

    def test_concurrent_writers_get_distinct_versions(self, store: Any, second: Opener) -> None:
        others = [second() for _ in range(4)]
        errors: list[BaseException] = []

        def write(handle: Any) -> None:
            try:
                for i in range(5):
                    handle.replace_doc_chunks("a", chunks("a", [f"v{i}"]))
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=write, args=(h,)) for h in others]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        assert store.data_version() == 20
        assert store.changes_since(0) == (20, ["a"])
        assert [c.version for c in store.iter_chunks(include_inactive=True)] == list(range(1, 21))
        assert len(store.iter_chunks()) == 1

    def test_meta_notes_are_kept_and_the_store_keys_are_refused(self, store: Any, second: Opener) -> None:
        store.replace_doc_chunks("a", chunks("a", ["x"]))
        uid, version = store.store_uid(), store.data_version()
        assert store.read_meta("index_settings") is None
        store.write_meta("index_settings", '{"analyzer": "spec"}')
        store.write_meta("index_settings", '{"analyzer": "en-stem"}')
        assert second().read_meta("index_settings") == '{"analyzer": "en-stem"}'
        for key in ("data_version", "store_uid", "changes_from", ""):
            with pytest.raises(ValueError, match="not writable"):
                store.write_meta(key, "99")
        with pytest.raises(ValueError, match="string"):
            store.write_meta("n", 1)
        assert (store.store_uid(), store.data_version()) == (uid, version)  # notes are not chunk changes
        assert store.read_meta("store_uid") == uid


class ChangeLogSuite(StoreFixtures):
    """`ChangeLog`: the change log, the reads by row id an index pages through, write epochs
    and one read snapshot."""

    def test_implements_change_log(self, store: Any) -> None:
        assert isinstance(store, ChangeLog)

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

    def test_index_reads(self, store: Any) -> None:
        store.replace_doc_chunks("a", chunks("a", ["x", "y"], entity="E"))
        store.replace_doc_chunks("b", chunks("b", ["z"], topic="t", metadata={"k": 1}))
        store.replace_doc_chunks("a", chunks("a", ["w"], entity="E"), valid_as_of="2024")
        first = store.active_index_rows(after_row_id=0, limit=1)
        rest = store.active_index_rows(after_row_id=first[-1][0], limit=10)
        assert [r[1] for r in first + rest] == ["b:0", "a:0"]
        assert store.active_index_rows(after_row_id=rest[-1][0], limit=10) == []
        active = {c.chunk_id: c for c in store.iter_chunks()}
        for row in first + rest:
            assert len(row) == len(INDEX_ROW_FIELDS) and isinstance(row[0], int)
            assert (row[2], row[3:]) == (active[row[1]].text, index_field_values(active[row[1]]))
        row_ids = [first[0][0], rest[0][0]]
        assert store.active_fingerprint() == (2, sum(row_ids))
        assert all(type(v) is int for v in store.active_fingerprint())
        states = sorted(store.row_states(["a", "nobody"]))
        assert [a for _, a in states] == [False, False, True] and states[-1][0] == row_ids[1]
        assert store.row_states([]) == []
        assert [r[1] for r in store.index_rows([row_ids[1], 10_000])] == ["a:0"]
        assert store.index_rows([]) == []
        got = store.chunks_by_row_ids([row_ids[1], 10_000, row_ids[0], row_ids[1]])
        assert [c.chunk_id if c else None for c in got] == ["a:0", None, "b:0", "a:0"]
        assert store.chunks_by_row_ids([]) == []

    def test_write_epochs_and_one_read_snapshot(self, store: Any, second: Opener) -> None:
        store.replace_doc_chunks("a", chunks("a", ["x", "y"]))
        store.replace_doc_chunks("a", chunks("a", ["z"]))
        one, two = store.epoch_at(1), store.epoch_at(2)
        assert len(one) == len(two) == 32 and one != two and store.epoch_at(3) == ""
        assert sorted(a for _, a in store.row_states(["a"], active_only=True)) == [True]
        with store.read_snapshot() as view:
            before = (view.data_version(), view.active_fingerprint())
            if store.db_path != ":memory:":  # a second handle sees another in-memory database
                with second() as other:
                    other.replace_doc_chunks("b", chunks("b", ["w"]))
                assert (view.data_version(), view.active_fingerprint()) == before, "one committed state"
        assert store.data_version() == (3 if store.db_path != ":memory:" else 2)

    def test_reads_by_key_take_many_keys(self, store: Any) -> None:
        store.replace_doc_chunks("a", chunks("a", [f"t{i}" for i in range(1_200)]))
        rows = store.active_index_rows(after_row_id=0, limit=5_000)
        row_ids = [r[0] for r in rows]
        assert len(row_ids) == 1_200 and row_ids == sorted(row_ids)
        assert sorted(r[0] for r in store.index_rows(row_ids[::-1])) == row_ids
        got = store.chunks_by_row_ids(row_ids[::-1])
        assert [c.seq if c else None for c in got] == list(range(1_199, -1, -1))
        many_docs = [f"d{i}" for i in range(1_100)] + ["a"]
        assert sorted(store.row_states(many_docs)) == [(r, True) for r in row_ids]


class ChunkStoreSuite(ChunkReaderSuite, ChunkWriterSuite, ChangeLogSuite):
    """The whole chunk-store contract (`ChunkStoreProtocol`): the three suites above, plus
    closing."""

    def test_implements_the_protocol(self, store: Any) -> None:
        assert isinstance(store, ChunkStoreProtocol)
        assert isinstance(store.db_path, str)

    def test_context_manager_closes(self, second: Opener) -> None:
        with second() as other:
            assert other.data_version() == 0
        with pytest.raises(Exception):  # noqa: B017 - each driver has its own "closed" error
            other.data_version()
