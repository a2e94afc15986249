"""InProcessVectorStore: the conformance suite, plus its folder format (atomic saves, model checks)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from ragspine import atomic
from ragspine.retrieval.vector.stores import files as vector_files
from ragspine.retrieval.vector.stores.inprocess import InProcessVectorStore, VectorStore
from ragspine.retrieval.vector.stores.files import VectorFilesError, VectorFilesMismatch

from ragspine.testing.vector_store import NewStore, Reopen, VectorStoreSuite


class TestInProcessVectorStore(VectorStoreSuite):
    @pytest.fixture
    def new_store(self) -> NewStore:
        return lambda dim: InProcessVectorStore(dim, model_id="test-model")

    @pytest.fixture
    def reopen(self, tmp_path: Path) -> Reopen:
        def reopen(store: VectorStore) -> VectorStore:
            assert isinstance(store, InProcessVectorStore)
            store.save(tmp_path / "vectors")
            return InProcessVectorStore.load(tmp_path / "vectors", model_id="test-model", dim=store.dim)

        return reopen


def _store(model_id: str = "m1") -> InProcessVectorStore:
    store = InProcessVectorStore(model_id=model_id)
    store.upsert(["a:0", "b:0", "b:1"], [[1, 0, 0], [0, 1, 0], [0, 0, 1]],
                 [{"doc_id": "a"}, {"doc_id": "b", "entity": "营收"}, {"doc_id": "b"}])  # fmt: skip
    return store


def test_dim_is_fixed_by_the_first_upsert() -> None:
    store = InProcessVectorStore()
    assert store.dim is None
    store.upsert(["a"], [[1.0, 2.0]])
    assert store.dim == 2
    with pytest.raises(ValueError, match="dimension 3, expected 2"):
        store.upsert(["b"], [[1.0, 2.0, 3.0]])


def test_bad_metadata_is_rejected_before_anything_is_stored() -> None:
    store = InProcessVectorStore(2)
    with pytest.raises(ValueError, match="not a string or a number"):
        store.upsert(["a"], [[1, 0]], [{"doc_id": "a", "nested": {"x": 1}}])
    with pytest.raises(ValueError, match="NaN"):
        store.upsert(["a"], [[1, 0]], [{"score": float("nan")}])
    assert store.count() == 0


def test_save_and_load_keep_ids_metadata_and_model(tmp_path: Path) -> None:
    _store().save(tmp_path / "v")
    loaded = InProcessVectorStore.load(tmp_path / "v", model_id="m1", dim=3)
    assert loaded.model_id == "m1" and loaded.dim == 3
    assert loaded.ids() == ["a:0", "b:0", "b:1"]
    assert loaded.metadata("b:0") == {"doc_id": "b", "entity": "营收"}
    assert loaded.vector("a:0") == [1.0, 0.0, 0.0]


def test_an_empty_store_round_trips(tmp_path: Path) -> None:
    InProcessVectorStore(model_id="m1").save(tmp_path / "v")
    loaded = InProcessVectorStore.load(tmp_path / "v", model_id="m1")
    assert loaded.count() == 0 and loaded.dim is None


def test_loading_with_another_model_says_how_to_re_embed(tmp_path: Path) -> None:
    _store("onnx:minilm").save(tmp_path / "v")
    with pytest.raises(VectorFilesMismatch, match=r"made by model 'onnx:minilm'.*'e5:small'.*Re-embed"):
        InProcessVectorStore.load(tmp_path / "v", model_id="e5:small")
    with pytest.raises(VectorFilesMismatch, match=r"dimension 3.*makes 384.*re-embed"):
        InProcessVectorStore.load(tmp_path / "v", dim=384)
    assert InProcessVectorStore.load(tmp_path / "v").count() == 3  # unchecked load still works


def test_saving_twice_keeps_one_previous_generation(tmp_path: Path) -> None:
    folder = tmp_path / "v"
    store = _store()
    store.save(folder)
    first = set(os.listdir(folder))
    store.save(folder)
    assert set(os.listdir(folder)) == first  # same content, same file names
    store.delete(["a:0"])
    store.save(folder)
    second = set(os.listdir(folder))
    store.delete(["b:0"])
    store.save(folder)
    third = set(os.listdir(folder))
    assert len(third) == 5  # manifest + this generation + the previous one
    assert (first - {"manifest.json"}).isdisjoint(third)
    assert second - first <= third  # the generation saved before this one
    assert InProcessVectorStore.load(folder).ids() == ["b:1"]


def test_a_crash_before_the_manifest_is_replaced_leaves_the_old_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "v"
    _store().save(folder)
    real_replace = os.replace

    def crash_on_manifest(src: str, dst: str) -> None:
        if str(dst).endswith("manifest.json"):
            raise OSError("disk full")
        real_replace(src, dst)

    monkeypatch.setattr(atomic.os, "replace", crash_on_manifest)
    changed = _store()
    changed.delete(["a:0", "b:0"])
    with pytest.raises(OSError, match="disk full"):
        changed.save(folder)
    monkeypatch.undo()
    assert InProcessVectorStore.load(folder).ids() == ["a:0", "b:0", "b:1"]


def test_damaged_folders_raise_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(VectorFilesError, match="no vector store"):
        InProcessVectorStore.load(tmp_path / "nothing")
    folder = tmp_path / "v"
    _store().save(folder)
    manifest = json.loads((folder / "manifest.json").read_text("utf-8"))
    np.save(folder / manifest["vectors"], np.zeros((2, 3), dtype=np.float32))
    with pytest.raises(VectorFilesError, match="damaged"):
        InProcessVectorStore.load(folder)
    (folder / "manifest.json").write_text(json.dumps({**manifest, "version": 99}), "utf-8")
    with pytest.raises(VectorFilesError, match="format version 99"):
        InProcessVectorStore.load(folder)
    (folder / "manifest.json").write_text("{not json", "utf-8")
    with pytest.raises(VectorFilesError, match="unreadable"):
        InProcessVectorStore.load(folder)


def test_pickled_arrays_are_never_loaded(tmp_path: Path) -> None:
    folder = tmp_path / "v"
    _store().save(folder)
    manifest = json.loads((folder / "manifest.json").read_text("utf-8"))
    np.save(folder / manifest["vectors"], np.array([{"x": 1}] * 3, dtype=object), allow_pickle=True)
    with pytest.raises(VectorFilesError, match="damaged"):
        InProcessVectorStore.load(folder)


def test_many_small_upserts_and_deletes_stay_consistent() -> None:
    rng = np.random.default_rng(3)
    store = InProcessVectorStore(4)
    live: dict[str, np.ndarray] = {}
    for step in range(300):
        id_ = f"d{step % 17}:{step % 5}"
        if step % 7 == 3:
            store.delete_doc(f"d{step % 17}")
            live = {k: v for k, v in live.items() if not k.startswith(f"d{step % 17}:")}
        else:
            vector = rng.normal(size=4)
            store.upsert([id_], [vector], [{"doc_id": id_.split(":")[0]}])
            live[id_] = vector / np.linalg.norm(vector)
    assert store.ids() == sorted(live)
    for id_, vector in live.items():
        assert store.vector(id_) == pytest.approx(vector.tolist(), abs=1e-6)


@pytest.mark.parametrize("vectors", [[1, 2, 3], [["a", "b", "c"]], [[1, None, 3]], [[]]])
def test_vectors_that_are_not_number_lists_are_rejected(vectors: object) -> None:
    with pytest.raises(ValueError, match="vectors"):
        InProcessVectorStore(3).upsert(["a"], vectors)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="query vector"):
        InProcessVectorStore(3).query([[1, 2, 3]], k=1)
