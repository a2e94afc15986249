"""`ragspine ingest` builds the lexical index files beside the store before its embed step, with
the analyzer and index text the searches use: the first search loads them, it never builds."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragspine.assembly import build_retriever, ingest_files, load_settings


def _folder(root: Path, count: int) -> Path:
    root.mkdir()
    for i in range(count):
        (root / f"doc{i}.md").write_text(
            f"# Report {i}\n\nThe ledger of unit {i} recorded a shipping delay.\n\n营收下滑的原因是出口订单减少 {i}。\n",
            "utf-8",
        )
    return root


def _manifests(db: str) -> dict[Path, int]:
    return {path: path.stat().st_mtime_ns for path in Path(db + ".bm25").glob("*/manifest.json")}


@pytest.mark.parametrize(("analyzer", "contextual"), [("auto", "header"), ("spec", "none")])
def test_first_search_after_ingest_loads_the_index_it_built(tmp_path: Path, analyzer: str, contextual: str) -> None:
    db = str(tmp_path / "s.db")
    settings = load_settings({
        "RAGSPINE_DB": db, "RAGSPINE_EMBEDDING": "none", "RAGSPINE_ANALYZER": analyzer,
        "RAGSPINE_CONTEXTUAL": contextual,
    })  # fmt: skip
    report, _ = ingest_files([_folder(tmp_path / "docs", 30)], settings, progress=False)
    assert len(report.ingested) == 30 and report.lexical_index == "built"
    built = _manifests(db)
    assert len(built) == 1  # one index: the searches' analyzer and index text

    retriever, store = build_retriever(settings)
    try:
        lexical = retriever.index.lexical_index
        results = retriever.index.retrieve("shipping delay of unit 7", top_k=3, rerank=False)
        assert results and results[0].chunk.doc_id == "doc7.md"
        assert lexical.last_action == "loaded" and lexical.stats["builds"] == 0 and lexical.stats["loads"] == 1
        assert lexical.stats["tokenized"] == 0  # no chunk was tokenized by the search
    finally:
        retriever.index.close()
        store.close()
    assert _manifests(db) == built  # the search wrote nothing


def test_a_second_ingest_brings_the_files_up_to_date(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    settings = load_settings({"RAGSPINE_DB": db, "RAGSPINE_EMBEDDING": "none"})
    docs = _folder(tmp_path / "docs", 5)
    ingest_files([docs], settings, progress=False)
    (docs / "doc1.md").write_text("# Report 1\n\nA harbour crane collapsed.\n", "utf-8")
    report, _ = ingest_files([docs], settings, progress=False)
    assert report.ingested == ["doc1.md"] and report.lexical_index in ("caught_up", "built")
    retriever, store = build_retriever(settings)
    try:
        results = retriever.index.retrieve("harbour crane", top_k=1, rerank=False)
        assert results[0].chunk.doc_id == "doc1.md"
        assert retriever.index.lexical_index.last_action == "loaded"
        assert retriever.index.lexical_index.stats["builds"] == 0
    finally:
        retriever.index.close()
        store.close()


def test_a_reader_holding_the_old_files_is_safe_while_ingest_rewrites_them(tmp_path: Path) -> None:
    """A search process that mapped the index files keeps reading its snapshot while a later
    `ragspine ingest` writes new ones (new names, the manifest replaced atomically), then moves
    to the new version without distrusting any file."""
    db = str(tmp_path / "s.db")
    settings = load_settings({"RAGSPINE_DB": db, "RAGSPINE_EMBEDDING": "none"})
    docs = _folder(tmp_path / "docs", 20)
    ingest_files([docs], settings, progress=False)
    retriever, store = build_retriever(settings)
    try:
        index = retriever.index
        old = index.retriever()  # the reader's snapshot, over the mapped files
        for i in range(20):  # every document replaced: the index step rebuilds
            (docs / f"doc{i}.md").write_text(f"# Report {i}\n\nA harbour crane at unit {i} collapsed.\n", "utf-8")
        report, _ = ingest_files([docs], settings, progress=False)
        assert len(report.ingested) == 20 and report.lexical_index in ("built", "caught_up")
        assert old.search("shipping delay unit 3", top_k=1)  # the old snapshot still reads its files
        assert index.rank("harbour crane unit 3", top_k=1)[0].chunk.doc_id == "doc3.md"
        assert index.lexical_index.stats["changed_files"] == 0 and index.lexical_index.stats["builds"] == 0
    finally:
        retriever.index.close()
        store.close()
