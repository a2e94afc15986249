"""`CrossEncoderReranker`: a cross-encoder (ms-marco MiniLM, bge-reranker, ...) exported to ONNX,
run by ONNX Runtime over a model folder. The `[rerank]` extra.

Invariants: each (query, passage) pair is scored on its own (pairs are batched by length, and a
pair's score does not depend on its batch beyond float rounding); a one-logit head's logit, or a
two-class head's log-odds (class 1 - class 0), is the relevance score; the order is by
descending score, ties in the incoming order. The model is a folder or a hub id; with neither
`model_dir` nor RAGSPINE_RERANKER_MODEL it is the specification's
cross-encoder/ms-marco-MiniLM-L6-v2, fetched once into the hub cache (`ragspine models pull`).
`device` (auto, cpu, cuda) picks ONNX Runtime's providers (`ragspine.models.device`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ragspine.models.known import DEFAULT_CROSS_ENCODER
from ragspine.retrieval.rerank.models import OnnxModel, ScoredReranker

DEFAULT_MAX_LENGTH = 512
DEFAULT_BATCH_SIZE = 16


class CrossEncoderReranker(ScoredReranker):
    """Scores each (query, passage) pair with an ONNX cross-encoder.

    >>> reranker = CrossEncoderReranker("cross-encoder/ms-marco-MiniLM-L6-v2")  # doctest: +SKIP
    >>> reranker.rerank("why did revenue fall", ["sunny week", "demand weakened"])  # doctest: +SKIP
    [1, 0]
    """

    name = "cross_encoder"

    def __init__(
        self,
        model_dir: str | Path | None = None,
        *,
        max_length: int = DEFAULT_MAX_LENGTH,
        batch_size: int = DEFAULT_BATCH_SIZE,
        threads: int | None = None,
        device: str = "auto",
    ) -> None:
        self._model = OnnxModel(model_dir, what="CrossEncoderReranker", extra="rerank", max_length=max_length,
                                batch_size=batch_size, threads=threads, device=device,
                                default=DEFAULT_CROSS_ENCODER)  # fmt: skip

    def scores(self, query: str, candidates: list[str]) -> list[float]:
        """The relevance score of each candidate for `query`."""
        out = np.zeros(len(candidates), dtype=np.float32)
        if candidates:
            for batch, logits, _ in self._model.run_batches([(query, text) for text in candidates]):
                out[batch] = _relevance(logits, self._model.model_path)
        return out.tolist()

    def __repr__(self) -> str:
        return f"CrossEncoderReranker({self._model.name!r})"

    @property
    def device(self) -> str:
        """Where the model runs: "cuda" or "cpu"."""
        return self._model.device


def _relevance(logits: np.ndarray, model: Path) -> np.ndarray:
    """One score per row from a (batch,), (batch, 1) or (batch, 2) output."""
    if logits.ndim == 1:
        return logits
    if logits.ndim == 2 and logits.shape[1] == 1:
        return logits[:, 0]
    if logits.ndim == 2 and logits.shape[1] == 2:
        return logits[:, 1] - logits[:, 0]
    raise ValueError(f"{model}: expected a (batch,), (batch, 1) or (batch, 2) output, got {logits.shape}")
