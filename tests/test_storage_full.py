"""A full storage is one error, recognised in one place (issue 40, item 3).

`storage_full` recognises SQLite's SQLITE_FULL, PostgreSQL's disk_full (53100), ENOSPC/EDQUOT
and a `StorageFull` along an error's causes; the SQLite store raises a really full file
(`ChunkStore.max_pages`, SQLite's `max_page_count`) as `StorageFull` after its rollback, with
nothing of the write kept and the store writable again once there is room.
"""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

import pytest

from ragspine.errors import RagspineError, StorageFull
from ragspine.retrieval.model import Chunk
from ragspine.retrieval.store.full import storage_full
from ragspine.retrieval.store.sqlite import ChunkStore


def _chunks(doc_id: str, count: int, chars: int) -> list[Chunk]:
    return [Chunk(f"{doc_id}:{n}", doc_id, n, "x" * chars, f"{doc_id}#p1@0-{chars}") for n in range(count)]


def test_storage_full_is_a_ragspine_error_and_an_oserror() -> None:
    assert issubclass(StorageFull, RagspineError) and issubclass(StorageFull, OSError)


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT])
def test_a_full_file_system_is_recognised_without_naming_the_path(code: int) -> None:
    full = storage_full(OSError(code, "No space left on device", "/secret/place/chunks.db.bm25"))
    assert isinstance(full, StorageFull) and "/secret" not in str(full)


def test_other_errors_are_not_a_full_disk() -> None:
    conn = sqlite3.connect(":memory:")
    with pytest.raises(sqlite3.OperationalError) as caught:
        conn.execute("SELECT * FROM missing")
    assert storage_full(caught.value) is None
    assert storage_full(OSError(errno.EACCES, "Permission denied")) is None
    assert storage_full(ValueError("database or disk is full")) is None, "the code decides, not the words"


def test_postgres_disk_full_is_recognised() -> None:
    errors = pytest.importorskip("psycopg.errors")
    full = storage_full(errors.DiskFull('could not extend file "base/1/2": No space left on device'))
    assert full is not None and str(full).startswith("storage full: PostgreSQL disk_full") and "base/" not in str(full)


def test_a_cause_and_an_existing_storage_full_are_recognised() -> None:
    made = StorageFull("storage full: test")
    assert storage_full(made) is made
    with pytest.raises(RuntimeError) as wrapped:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as exc:
            raise RuntimeError("the index could not be saved") from exc
    assert isinstance(storage_full(wrapped.value), StorageFull)


def test_a_really_full_sqlite_store_raises_storage_full_and_keeps_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ChunkStore, "max_pages", 32)
    with ChunkStore(tmp_path / "s.db") as store:
        store.init_schema()
        assert store.replace_doc_chunks("a", _chunks("a", 1, 50)) == 1
        version = store.data_version()
        with pytest.raises(StorageFull, match="database or disk is full") as raised:
            store.replace_doc_chunks("b", _chunks("b", 100, 2_000))
        assert isinstance(raised.value.__cause__, sqlite3.OperationalError)
        assert store.active_version("b") is None and store.data_version() == version
        assert [c.doc_id for c in store.iter_chunks()] == ["a"]
        assert store.replace_doc_chunks("c", _chunks("c", 1, 50)) == 1, "a write that fits still goes in"
