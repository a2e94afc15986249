"""QdrantVectorStore: the conformance suite, plus identity with the in-process store under filters.

These tests run qdrant-client in its LOCAL mode (`QdrantClient(":memory:")` and `path=`): an
in-process, exact (brute-force) implementation of the Qdrant API that ships with the client. No
Qdrant server is available where this suite runs, so the server's HNSW index, payload indexes
and network paths are not exercised here; the code paths of the store (point ids, payloads,
pushed-down filters, paging, rescoring) are the same against a server.
"""

from __future__ import annotations

import doctest
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("qdrant_client")

from qdrant_client import QdrantClient  # noqa: E402
from qdrant_client.http import models as qm  # noqa: E402

from ragspine.retrieval.filters import parse_filter  # noqa: E402
from ragspine.retrieval.vector.embeddings.support import MissingExtraError  # noqa: E402
from ragspine.retrieval.vector.stores import qdrant as qdrant_store  # noqa: E402
from ragspine.retrieval.vector.stores.qdrant import (  # noqa: E402
    ID_NAMESPACE,
    QdrantVectorStore,
    point_id,
    to_qdrant_filter,
)
from ragspine.retrieval.vector.stores.inprocess import InProcessVectorStore, VectorStore  # noqa: E402
from ragspine.retrieval.vector.stores.files import VectorFilesError, VectorFilesMismatch  # noqa: E402

from ragspine.testing.vector_store import NewStore, Reopen, VectorStoreSuite  # noqa: E402


class TestQdrantVectorStoreInMemory(VectorStoreSuite):
    """Local mode in memory; `reopen` opens the collection again through the same client."""

    @pytest.fixture
    def client(self) -> Iterator[QdrantClient]:
        client = QdrantClient(":memory:")
        yield client
        client.close()

    @pytest.fixture
    def new_store(self, client: QdrantClient) -> NewStore:
        names = iter(range(1000))
        return lambda dim: QdrantVectorStore(f"c{next(names)}", dim, model_id="test-model", client=client)

    @pytest.fixture
    def reopen(self, client: QdrantClient) -> Reopen:
        def reopen(store: VectorStore) -> VectorStore:
            assert isinstance(store, QdrantVectorStore)
            return QdrantVectorStore(store.collection, model_id="test-model", client=client)

        return reopen


class TestQdrantVectorStoreOnDisk(VectorStoreSuite):
    """Local mode on disk (`path=`); `reopen` closes the client and opens the folder again."""

    @pytest.fixture
    def new_store(self, tmp_path: Path) -> Iterator[NewStore]:
        opened: list[QdrantVectorStore] = []

        def new_store(dim: int) -> QdrantVectorStore:
            folder = str(tmp_path / f"q{len(opened)}")
            opened.append(QdrantVectorStore("chunks", dim, model_id="test-model", path=folder))
            return opened[-1]

        yield new_store
        for store in opened:
            store.close()

    @pytest.fixture
    def reopen(self) -> Iterator[Reopen]:
        opened: list[QdrantVectorStore] = []

        def reopen(store: VectorStore) -> VectorStore:
            assert isinstance(store, QdrantVectorStore)
            folder = store._client._client.location  # the local folder
            store.close()  # a new process opens the folder after the old one let go of it
            opened.append(QdrantVectorStore(store.collection, model_id="test-model", path=folder))
            # local mode admits one client per folder: the suite's old store goes on through the new one
            store._client, store._owns_client = opened[-1]._client, False
            return opened[-1]

        yield reopen
        for store in opened:
            store.close()


@pytest.fixture
def client() -> Iterator[QdrantClient]:
    client = QdrantClient(":memory:")
    yield client
    client.close()


# Values that exercise every branch of `filters.matches`: plain strings, case, blanks, numbers and
# numeric strings, periods and dates of several spellings, bools, lists, and missing fields.
_VALUES: list[Any] = ["ACME", "acme", "LOTUS", " ACME", "", "  ", "1,200", "1200", 1200, 7.5, 0, -3, "7.5",
                      "2024", 2024, "FY2024", "2024-H1", "2024-Q3", "2024-06", "2024-06-30", "2023",
                      "2025-01-01T08:00", True, False, "True", ["ACME", "x"], [], [1200], "x"]  # fmt: skip
_OPERANDS: list[Any] = ["ACME", "acme", "LOTUS", "1200", 1200, 5, 7.5, "7.5", "2024", 2024, "FY2024",
                        "2024-H1", "2024-06-30", "2023-Q4", "True", "x", " ACME", "['ACME', 'x']"]  # fmt: skip


def _random_filter(rng: np.random.Generator, depth: int = 0) -> Any:
    roll = rng.random()
    if depth < 2 and roll < 0.2:
        members = [_random_filter(rng, depth + 1) for _ in range(rng.integers(0, 3))]
        return {str(rng.choice(["and", "or"])): members}
    field = str(rng.choice(["f", "g", "h"]))
    op = str(rng.choice(["eq", "ne", "in", "nin", "gt", "gte", "lt", "lte", "between"]))
    pick = lambda: _OPERANDS[rng.integers(len(_OPERANDS))]  # noqa: E731
    if op in ("in", "nin"):
        return {field: {op: [pick() for _ in range(rng.integers(1, 4))]}}
    if op == "between":
        return {field: {op: [pick(), pick()]}}
    return {field: {op: pick()}}


def test_results_are_identical_to_the_in_process_store(client: QdrantClient) -> None:
    rng = np.random.default_rng(5)
    n = 150
    ids = [f"d{i % 11}:{i:03d}" for i in range(n)]
    vectors = rng.normal(size=(n, 5)).astype(np.float32)
    vectors[::7] = vectors[0]  # exact ties
    metas = []
    for i in range(n):
        meta: dict[str, Any] = {"doc_id": ids[i].split(":")[0]}
        for field in ("f", "g", "h"):
            if rng.random() < 0.8:
                meta[field] = _VALUES[rng.integers(len(_VALUES))]
        metas.append(meta)
    ours = QdrantVectorStore("same", model_id="m", client=client)
    reference = InProcessVectorStore(model_id="m")
    ours.upsert(ids, vectors, metas)
    reference.upsert(ids, vectors, metas)
    checked = 0
    for trial in range(120):
        where = _random_filter(rng)
        query = rng.normal(size=5) if trial % 5 else vectors[0]
        for k in (1, 4, 40):
            want = reference.query(query, k=k, where=where)
            got = ours.query(query, k=k, where=where)
            assert [i for i, _ in got] == [i for i, _ in want], where
            assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=2e-6)
            checked += bool(want)
    assert checked > 60  # most filters matched something


def test_the_k_cut_sees_every_tie_beyond_the_first_page(client: QdrantClient) -> None:
    store = QdrantVectorStore("ties", 2, client=client)
    ids = [f"t{i:03d}" for i in range(200)]
    store.upsert(list(reversed(ids)), [[1.0, 1.0]] * 200)
    store.upsert(["zz-best"], [[1.0, 1.0001]])
    assert [i for i, _ in store.query([1.0, 1.0], k=3)] == ["t000", "t001", "t002"]
    assert [i for i, _ in store.query([0.0, 0.0], k=2)] == ["t000", "t001"]  # a zero query: all 0.0


def test_a_rare_match_far_down_the_ranking_is_found(client: QdrantClient) -> None:
    store = QdrantVectorStore("rare", 2, client=client)
    store.upsert([f"n{i:03d}" for i in range(300)], [[1.0, i / 300] for i in range(300)],
                 [{"period": "2020"} for _ in range(300)])  # fmt: skip
    store.upsert(["far"], [[-1.0, 0.0]], [{"period": "2024-H2"}])
    assert [i for i, _ in store.query([1.0, 0.0], k=2, where={"period": {"gte": "2024"}})] == ["far"]


def test_ids_map_to_uuid5_points_and_the_payload_keeps_the_id(client: QdrantClient) -> None:
    store = QdrantVectorStore("ids", 2, client=client)
    store.upsert(["年报:0"], [[3.0, 4.0]], [{"doc_id": "年报", "pages": "1,200"}])
    assert point_id("年报:0") == str(uuid.uuid5(ID_NAMESPACE, "年报:0"))
    (point,) = client.retrieve("ids", ids=[point_id("年报:0")], with_payload=True, with_vectors=True)
    meta = {"doc_id": "年报", "pages": "1,200"}
    assert point.payload == {"id": "年报:0", "meta": meta, "num": {"pages": 1200.0}}
    assert point.vector == pytest.approx([0.6, 0.8])  # stored unit-length


def test_what_is_pushed_down_to_qdrant() -> None:
    def pushed(where: Any) -> Any:
        return to_qdrant_filter(parse_filter(where), qm)

    assert pushed({"entity": "ACME"}) == qm.Filter(
        must=[qm.FieldCondition(key="meta.entity", match=qm.MatchValue(value="ACME"))]
    )
    assert pushed({"entity": {"in": ["A", "B"]}}).must[0].match == qm.MatchAny(any=["A", "B"])
    assert pushed({"pages": {"between": [3, "1,200"]}}).must[0] == qm.FieldCondition(
        key="num.pages", range=qm.Range(gte=3.0, lte=1200.0)
    )
    for undecidable in ({"period": {"gte": "2024"}}, {"year": 2024}, {"pages": {"gt": 2024}}, {"entity": "2024"},
                        {"entity": {"ne": "A"}}, {"entity": {"nin": ["A"]}}, {"a.b": "x"}, {"entity": "True"},
                        {"or": [{"entity": "A"}, {"period": "2024"}]}):  # fmt: skip
        assert pushed(undecidable) is None, undecidable
    assert pushed({"and": [{"entity": "A"}, {"period": "2024"}]}).must == [  # the undecidable half is left out
        qm.FieldCondition(key="meta.entity", match=qm.MatchValue(value="A"))
    ]


def test_model_and_dimension_are_recorded_and_checked(client: QdrantClient) -> None:
    QdrantVectorStore("m", model_id="onnx:minilm", client=client).upsert(["a"], [[1.0, 0.0, 0.0]])
    again = QdrantVectorStore("m", client=client)
    assert (again.model_id, again.dim, again.count()) == ("onnx:minilm", 3, 1)
    with pytest.raises(VectorFilesMismatch, match=r"made by model 'onnx:minilm'.*'e5:small'.*Re-embed"):
        QdrantVectorStore("m", model_id="e5:small", client=client)
    with pytest.raises(VectorFilesMismatch, match=r"dimension 3.*makes 384.*re-embed"):
        QdrantVectorStore("m", 384, client=client)


def test_a_store_opened_before_another_creates_the_collection_sees_it(client: QdrantClient) -> None:
    early = QdrantVectorStore("late", model_id="m", client=client)
    QdrantVectorStore("late", model_id="m", client=client).upsert(["a"], [[1.0, 0.0]], [{"doc_id": "d"}])
    assert early.count() == 1 and early.dim == 2
    assert early.delete_doc("d") == 1


def test_a_collection_not_made_by_ragspine_is_refused(client: QdrantClient) -> None:
    client.create_collection("foreign", vectors_config=qm.VectorParams(size=2, distance=qm.Distance.COSINE))
    with pytest.raises(VectorFilesError, match="no RAGSpine manifest"):
        QdrantVectorStore("foreign", client=client)


def test_drop_removes_everything(client: QdrantClient) -> None:
    store = QdrantVectorStore("gone", 2, client=client)
    store.upsert(["a"], [[1.0, 0.0]])
    store.drop()
    assert not client.collection_exists("gone") and not client.collection_exists("gone__ragspine")
    assert QdrantVectorStore("gone", client=client).count() == 0


def test_connection_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="exactly one of url=, location="):
        QdrantVectorStore("x")
    with pytest.raises(ValueError, match="got url, path"):
        QdrantVectorStore("x", url="http://localhost:6333", path="/tmp/q")


def test_a_missing_client_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "qdrant_client" or m.startswith("qdrant_client.")]:
        monkeypatch.setitem(sys.modules, name, None)  # type: ignore[arg-type]
    with pytest.raises(MissingExtraError, match=r"pip install 'ragspine\[qdrant\]'"):
        QdrantVectorStore("x", location=":memory:")


def test_docstring_examples() -> None:
    failures, _ = doctest.testmod(qdrant_store, optionflags=doctest.ELLIPSIS)
    assert failures == 0
