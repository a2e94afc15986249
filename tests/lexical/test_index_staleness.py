"""An index that is stale, damaged, foreign or inconsistent with its store is detected and
caught up or rebuilt — never served."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from ragspine.retrieval.store.sqlite import ChunkStore
from ragspine.retrieval.model import DocumentMeta
from ragspine.retrieval.pipeline.narrative_index import NarrativeIndex

from index_helpers import assert_same_ranking, ranked, reference_scores

TEXTS = {f"d{i}": f"alpha beta {'gamma ' * i}营收下滑 doc{i}" for i in range(6)}


@pytest.fixture
def built(store: ChunkStore) -> NarrativeIndex:
    index = NarrativeIndex(store)
    for doc_id, text in TEXTS.items():
        index.ingest(text, DocumentMeta(doc_id))
    index.refresh()
    return index


def _agrees(index: NarrativeIndex, query: str = "gamma 营收 doc3") -> None:
    got = [(r.chunk.chunk_id, r.bm25_score) for r in index.retrieve(query, rerank=False)]
    assert_same_ranking(got, ranked(reference_scores(index.store, query), 50))


def _folder(db_path: Path) -> Path:
    (folder,) = Path(f"{db_path}.bm25").iterdir()
    return folder


def _reopen(db_path: Path) -> tuple[ChunkStore, NarrativeIndex]:
    store = ChunkStore(db_path)
    store.init_schema()
    return store, NarrativeIndex(store)


def test_a_write_through_another_handle_is_caught_up(built: NarrativeIndex, db_path: Path) -> None:
    with ChunkStore(db_path) as other:
        other_index = NarrativeIndex(other)
        other_index.ingest("gamma gamma delta", DocumentMeta("new"))
        other_index.withdraw("d2")
    _agrees(built)
    assert built.lexical_index.stats["catch_ups"] == 1
    assert built.lexical_index.stats["builds"] == 1
    assert not any(r.chunk.doc_id == "d2" for r in built.retrieve("gamma", rerank=False))


@pytest.mark.parametrize("damage", ["flip", "truncate", "delete_array", "delete_manifest"])
def test_damaged_files_are_rebuilt(built: NarrativeIndex, db_path: Path, damage: str) -> None:
    folder = _folder(db_path)
    (segment,) = folder.glob("seg-*")
    docs = segment / "docs.npy"
    if damage == "flip":
        data = bytearray(docs.read_bytes())
        data[-1] ^= 0xFF
        docs.write_bytes(bytes(data))
    elif damage == "truncate":
        docs.write_bytes(docs.read_bytes()[:-4])
    elif damage == "delete_array":
        docs.unlink()
    else:
        (folder / "manifest.json").unlink()
    store, index = _reopen(db_path)
    try:
        _agrees(index)
        assert index.lexical_index.stats["builds"] == 1
        assert index.lexical_index.stats["loads"] == 0
        # ...and the rebuilt files serve the next process.
        store2, index2 = _reopen(db_path)
        with store2:
            _agrees(index2)
            assert index2.lexical_index.stats["loads"] == 1
    finally:
        store.close()


def test_a_replaced_store_never_gets_the_old_index(built: NarrativeIndex, db_path: Path) -> None:
    version = built.store.data_version()
    built.store.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db_path}{suffix}").unlink(missing_ok=True)
    store, index = _reopen(db_path)
    with store:
        for i in range(version):  # same data_version, other content
            index.ingest(f"zeta eta doc{i}", DocumentMeta(f"e{i}"))
        assert store.data_version() == version
        _agrees(index, "zeta doc1")
        assert index.lexical_index.stats["loads"] == 0
        assert all(r.chunk.doc_id.startswith("e") for r in index.retrieve("doc1", rerank=False))


def test_a_gap_in_the_change_log_forces_a_rebuild(built: NarrativeIndex, db_path: Path) -> None:
    conn = sqlite3.connect(db_path)  # a writer that bumps the version without logging
    with conn:
        conn.execute("UPDATE narrative_chunk SET active = 0 WHERE doc_id = 'd1'")
        conn.execute(
            "UPDATE ragspine_meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'data_version'"
        )
    conn.close()
    _agrees(built)
    assert built.lexical_index.stats["builds"] == 2
    assert not any(r.chunk.doc_id == "d1" for r in built.retrieve("gamma", rerank=False))


def test_an_index_inconsistent_with_its_store_is_rebuilt(built: NarrativeIndex, db_path: Path) -> None:
    conn = sqlite3.connect(db_path)  # content changed behind the version counter's back
    with conn:
        conn.execute("UPDATE narrative_chunk SET active = 0 WHERE doc_id = 'd4'")
    conn.close()
    store, index = _reopen(db_path)
    with store:
        _agrees(index)
        assert index.lexical_index.stats["inconsistent"] == 1
        assert index.lexical_index.stats["builds"] == 1


def test_a_manifest_ahead_of_the_store_is_not_served(built: NarrativeIndex, db_path: Path) -> None:
    manifest_path = _folder(db_path) / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["data_version"] += 5
    manifest_path.write_text(json.dumps(manifest))
    store, index = _reopen(db_path)
    with store:
        _agrees(index)
        assert index.lexical_index.stats["loads"] == 0
        assert index.lexical_index.stats["builds"] == 1


def shout(text: str) -> list[str]:
    """A different analyzer: whitespace words, upper-cased."""
    return text.upper().split()


def test_an_index_of_another_analyzer_is_not_served(built: NarrativeIndex, db_path: Path) -> None:
    with ChunkStore(db_path) as other:
        index = NarrativeIndex(other, analyzer=shout)
        got = [(r.chunk.chunk_id, r.bm25_score) for r in index.retrieve("GAMMA", rerank=False)]
        assert_same_ranking(got, ranked(reference_scores(other, "GAMMA", analyzer=shout), 50))
        assert index.lexical_index.stats["builds"] == 1
        assert index.lexical_index.stats["loads"] == 0
    assert len(list(Path(f"{db_path}.bm25").iterdir())) == 2  # one folder per analyzer
