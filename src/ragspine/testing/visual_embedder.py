"""The conformance suite every visual embedder runs.

Subclass `VisualEmbedderSuite` in a `Test*` class and give it an `embedder` fixture (class scope
for a model that is slow to load). An embedder gives unit multi-vectors of its declared dimension
for pages of any size and for queries in Chinese and English, the same ones whatever else is in
the batch, and builds a page index that never holds a RESTRICTED page (`build.index_pages`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ragspine.retrieval.visual.build import index_pages
from ragspine.retrieval.visual.index import VisualIndex
from ragspine.retrieval.visual.protocol import PageRecord, VisualEmbedder
from ragspine.testing.suite import required_fixture

QUERIES = ["营收下滑的主要原因", "Why did revenue fall in 2024?", "chart"]


def pages() -> list[np.ndarray]:
    """Three page images: a blank portrait page, a striped landscape one, and a tiny noisy one."""
    blank = np.full((220, 170, 3), 255, dtype=np.uint8)
    striped = np.full((170, 220, 3), 255, dtype=np.uint8)
    striped[::9] = 0
    noisy = np.random.default_rng(7).integers(0, 256, size=(31, 23, 3), dtype=np.uint8)
    return [blank, striped, noisy]


def _unit_rows(array: np.ndarray, dim: int) -> bool:
    return (
        array.ndim == 2 and array.shape[1] == dim and array.dtype == np.float32 and bool(np.isfinite(array).all())
        and bool(np.allclose(np.linalg.norm(array, axis=1)[np.linalg.norm(array, axis=1) > 0], 1.0, atol=1e-3))
    )  # fmt: skip


class VisualEmbedderSuite:
    """Tests every visual embedder must pass."""

    embedder = required_fixture("embedder", "VisualEmbedderSuite")

    def test_satisfies_the_protocol(self, embedder: Any) -> None:
        assert isinstance(embedder, VisualEmbedder)
        assert isinstance(embedder.model_id, str) and embedder.model_id
        assert isinstance(embedder.dim, int) and embedder.dim > 0

    def test_pages_give_unit_multi_vectors_in_order(self, embedder: Any) -> None:
        out = embedder.embed_pages(pages())
        assert len(out) == 3
        assert all(_unit_rows(v, embedder.dim) and len(v) >= 1 for v in out)
        assert not np.array_equal(out[0], out[1])

    def test_queries_give_unit_multi_vectors(self, embedder: Any) -> None:
        out = embedder.embed_queries(QUERIES)
        assert len(out) == len(QUERIES)
        assert all(_unit_rows(v, embedder.dim) and len(v) >= 1 for v in out)

    def test_empty_input_gives_nothing(self, embedder: Any) -> None:
        assert embedder.embed_pages([]) == [] and embedder.embed_queries([]) == []

    def test_a_page_does_not_depend_on_its_batch(self, embedder: Any) -> None:
        alone = embedder.embed_pages([pages()[1]])[0]
        together = embedder.embed_pages(pages())[1]
        assert alone.shape == together.shape and np.allclose(alone, together, atol=1e-3)
        assert np.allclose(embedder.embed_queries(QUERIES[:1])[0], embedder.embed_queries(QUERIES)[0], atol=1e-3)

    def test_is_deterministic(self, embedder: Any) -> None:
        first, second = embedder.embed_pages(pages()), embedder.embed_pages(pages())
        assert all(np.array_equal(a, b) for a, b in zip(first, second, strict=True))

    def test_never_sees_a_restricted_page(self, embedder: Any) -> None:
        seen: list[int] = []

        class Spy:
            model_id, dim = embedder.model_id, embedder.dim

            def embed_pages(self, images: Sequence[np.ndarray]) -> list[np.ndarray]:
                seen.extend(int(image[0, 0, 0]) for image in images)
                return list(embedder.embed_pages(images))

            def embed_queries(self, queries: Sequence[str]) -> list[np.ndarray]:
                return list(embedder.embed_queries(queries))

        def page(marker: int) -> Any:
            return lambda: np.full((64, 48, 3), marker, dtype=np.uint8)

        labels = ["PUBLIC", "RESTRICTED", "ｒｅｓｔｒｉｃｔｅｄ", "INTERNAL"]
        records = [(PageRecord("d.pdf", i + 1, label), page(i)) for i, label in enumerate(labels)]
        index = VisualIndex(None, model_id=embedder.model_id, dim=embedder.dim)
        index_pages([("d.pdf", records)], Spy(), index)
        assert seen == [0, 3]
        assert sorted(index.doc_versions()) == ["d.pdf"] and len(index) == 2
        (query,) = embedder.embed_queries(["revenue"])
        assert {key for key, _ in index.search(query, k=10)} == {"d.pdf#page=1", "d.pdf#page=4"}
