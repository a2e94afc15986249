"""Duplicates are known (issue 38 item 6): a copy of a stored file is recorded, searchable once, both
paths in the lineage; a sub-folder ingest of a stored file reuses its doc_id; --prune handles both;
an older registry opens and migrates. Real files: tests/fixtures/realfolder/duplicates/."""

from __future__ import annotations

import shutil
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

import ragspine
from ragspine.assembly import ingest_files, load_settings
from ragspine.ingest.pipeline import IngestRunReport
from ragspine.ingest.registry import DUPLICATE, DocumentRegistry
from ragspine.retrieval.store.sqlite import ChunkStore

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "realfolder" / "duplicates"
LAW, LAW_COPY = "law/archive_rules.txt", "saved/archive_rules (copy).txt"
PDF, PDF_COPY = "reports/q3.pdf", "reports/q3_copy.pdf"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return Path(shutil.copytree(FIXTURE, tmp_path / "duplicates"))


def ingest_paths(paths: list[Path], db: str, **options: object) -> IngestRunReport:
    """`ragspine ingest PATHS` as the CLI runs it (the workspace's settings), without its output."""
    return ingest_files(paths, load_settings(flags={"RAGSPINE_DB": db}), progress=False, **options)[0]


def _active(db: Path) -> set[str]:
    with ChunkStore(str(db)) as store:
        return {chunk.doc_id for chunk in store.iter_chunks()}


def _rows(db: Path) -> dict[str, tuple[str, str]]:
    with DocumentRegistry(db) as registry:
        return {row.doc_id: (row.status, row.duplicate_of) for row in registry.all()}


def test_a_copy_is_recorded_once_and_searchable_once_with_both_paths(folder: Path, tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    report = ingest_paths([folder], str(db))
    assert sorted(report.duplicates) == sorted([LAW_COPY, PDF_COPY])
    assert report.duplicate_of == {LAW_COPY: LAW, PDF_COPY: PDF} and not report.failures
    assert _active(db) == {LAW, "notes.md", PDF}  # each content stored once
    assert _rows(db)[LAW_COPY] == (DUPLICATE, LAW)
    assert "duplicate: saved/archive_rules (copy).txt (a copy of law/archive_rules.txt)" in report.summary_table()
    with ragspine.open(str(db)) as ws:
        hits = ws.search("借阅档案 借阅登记表", top_k=5)
        law_hits = [s for s in hits if "借阅登记表" in s["text"]]
        assert len(law_hits) == 1, "one copy takes one slot in the top k"
        assert law_hits[0]["doc_id"] == LAW and law_hits[0]["lineage"]["duplicates"] == [LAW, LAW_COPY]
        pdf = ws.search("digitisation paper holdings", top_k=5)
        assert [s["lineage"].get("duplicates") for s in pdf if s["doc_id"] == PDF][0] == [PDF, PDF_COPY]
        assert all(s["doc_id"] != PDF_COPY for s in pdf)
        notes = ws.search("basement humidity", top_k=3)
        assert notes and "duplicates" not in notes[0]["lineage"]  # a file without a copy: no key
    again = ingest_paths([folder], str(db))
    assert sorted(again.unchanged) == [LAW, "notes.md", PDF]
    assert sorted(again.duplicates) == sorted([LAW_COPY, PDF_COPY])
    assert again.ingested == [] and again.chunks == 0


def test_prune_of_the_original_stores_the_copy_and_prune_of_a_copy_withdraws_it(folder: Path, tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    ingest_paths([folder], str(db))
    (folder / LAW).unlink()
    (folder / PDF_COPY).unlink()
    report = ingest_paths([folder], str(db), prune=True)
    assert sorted(report.withdrawn) == sorted([LAW, PDF_COPY])
    assert LAW_COPY in report.ingested, "the copy is stored once its original is gone"
    assert _active(db) == {LAW_COPY, "notes.md", PDF}
    rows = _rows(db)
    assert rows[LAW] == ("withdrawn", "") and rows[PDF_COPY][0] == "withdrawn" and rows[LAW_COPY] == ("active", "")
    with ragspine.open(str(db)) as ws:
        assert [s["doc_id"] for s in ws.search("借阅登记表", top_k=3)][:1] == [LAW_COPY]


def test_a_changed_original_lets_its_copy_be_stored(folder: Path, tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    ingest_paths([folder], str(db))
    (folder / LAW).write_text("档案室管理办法（修订）\n\n第一条　本办法已修订。", "utf-8")
    report = ingest_paths([folder], str(db))
    assert LAW in report.ingested and LAW_COPY in report.ingested and LAW_COPY not in report.duplicates
    assert {LAW, LAW_COPY} <= _active(db)


def test_a_sub_folder_ingest_of_a_stored_file_keeps_its_doc_id(folder: Path, tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    ingest_paths([folder], str(db))
    sub = ingest_paths([folder / "law"], str(db))
    assert sub.unchanged == [LAW] and sub.ingested == [] and "archive_rules.txt" not in _rows(db)
    (folder / LAW).write_text("档案室管理办法\n\n第一条　新的文本。", "utf-8")
    changed = ingest_paths([folder / "law"], str(db))
    assert changed.changed == [LAW], "a new version of the same doc_id"
    assert changed.ingested == [LAW, LAW_COPY], "its copy, no longer a duplicate, is stored at the run's end"
    assert "archive_rules.txt" not in _rows(db) and LAW in _active(db)
    (folder / LAW).unlink()
    pruned = ingest_paths([folder / "law"], str(db), prune=True)
    assert pruned.withdrawn == [LAW], "--prune of the sub-folder withdraws the file found under its parent"


def test_prune_folds_a_file_an_older_store_registered_twice(folder: Path, tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    ingest_paths([folder / "law"], str(db))
    with DocumentRegistry(db) as registry:  # what an older release left: the same file under a second doc_id
        row = registry.get("archive_rules.txt")
        assert row is not None
        registry.record(replace(row, doc_id=LAW, root=str(folder.resolve()), ingest_key="older"))
    report = ingest_paths([folder], str(db), prune=True)
    assert LAW in report.ingested and report.withdrawn == ["archive_rules.txt"], report
    rows = _rows(db)
    assert rows[LAW] == ("active", "") and rows["archive_rules.txt"][0] == "withdrawn"
    assert LAW in _active(db) and "archive_rules.txt" not in _active(db)


def test_an_older_registry_opens_migrates_and_keeps_its_rows(folder: Path, tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    ChunkStore(str(db)).init_schema()
    old_schema = """CREATE TABLE ragspine_document (
        doc_id TEXT PRIMARY KEY, root TEXT NOT NULL, source_path TEXT NOT NULL, content_hash TEXT NOT NULL,
        ingest_key TEXT NOT NULL, version INTEGER NOT NULL, chunks INTEGER NOT NULL, status TEXT NOT NULL,
        loader TEXT NOT NULL DEFAULT '', encoding TEXT NOT NULL DEFAULT '', pages INTEGER NOT NULL DEFAULT 0,
        size_bytes INTEGER NOT NULL DEFAULT 0, metadata TEXT NOT NULL DEFAULT '{}', ingested_at TEXT NOT NULL)"""
    with sqlite3.connect(db) as conn:  # the table as the previous release created it
        conn.execute(old_schema)
        conn.execute(
            "INSERT INTO ragspine_document VALUES ('old.md', '/r', '/r/old.md', 'h', 'k', 1, 2, 'active', "
            "'markdown', 'utf-8', 0, 10, '{\"sensitivity\": \"INTERNAL\"}', '2025-01-01T00:00:00+00:00')"
        )
    with DocumentRegistry(db) as registry:
        old = registry.get("old.md")
        assert old is not None and old.chunks == 2 and old.text_hash == "" and old.duplicate_of == ""
        assert registry.duplicates() == [] and registry.failures() == {}
    with sqlite3.connect(db) as conn:
        columns = {row[1] for row in conn.execute("PRAGMA table_info(ragspine_document)")}
    assert {"text_hash", "duplicate_of"} <= columns
    report = ingest_paths([folder], str(db))
    assert not report.failures and report.duplicate_of == {LAW_COPY: LAW, PDF_COPY: PDF}
    with DocumentRegistry(db) as registry:  # a second open finds nothing to migrate
        assert registry.get("old.md") == old
        assert registry.get(LAW) is not None and registry.get(LAW).text_hash  # type: ignore[union-attr]


def test_an_original_relabelled_stricter_takes_its_duplicates_with_it(folder: Path, tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    ingest_paths([folder], str(db))
    with ragspine.open(str(db)) as ws:  # the owner raises the stored copy's label
        ws.ingest(folder / LAW, doc_id=LAW, sensitivity="RESTRICTED")
        assert ws.search("借阅登记表", top_k=5) == [], "neither copy is served"
    report = ingest_paths([folder], str(db))
    [failure] = report.failures  # the duplicate, read again, would be lower than its content's label
    assert failure.path == folder / LAW_COPY and "labelled RESTRICTED" in failure.reason
    with ragspine.open(str(db)) as ws:
        assert ws.search("借阅登记表", top_k=5) == []


def test_an_original_replaced_through_the_workspace_no_longer_names_its_copies(folder: Path, tmp_path: Path) -> None:
    """A copy is listed only while its content equals its document's: after `ingest_text` replaces
    the original (as POST /documents with `replace` does), the copy is no copy of the new text."""
    db = tmp_path / "s.db"
    ingest_paths([folder], str(db))
    with ragspine.open(str(db)) as ws:
        before = [s for s in ws.search("借阅登记表", top_k=5) if s["doc_id"] == LAW]
        assert before[0]["lineage"]["duplicates"] == [LAW, LAW_COPY]
        label = before[0]["sensitivity"]
        ws.ingest_text("Kestrel widgets note, replaced.", LAW, existing="replace_visible", sensitivity=label)
        after = [s for s in ws.search("Kestrel widgets note", top_k=5) if s["doc_id"] == LAW]
        assert after and after[0]["sensitivity"] == label
        assert "duplicates" not in after[0]["lineage"]
