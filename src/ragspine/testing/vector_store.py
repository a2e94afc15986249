"""The conformance suite every `VectorStore` implementation runs.

Subclass `VectorStoreSuite` in a `Test*` class and give it two fixtures:
- `new_store`: a callable `(dim) -> VectorStore`, empty, for vectors of that dimension;
- `reopen`: a callable `(store) -> VectorStore` that persists `store` and opens it again the way
  a new process would (save + load for an in-process store; reconnect for a server store).
The fixtures own cleanup (closing connections, dropping tables).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from ragspine.retrieval.filters import Predicate, matches, parse_filter
from ragspine.retrieval.vector.stores.inprocess import SCORE_DECIMALS, ChunkVectorStore, VectorStore
from ragspine.testing.suite import required_fixture

NewStore = Callable[[int], VectorStore]
Reopen = Callable[[VectorStore], VectorStore]

# Metadata covering the filter language's cases: strings, periods, numbers, missing and empty fields.
RECORDS: list[dict[str, Any]] = [
    {"doc_id": "a", "entity": "ACME_CN", "period": "2024", "pages": 10, "sensitivity": "INTERNAL"},
    {"doc_id": "a", "entity": "ACME_CN", "period": "2024-H1", "pages": 3},
    {"doc_id": "b", "entity": "ACME_HK", "period": "2023-Q4", "pages": "1,200"},
    {"doc_id": "b", "entity": "ACME_HK", "period": "", "sensitivity": "RESTRICTED"},
    {"doc_id": "c", "entity": "LOTUS", "period": "2022-06-30", "pages": 7.5},
    {"doc_id": "c", "geography": "CN"},
    {"doc_id": "d", "entity": "BOREALIS", "period": "FY2024", "pages": 0, "tags": ["x", "y"]},
    {"doc_id": "d", "entity": "acme_cn", "period": "2025", "sensitivity": "restricted"},
]
FILTERS: list[Any] = [
    {"entity": "ACME_CN"},
    {"entity": {"ne": "ACME_CN"}},
    {"entity": {"in": ["ACME_CN", "LOTUS"]}},
    {"entity": {"nin": ["ACME_CN", "LOTUS"]}},
    {"period": {"gte": "2024"}},
    {"period": {"lt": "2024"}},
    {"period": {"between": ["2023", "2024"]}},
    {"pages": {"gt": 5}},
    {"pages": {"lte": 1200}},
    {"or": [{"entity": "LOTUS"}, {"geography": "CN"}]},
    {"and": [{"doc_id": "a"}, {"period": {"gte": "2024-07"}}]},
    {"doc_id": "a", "pages": {"gte": 3}},
    {"missing_field": "x"},
    {"missing_field": {"ne": "x"}},
    {"sensitivity": "RESTRICTED"},
    Predicate("entity", "eq", "ACME_HK"),
    {"or": []},
    {},
]


def unit(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)


def reference_ranking(ids: list[str], vectors: np.ndarray, query: np.ndarray, k: int) -> list[tuple[str, float]]:
    """Exact cosine in float64, rounded like the stores, ties by ascending id."""
    scores = np.round(unit(vectors.astype(np.float64)) @ unit(query[None, :].astype(np.float64))[0],
                      SCORE_DECIMALS)  # fmt: skip
    order = sorted(range(len(ids)), key=lambda i: (-scores[i], ids[i]))[:k]
    return [(ids[i], float(scores[i])) for i in order]


def assert_ranking_close(got: list[tuple[str, float]], want: list[tuple[str, float]]) -> None:
    assert [i for i, _ in got] == [i for i, _ in want]
    assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=2e-6)


class VectorStoreSuite:
    """Tests every VectorStore must pass; see the module docstring for the fixtures."""

    new_store = required_fixture("new_store", "VectorStoreSuite")

    reopen = required_fixture("reopen", "VectorStoreSuite")

    @pytest.fixture
    def filled(self, new_store: NewStore) -> tuple[VectorStore, list[str], np.ndarray]:
        rng = np.random.default_rng(7)
        vectors = rng.normal(size=(len(RECORDS), 6)).astype(np.float32)
        ids = [f"{r['doc_id']}:{i}" for i, r in enumerate(RECORDS)]
        store = new_store(6)
        store.upsert(ids, vectors, RECORDS)
        return store, ids, vectors

    def test_satisfies_the_protocol(self, new_store: NewStore) -> None:
        assert isinstance(new_store(3), VectorStore)

    def test_is_a_chunk_vector_store(self, new_store: NewStore) -> None:
        """What the dense channel needs beyond `VectorStore`: model, dimension, ids, missing, get."""
        store = new_store(3)
        assert isinstance(store, ChunkVectorStore)
        assert store.model_id is None or isinstance(store.model_id, str)

    def test_ids_missing_and_get(self, filled: Any) -> None:
        store, ids, vectors = filled
        assert store.ids() == sorted(ids)
        assert store.missing([ids[3], "nope:0", ids[0], "nope:1"]) == ["nope:0", "nope:1"]
        rows, present = store.get([ids[2], "nope:0", ids[5]])
        assert present.tolist() == [True, False, True]
        np.testing.assert_allclose(rows[[0, 2]], unit(vectors[[2, 5]]), atol=1e-6)
        assert not rows[1].any()
        assert store.dim == 6

    def test_exact_cosine_order(self, new_store: NewStore) -> None:
        rng = np.random.default_rng(11)
        vectors = rng.normal(size=(60, 8)).astype(np.float32)
        ids = [f"doc{i // 3}:{i:03d}" for i in range(60)]
        store = new_store(8)
        store.upsert(ids, vectors, [{"doc_id": i.split(":")[0]} for i in ids])
        for seed in range(5):
            query = np.random.default_rng(seed).normal(size=8).astype(np.float32)
            for k in (1, 7, 60, 100):
                assert_ranking_close(store.query(query, k=k), reference_ranking(ids, vectors, query, k))

    def test_ties_break_by_ascending_id(self, new_store: NewStore) -> None:
        store = new_store(3)
        same = [0.3, 0.4, 0.5]
        store.upsert(["c", "a", "e", "b", "d"], [same, same, same, [0.3, 0.4, 0.0], same])
        store.upsert(["best"], [[0.3, 0.4, 0.5000001]])  # equal after rounding: a tie too
        got = store.query([0.3, 0.4, 0.5], k=10)
        assert [i for i, _ in got] == ["a", "best", "c", "d", "e", "b"]
        assert [i for i, _ in store.query([0.3, 0.4, 0.5], k=3)] == ["a", "best", "c"]
        assert got[0][1] == pytest.approx(1.0, abs=1e-6)

    def test_cosine_ignores_length_and_zero_vectors_score_zero(self, new_store: NewStore) -> None:
        store = new_store(2)
        store.upsert(["long", "short", "zero", "opposite"], [[10, 0], [0.1, 0.0], [0, 0], [-1, 0]])
        got = dict(store.query([3.0, 0.0], k=4))
        assert got == pytest.approx({"long": 1.0, "short": 1.0, "zero": 0.0, "opposite": -1.0})
        assert [i for i, _ in store.query([3.0, 0.0], k=4)] == ["long", "short", "zero", "opposite"]

    @pytest.mark.parametrize("where", FILTERS, ids=[str(f) for f in FILTERS])
    def test_where_means_what_filters_matches_means(self, filled: Any, where: Any) -> None:
        store, ids, vectors = filled
        typed = parse_filter(where)
        allowed = [i for i, record in zip(ids, RECORDS, strict=True) if matches(typed, record)]
        query = np.ones(6, dtype=np.float32)
        got = store.query(query, k=len(ids), where=where)
        assert {i for i, _ in got} == set(allowed)
        full = [i for i, _ in reference_ranking(ids, vectors, query, len(ids))]
        assert [i for i, _ in got] == [i for i in full if i in set(allowed)]  # narrows, keeps order

    def test_restricted_vectors_are_not_removed_here(self, filled: Any) -> None:
        store, ids, _ = filled
        got = {i for i, _ in store.query(np.ones(6), k=len(ids))}
        assert got == set(ids)  # the exits (rerank, link) drop RESTRICTED, not the store

    def test_upsert_is_idempotent(self, filled: Any) -> None:
        store, ids, vectors = filled
        before = store.query(np.ones(6), k=5)
        store.upsert(ids, vectors, RECORDS)
        assert store.count() == len(ids)
        assert store.query(np.ones(6), k=5) == before

    def test_upsert_replaces_vector_and_metadata(self, filled: Any) -> None:
        store, ids, _ = filled
        target = ids[4]
        store.upsert([target], [[1, 0, 0, 0, 0, 0]], [{"doc_id": "z", "entity": "NEW"}])
        assert store.count() == len(ids)
        assert store.query([1, 0, 0, 0, 0, 0], k=1)[0] == (target, pytest.approx(1.0))
        assert [i for i, _ in store.query(np.ones(6), k=10, where={"entity": "NEW"})] == [target]
        assert store.query(np.ones(6), k=10, where={"entity": "LOTUS"}) == []
        assert store.delete_doc("c") == 1  # the replaced row left doc c
        assert store.delete_doc("z") == 1

    def test_delete_by_id(self, filled: Any) -> None:
        store, ids, _ = filled
        assert store.delete([ids[0], ids[3], "no-such-id"]) == 2
        assert store.count() == len(ids) - 2
        left = {i for i, _ in store.query(np.ones(6), k=100)}
        assert left == set(ids) - {ids[0], ids[3]}
        assert store.delete([ids[0]]) == 0

    def test_delete_by_doc(self, filled: Any) -> None:
        store, ids, _ = filled
        assert store.delete_doc("b") == 2
        assert store.delete_doc("b") == 0
        assert store.delete_doc("no-such-doc") == 0
        assert {i for i, _ in store.query(np.ones(6), k=100)} == {i for i in ids if not i.startswith("b:")}
        assert store.count() == len(ids) - 2

    def test_count(self, new_store: NewStore) -> None:
        store = new_store(2)
        assert store.count() == 0
        store.upsert(["a", "b"], [[1, 0], [0, 1]])
        store.upsert(["b", "c"], [[1, 1], [1, 2]])
        assert store.count() == 3
        store.delete(["a"])
        assert store.count() == 2

    def test_empty_store_answers_nothing(self, new_store: NewStore) -> None:
        assert new_store(3).query([1, 2, 3], k=5) == []

    def test_dimension_errors_are_clear(self, new_store: NewStore) -> None:
        store = new_store(3)
        store.upsert(["a"], [[1, 2, 3]])
        with pytest.raises(ValueError, match=r"dimension 2, expected 3"):
            store.upsert(["b"], [[1, 2]])
        with pytest.raises(ValueError, match=r"dimension 4, expected 3"):
            store.query([1, 2, 3, 4], k=1)
        assert store.count() == 1

    @pytest.mark.parametrize(
        ("ids", "vectors", "message"),
        [
            (["a", "b"], [[1, 2, 3]], "2 ids but 1 vectors"),
            (["a", "a"], [[1, 2, 3], [1, 2, 3]], "repeat"),
            (["a"], [[1, float("nan"), 3]], "NaN"),
            ([""], [[1, 2, 3]], "non-empty string"),
            (["a", "b"], [[1, 2, 3], [1, 2]], "different lengths"),
        ],
    )
    def test_bad_upserts_are_rejected(self, new_store: NewStore, ids: Any, vectors: Any, message: str) -> None:
        store = new_store(3)
        with pytest.raises(ValueError, match=message):
            store.upsert(ids, vectors)
        assert store.count() == 0

    def test_k_must_be_positive(self, filled: Any) -> None:
        store, _, _ = filled
        for k in (0, -1):
            with pytest.raises(ValueError, match="k must be a positive integer"):
                store.query(np.ones(6), k=k)

    def test_persistence_round_trip(self, filled: Any, reopen: Reopen) -> None:
        store, ids, _ = filled
        store.delete([ids[1]])
        store.upsert(["new:0"], [[1, 2, 3, 4, 5, 6]], [{"doc_id": "new", "entity": "ACME_CN"}])
        query = np.arange(6, dtype=np.float32) - 2.5
        before = [store.query(query, k=20, where=w) for w in FILTERS]
        again = reopen(store)
        assert again.count() == store.count()
        assert [again.query(query, k=20, where=w) for w in FILTERS] == before
        assert again.delete_doc("new") == 1
