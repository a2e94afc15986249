"""The conformance suite every embedding backend runs.

Subclass `EmbeddingBackendSuite` in a `Test*` class and give it a `backend` fixture (any scope;
class scope for a model that is slow to load). A real model subclasses `SemanticBackendSuite`
instead: it must also rank a paraphrase above an unrelated text.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ragspine.retrieval.types import EmbeddingBackend
from ragspine.retrieval.vector.embeddings.factory import embed_queries
from ragspine.testing.suite import required_fixture

TEXTS = [
    "营收下滑的主要原因是海外需求减弱。",
    "Revenue fell because overseas demand weakened.",
    "The weather was sunny all week in the mountains.",
    "",
]


def _matrix(vectors: list[list[float]]) -> np.ndarray:
    return np.asarray(vectors, dtype=np.float64)


class EmbeddingBackendSuite:
    """Tests every embedding backend must pass."""

    backend = required_fixture("backend", "EmbeddingBackendSuite")

    def test_satisfies_the_protocol(self, backend: Any) -> None:
        assert isinstance(backend.is_remote, bool)
        assert isinstance(backend, EmbeddingBackend)

    def test_one_vector_per_text_in_order_of_one_dimension(self, backend: Any) -> None:
        vectors = backend.embed_texts(TEXTS)
        assert len(vectors) == len(TEXTS)
        assert all(isinstance(v, list) and all(isinstance(x, float) for x in v) for v in vectors)
        assert len({len(v) for v in vectors}) == 1
        assert backend.dim == len(vectors[0])
        assert np.isfinite(_matrix(vectors)).all()

    def test_empty_input_gives_no_vectors(self, backend: Any) -> None:
        assert backend.embed_texts([]) == []
        assert embed_queries(backend, []) == []

    def test_a_text_gets_the_same_vector_whatever_else_is_in_the_batch(self, backend: Any) -> None:
        together = _matrix(backend.embed_texts(TEXTS))
        alone = _matrix([backend.embed_texts([t])[0] for t in reversed(TEXTS)])[::-1]
        assert np.allclose(together, alone, atol=1e-4)
        assert np.allclose(together, _matrix(backend.embed_texts(TEXTS)), atol=1e-6)

    def test_query_vectors_have_the_same_shape(self, backend: Any) -> None:
        queries = embed_queries(backend, TEXTS[:2])
        assert len(queries) == 2 and {len(q) for q in queries} == {backend.dim}

    def test_model_id_names_the_model(self, backend: Any) -> None:
        assert isinstance(backend.model_id, str) and backend.model_id
        assert backend.model_id == backend.model_id.strip()

    def test_a_bare_string_is_rejected(self, backend: Any) -> None:
        with pytest.raises(ValueError, match="list of strings"):
            backend.embed_texts("one string")


class SemanticBackendSuite(EmbeddingBackendSuite):
    """The suite plus a check that the model captures meaning."""

    def test_paraphrases_score_above_unrelated_text(self, backend: Any) -> None:
        passages = _matrix(backend.embed_texts(TEXTS[1:3]))
        query = _matrix(embed_queries(backend, ["Why did sales decline?"]))[0]
        cosine = passages @ query / (np.linalg.norm(passages, axis=1) * np.linalg.norm(query))
        assert cosine[0] > cosine[1] + 0.1
