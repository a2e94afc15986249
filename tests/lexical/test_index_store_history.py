"""The lexical index follows the store's own history (issue 14, items 11, 13 and 14).

- A rebuild or catch-up reads one consistent state, even with a writer in another process.
- A catch-up costs what changed, not the changed documents' version history.
- A restored, diverged copy of the store beside the old `.bm25/` index is never served by it.
- Warnings name the index folder, a foreign SQLite database is refused untouched.
"""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ragspine.retrieval.lexical.index import store_index
from ragspine.retrieval.lexical.index.store_index import StoreIndex
from ragspine.retrieval.lexical.tokenize import tokenize
from ragspine.retrieval.model import Chunk, DocumentMeta
from ragspine.retrieval.pipeline.narrative_index import NarrativeIndex
from ragspine.retrieval.store.sqlite import ChunkStore, NotAChunkStoreError

X_CHUNKS = 12


def _x_chunks(version: int) -> list[Chunk]:
    return [Chunk(f"x:{version}:{i}", "x", i, f"version{version} part {i}", f"x#p1@{i}") for i in range(X_CHUNKS)]


def _assert_one_version_of_x(store: ChunkStore, index: StoreIndex) -> None:
    snap = index.snapshot()
    every = store.chunks_by_row_ids(snap.row_ids()[snap.active_positions()].tolist())
    rows = [row for row in every if row is not None and row.doc_id == "x"]
    versions = {row.text.split()[0] for row in rows}
    assert len(versions) == 1 and len(rows) == X_CHUNKS, f"mixed versions of x: {sorted(versions)}, {len(rows)} rows"


WRITER = textwrap.dedent(
    """
    import sys
    from ragspine.retrieval.model import Chunk
    from ragspine.retrieval.store.sqlite import ChunkStore
    db, start, stop = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    with ChunkStore(db) as store:
        for v in range(start, stop):
            store.replace_doc_chunks("x", [Chunk(f"x:{v}:{i}", "x", i, f"version{v} part {i}", f"x#p1@{i}")
                                           for i in range(%d)])
    """
    % X_CHUNKS
)


def test_rebuilds_and_catch_ups_never_mix_versions_under_a_writer_in_another_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_index, "PAGE_ROWS", 2)  # many page reads: many chances to interleave
    db = tmp_path / "chunks.db"
    with ChunkStore(db) as store:
        store.init_schema()
        for i in range(6):
            store.replace_doc_chunks(f"d{i}", [Chunk(f"d{i}:0", f"d{i}", 0, f"other text {i}", f"d{i}#p1")])
        store.replace_doc_chunks("x", _x_chunks(0))
        script = tmp_path / "writer.py"
        script.write_text(WRITER)
        writer = subprocess.Popen([sys.executable, str(script), str(db), "1", "400"], env=dict(os.environ))
        try:
            following = StoreIndex(store, tokenize, persist=False)  # catches up as the writer goes
            checks = 0
            while writer.poll() is None or checks < 5:
                _assert_one_version_of_x(store, StoreIndex(store, tokenize, persist=False))  # a rebuild
                _assert_one_version_of_x(store, following)
                checks += 1
        finally:
            writer.wait(timeout=120)
        assert writer.returncode == 0
        assert following.stats["catch_ups"] >= 1


def test_a_catch_up_costs_the_change_not_the_version_history(tmp_path: Path) -> None:
    with ChunkStore(tmp_path / "chunks.db") as store:
        store.init_schema()
        store.replace_doc_chunks("small", [Chunk("s:0", "small", 0, "a small document", "s#p1")])
        for v in range(450):  # a long history: 1,350 inactive rows of one document
            store.replace_doc_chunks("h", [Chunk(f"h:{v}:{i}", "h", i, f"history {v} {i}", f"h#{i}") for i in range(3)])
        index = NarrativeIndex(store)
        index.refresh()
        assert index.lexical_index.stats["builds"] == 1
        with ChunkStore(store.db_path) as other:  # an external change to that document
            other.replace_doc_chunks("h", [Chunk(f"h:new:{i}", "h", i, f"newest {i}", f"h#{i}") for i in range(3)])
        before = index.lexical_index.stats["tokenized"]
        assert [r.chunk.doc_id for r in index.retrieve("newest", rerank=False)] == ["h"] * 3
        stats = index.lexical_index.stats
        assert stats["builds"] == 1 and stats["catch_ups"] == 1, dict(stats)
        assert stats["tokenized"] - before == 6  # three rows added, three removed


def _backup(source: Path, target: Path) -> None:
    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)
    src.close()
    dst.close()


def test_a_restored_diverged_copy_is_never_served_by_the_old_index(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    db = tmp_path / "chunks.db"
    with ChunkStore(db) as store:
        store.init_schema()
        index = NarrativeIndex(store)
        for i in range(3):
            index.ingest(f"shared text {i}", DocumentMeta(f"s{i}"))
        _backup(db, tmp_path / "backup.db")
        for i in range(3):
            index.ingest(f"original alpha {i}", DocumentMeta(f"a{i}"))
        index.refresh()
        version = store.data_version()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    shutil.copy(tmp_path / "backup.db", db)  # the restore; the old .bm25/ index stays beside it
    with ChunkStore(db) as store:
        store.init_schema()
        for i in range(3):  # diverges: same uid, version, row count and row-id sum
            store.replace_doc_chunks(f"b{i}", [Chunk(f"b{i}:0", f"b{i}", 0, f"diverged beta {i}", f"b{i}#p1")])
        assert store.data_version() == version
        index = NarrativeIndex(store)
        with caplog.at_level(logging.WARNING, logger="ragspine.retrieval.lexical.index.store_index"):
            found = {r.chunk.doc_id for r in index.retrieve("diverged beta original alpha", rerank=False)}
        assert found == {"b0", "b1", "b2"}
        assert index.lexical_index.stats["loads"] == 0 and index.lexical_index.stats["diverged"] == 1
        assert "another history" in caplog.text


def test_index_warnings_name_the_folder(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    db = tmp_path / "chunks.db"
    with ChunkStore(db) as store:
        store.init_schema()
        NarrativeIndex(store).ingest("alpha beta", DocumentMeta("a"))
        NarrativeIndex(store).refresh()
    (folder,) = Path(f"{db}.bm25").iterdir()
    (segment,) = folder.glob("seg-*")
    data = bytearray((segment / "docs.npy").read_bytes())
    data[-1] ^= 0xFF
    (segment / "docs.npy").write_bytes(bytes(data))
    with ChunkStore(db) as store, caplog.at_level(logging.WARNING):
        NarrativeIndex(store).refresh()
    assert "is damaged" in caplog.text and str(folder) in caplog.text
    assert "object at" not in caplog.text


@pytest.mark.parametrize(
    "schema",
    [
        "CREATE TABLE narrative_chunk (id INTEGER PRIMARY KEY, body TEXT, owner TEXT)",
        "CREATE TABLE narrative_chunk (chunk_id TEXT, doc_id TEXT, text TEXT, customer_email TEXT)",
        "CREATE TABLE narrative_chunk (title TEXT)",
    ],
)
def test_a_foreign_database_with_a_narrative_chunk_table_is_refused_untouched(tmp_path: Path, schema: str) -> None:
    db = tmp_path / "theirs.db"
    with sqlite3.connect(db) as conn:
        conn.execute(schema)
    conn.close()
    before = db.read_bytes()
    with pytest.raises(NotAChunkStoreError, match="did not create"):
        ChunkStore(db)
    assert db.read_bytes() == before and not Path(f"{db}-wal").exists()
