"""`ColbertReranker`: late interaction over token embeddings from an ONNX ColBERT model folder
(model.onnx with a (batch, tokens, dim) output + tokenizer.json). The `[colbert]` extra.

Invariants: every real token's vector (attention mask 1) is L2-normalised and kept; a passage's
score is `late_interaction.maxsim(query tokens, passage tokens)` (the one MaxSim, shared with the
visual layer); texts are encoded one batch at a time grouped by length, so a passage's score
does not depend on the others beyond float rounding; the order is by descending score, ties in
the incoming order. `query_prefix` / `document_prefix` carry the model's markers (ColBERTv2:
"[unused0] " / "[unused1] "). The model is a folder or a hub id (`ragspine.models.resolve_model`);
`device` (auto, cpu, cuda) picks ONNX Runtime's providers (`ragspine.models.device`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ragspine.retrieval.rerank.models import OnnxModel, ScoredReranker
from ragspine.retrieval.vector.arrays import unit_rows
from ragspine.retrieval.vector.late_interaction import maxsim_scores

DEFAULT_MAX_LENGTH = 256
DEFAULT_BATCH_SIZE = 16


class ColbertReranker(ScoredReranker):
    """ColBERT MaxSim over an ONNX token encoder.

    >>> reranker = ColbertReranker("models/colbertv2-onnx", query_prefix="[unused0] ",
    ...                            document_prefix="[unused1] ")  # doctest: +SKIP
    >>> reranker.rerank("why did revenue fall", ["sunny week", "demand weakened"])  # doctest: +SKIP
    [1, 0]
    """

    name = "colbert"

    def __init__(
        self,
        model_dir: str | Path | None = None,
        *,
        query_prefix: str = "",
        document_prefix: str = "",
        max_length: int = DEFAULT_MAX_LENGTH,
        batch_size: int = DEFAULT_BATCH_SIZE,
        threads: int | None = None,
        device: str = "auto",
    ) -> None:
        self._model = OnnxModel(model_dir, what="ColbertReranker", extra="colbert", max_length=max_length,
                                batch_size=batch_size, threads=threads, device=device)  # fmt: skip
        self.query_prefix, self.document_prefix = query_prefix, document_prefix

    def token_vectors(self, texts: list[str]) -> list[np.ndarray]:
        """Each text's (tokens, dim) unit vectors, in order."""
        out: list[np.ndarray] = [np.zeros((0, 0), dtype=np.float32)] * len(texts)
        for batch, hidden, mask in self._model.run_batches(texts):
            if hidden.ndim != 3:
                raise ValueError(f"{self._model.model_path}: expected a (batch, tokens, dim) output, got {hidden.shape}")
            for row, i in enumerate(batch):
                out[i] = unit_rows(hidden[row][mask[row].astype(bool)])
        return out

    def scores(self, query: str, candidates: list[str]) -> list[float]:
        """MaxSim of the query's tokens against each candidate's."""
        if not candidates:
            return []
        (q,) = self.token_vectors([self.query_prefix + query])
        return maxsim_scores(q, self.token_vectors([self.document_prefix + t for t in candidates]))

    def __repr__(self) -> str:
        return f"ColbertReranker({self._model.name!r})"

    @property
    def device(self) -> str:
        """Where the model runs: "cuda" or "cpu"."""
        return self._model.device
