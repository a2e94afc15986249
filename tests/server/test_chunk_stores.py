"""The chunk-store conformance suite on PostgreSQL (SQLite runs it in tests/test_store.py), the
factory, and NarrativeIndex over both stores."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ragspine.retrieval.model import DocumentMeta
from ragspine.retrieval.pipeline.narrative_index import NarrativeIndex
from ragspine.retrieval.store.factory import is_postgres_url, open_chunk_store
from ragspine.retrieval.store.postgres import PostgresChunkStore, qmark_to_format
from ragspine.retrieval.store.sqlite import ChunkStore
from ragspine.testing.chunk_store import ChunkStoreSuite, Opener, StoreHandles


class TestPostgresChunkStore(ChunkStoreSuite):
    write_errors = (psycopg.Error,)
    read_refusals = (psycopg.errors.SyntaxError,)  # a statement list: "cannot insert multiple commands"

    @pytest.fixture
    def open_store(self, pg_url: str) -> Iterator[Opener]:
        with StoreHandles(lambda: open_chunk_store(pg_url)) as handles:
            yield handles.open

    def test_opened_by_the_factory(self, store: Any) -> None:
        assert isinstance(store, PostgresChunkStore)

    def test_repr_hides_credentials(self, store: Any) -> None:
        assert "postgres@" not in repr(store) and "PostgresChunkStore(host=" in repr(store)


def test_open_chunk_store_picks_by_target(tmp_path: Path) -> None:
    assert is_postgres_url("postgresql://u@h/db") and is_postgres_url("postgres://h/db")
    assert not is_postgres_url(str(tmp_path / "x.db")) and not is_postgres_url(tmp_path)
    with open_chunk_store(tmp_path / "x.db") as store:
        assert isinstance(store, ChunkStore)


def test_qmark_translation() -> None:
    assert qmark_to_format("SELECT a FROM t WHERE b IN (?, ?) AND c = '?' AND d LIKE 'x%'") == (
        "SELECT a FROM t WHERE b IN (%s, %s) AND c = '?' AND d LIKE 'x%%'"
    )
    assert qmark_to_format('SELECT "we?ird" FROM t WHERE x = ?') == 'SELECT "we?ird" FROM t WHERE x = %s'


DOCS = [
    ("r1", "营收下滑的原因是出口减少，海外订单下降。", {"entity": "ACME_CN", "period": "2024"}),
    ("r2", "Revenue fell because exports declined and overseas orders dropped.",
     {"entity": "ACME_HK", "period": "2023"}),
    ("r3", "净利润增长来自成本控制。Net profit grew thanks to cost control.",
     {"entity": "ACME_CN", "period": "2023"}),
    ("r4", "The board approved a new dividend policy for 2024.", {"entity": "LOTUS", "period": "2024"}),
    ("r5", "出口减少导致库存上升，管理层计划削减产能。", {"entity": "LOTUS", "period": "2024-H1"}),
]  # fmt: skip
QUERIES = ["营收 出口", "exports revenue", "cost control 成本", "dividend", "库存 产能", "nothing-matches-this"]


def _ranked(index: NarrativeIndex, query: str, **kw: Any) -> list[tuple[str, str, float, float]]:
    return [(r.chunk.chunk_id, r.chunk.text, round(r.bm25_score, 9), round(r.fused_score, 9))
            for r in index.retrieve(query, top_k=10, **kw)]  # fmt: skip


def _fill(index: NarrativeIndex) -> None:
    for doc_id, text, meta in DOCS:
        index.ingest(text, DocumentMeta(doc_id, **meta))


def test_narrative_index_over_postgres_matches_sqlite(tmp_path: Path, pg_url: str) -> None:
    lite = ChunkStore(tmp_path / "chunks.db")
    lite.init_schema()
    pg, pg_other = PostgresChunkStore(pg_url), PostgresChunkStore(pg_url)
    try:
        pg.init_schema()
        on_lite = NarrativeIndex(lite, persist_index=False)
        on_pg = NarrativeIndex(pg, persist_index=False)
        _fill(on_lite)
        _fill(on_pg)
        for query in QUERIES:
            assert _ranked(on_pg, query) == _ranked(on_lite, query), query
            assert _ranked(on_pg, query, entity="ACME_CN") == _ranked(on_lite, query, entity="ACME_CN")
            where = {"period": {"gte": "2024"}}
            assert _ranked(on_pg, query, where=where) == _ranked(on_lite, query, where=where)
        # A second index on another connection: built from PostgreSQL, kept in step by data_version.
        reader = NarrativeIndex(pg_other, persist_index=False)
        assert _ranked(reader, "营收 出口") == _ranked(on_lite, "营收 出口") != []
        for index in (on_lite, on_pg):
            index.ingest("Exports recovered in the second half.", DocumentMeta("r6", entity="ACME_HK"))
            index.withdraw("r1")
        for query in QUERIES + ["exports recovered"]:
            assert _ranked(reader, query) == _ranked(on_lite, query), query
        assert "r1" not in {cid.split(":")[0] for cid, *_ in _ranked(reader, "营收 出口")}
        assert reader.lexical_index.stats["catch_ups"] >= 1  # caught up through the change log
    finally:
        lite.close()
        pg.close()
        pg_other.close()


def test_narrative_index_with_default_persistence_keeps_the_index_in_memory(pg_url: str) -> None:
    with PostgresChunkStore(pg_url) as store:
        store.init_schema()
        index = NarrativeIndex(store)  # persist_index=True: no file beside a server store
        index.ingest("alpha beta", DocumentMeta("a"))
        assert [r.chunk.doc_id for r in index.retrieve("alpha")] == ["a"]
        assert index.lexical_index.folder is None
