"""PgVectorStore: the VectorStore conformance suite on a real PostgreSQL + pgvector, and its
filter push-down, registry and approximate (HNSW) path."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragspine.retrieval.filters import matches, parse_filter
from ragspine.retrieval.vector.stores import pgvector as pgvector_store
from ragspine.retrieval.vector.stores.pgvector import PgVectorStore, to_sql
from ragspine.retrieval.vector.stores.inprocess import InProcessVectorStore, VectorStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "vector"))
from ragspine.testing.vector_store import FILTERS, RECORDS, NewStore, Reopen, VectorStoreSuite  # noqa: E402


@pytest.fixture
def opened(pg_url: str) -> Iterator[list[PgVectorStore]]:
    stores: list[PgVectorStore] = []
    yield stores
    for store in stores:
        store.close()


class TestPgVectorStore(VectorStoreSuite):
    @pytest.fixture
    def new_store(self, pg_url: str, opened: list[PgVectorStore]) -> NewStore:
        def new_store(dim: int) -> VectorStore:
            store = PgVectorStore(pg_url, f"vectors_{len(opened)}", dim, "test-model")
            opened.append(store)
            return store

        return new_store

    @pytest.fixture
    def reopen(self, pg_url: str, opened: list[PgVectorStore]) -> Reopen:
        def reopen(store: VectorStore) -> VectorStore:
            assert isinstance(store, PgVectorStore)
            again = PgVectorStore(pg_url, store.table, store.dim, store.model_id)
            opened.append(again)
            return again

        return reopen


# Values that exercise `str()` / JSON-type edge cases a naive SQL translation would get wrong.
ODD = [
    {"doc_id": "o", "flag": True, "n": 10, "s": "10", "tags": ["x"]},
    {"doc_id": "o", "flag": "True", "n": "10.0", "s": "ten", "tags": "['x']"},
    {"doc_id": "o", "flag": None, "n": "1,000", "s": " ", "period": "2024-Q1"},
    {"doc_id": 7, "n": 1e3, "s": "2024", "period": "FY2024"},
]
ODD_FILTERS: list[Any] = [
    {"flag": "True"}, {"flag": {"ne": "True"}}, {"n": 10}, {"n": "1000"}, {"n": {"gte": 1000}},
    {"s": "10"}, {"s": "ten"}, {"s": {"in": ["ten", "2024"]}}, {"s": {"nin": ["ten"]}},
    {"tags": "['x']"}, {"period": "2024"}, {"period": {"lte": "2024"}}, {"doc_id": 7},
    {"doc_id": "7"}, {"or": [{"s": "ten"}, {"n": {"lt": 11}}]}, {"s": "2024"},
]


def test_where_matches_in_process_on_odd_values(pg_url: str, opened: list[PgVectorStore]) -> None:
    records = RECORDS + ODD
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(len(records), 4)).astype(np.float32)
    ids = [f"id{i:02d}" for i in range(len(records))]
    pg = PgVectorStore(pg_url, "odd", 4, "m")
    opened.append(pg)
    local = InProcessVectorStore(4, model_id="m")
    for store in (pg, local):
        store.upsert(ids, vectors, records)
    query = rng.normal(size=4)
    for where in FILTERS + ODD_FILTERS:
        want = local.query(query, k=len(ids), where=where)
        assert pg.query(query, k=len(ids), where=where) == want, where
        typed = parse_filter(where)
        assert {i for i, _ in want} == {i for i, r in zip(ids, records, strict=True) if matches(typed, r)}
    assert pg.delete_doc("7") == 0 and pg.delete_doc("o") == 3  # doc_id 7 (a number) is no doc_id


def test_pushdown_is_exact_for_plain_strings() -> None:
    sql, params = to_sql(parse_filter({"entity": {"in": ["ACME", "LOTUS"]}}))
    assert "= ANY" in sql and params == ["entity", "entity", ["ACME", "LOTUS"]]
    sql, params = to_sql(parse_filter({"period": {"gte": "2024"}}))
    assert sql == "(metadata->>%s) IS NOT NULL" and params == ["period"]  # matches() decides
    assert to_sql(parse_filter({"or": []}))[0] == "FALSE"
    assert to_sql(None) == ("TRUE", [])


def test_registry_refuses_another_model_or_dimension(pg_url: str, opened: list[PgVectorStore]) -> None:
    opened.append(PgVectorStore(pg_url, "reg", 3, "m1"))
    with pytest.raises(ValueError, match="model 'm1', dimension 3.*re-embed"):
        PgVectorStore(pg_url, "reg", 3, "m2")
    with pytest.raises(ValueError, match="dimension 3"):
        PgVectorStore(pg_url, "reg", 4, "m1")
    with pytest.raises(ValueError, match="table must be"):
        PgVectorStore(pg_url, "Bad-Name", 3, "m1")


def test_hnsw_path_reranks_exactly_among_candidates(
    pg_url: str, opened: list[PgVectorStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pgvector_store, "EXACT_MAX_ROWS", 10)  # force the index path on 300 rows
    rng = np.random.default_rng(5)
    vectors = rng.normal(size=(300, 8)).astype(np.float32)
    ids = [f"v{i:03d}" for i in range(300)]
    metas = [{"doc_id": f"d{i % 3}"} for i in range(300)]
    pg = PgVectorStore(pg_url, "ann", 8, "m")
    opened.append(pg)
    pg.upsert(ids, vectors, metas)
    local = InProcessVectorStore(8, model_id="m")
    local.upsert(ids, vectors, metas)
    plan = "\n".join(r[0] for r in pg._conn.execute(
        "EXPLAIN SELECT id FROM ann ORDER BY embedding <=> %s LIMIT 5", (vectors[0],)))  # fmt: skip
    assert "ann_hnsw" in plan
    for seed in range(3):
        query = np.random.default_rng(seed).normal(size=8)
        # ef_search >= 100 on 300 rows: the HNSW candidates hold the true top 10.
        assert pg.query(query, k=10) == local.query(query, k=10)
        assert pg.query(query, k=5, where={"doc_id": "d1"}) == local.query(query, k=5, where={"doc_id": "d1"})
