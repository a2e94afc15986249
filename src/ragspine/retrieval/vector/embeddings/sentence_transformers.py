"""`SentenceTransformerEmbeddingBackend`: any sentence-transformers model in a local folder
(Qwen3-Embedding, BGE, E5, GTE...). The `[embed-st]` extra (sentence-transformers, PyTorch).

Invariants:
- Never downloads: `model_path` is a local folder, or a name already in the Hugging Face cache
  (loaded with `local_files_only=True`).
- One vector per text, in order; L2-normalised unless `normalize=False`. Queries use
  `query_prompt` (a literal prefix) or `query_prompt_name` (a prompt the model's config defines,
  e.g. "query" for Qwen3-Embedding); passages use `passage_prompt`.
- `model_id` names the model (folder name and a fingerprint of its file names and sizes) and
  every setting that changes a vector.
- sentence-transformers is imported when a backend is built; without it the error names the extra.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from ragspine.models.device import torch_device
from ragspine.retrieval.vector.embeddings.support import check_texts, require
from ragspine.retrieval.vector.arrays import to_lists

DEFAULT_BATCH_SIZE = 32


class SentenceTransformerEmbeddingBackend:
    """Embeddings from a local sentence-transformers model.

    >>> backend = SentenceTransformerEmbeddingBackend(  # doctest: +SKIP
    ...     "models/Qwen3-Embedding-0.6B", query_prompt_name="query")
    >>> backend.embed_queries(["为什么营收下滑"])  # doctest: +SKIP
    [[...]]
    """

    is_remote = False

    def __init__(
        self,
        model_path: str | Path,
        *,
        device: str = "cpu",
        normalize: bool = True,
        batch_size: int = DEFAULT_BATCH_SIZE,
        query_prompt: str | None = None,
        query_prompt_name: str | None = None,
        passage_prompt: str | None = None,
        trust_remote_code: bool = False,
        model_id: str | None = None,
    ) -> None:
        if not str(model_path).strip():
            raise ValueError("model_path must name a local model folder")
        if query_prompt is not None and query_prompt_name is not None:
            raise ValueError("give query_prompt or query_prompt_name, not both")
        module = require(
            "sentence_transformers", extra="embed-st", backend="SentenceTransformerEmbeddingBackend"
        )
        self.model_path = str(model_path)
        self.normalize, self.batch_size = normalize, batch_size
        self.query_prompt, self.query_prompt_name = query_prompt, query_prompt_name
        self.passage_prompt = passage_prompt
        # auto, cpu, cuda, cuda:N (PyTorch's, which sentence-transformers pulls); cuda without a GPU: one line
        self.device = device if device == "cpu" else torch_device(
            require("torch", extra="embed-st", backend="SentenceTransformerEmbeddingBackend"), device
        )
        self._model = module.SentenceTransformer(
            self.model_path,
            device=self.device,
            trust_remote_code=trust_remote_code,
            local_files_only=True,
        )
        self.dim = _dimension(self._model)
        self.model_id = model_id or (
            f"st:{_model_name(self.model_path)};norm={int(normalize)};"
            f"qp={query_prompt_name or query_prompt!r};pp={passage_prompt!r}"
        )

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        """Passage vectors (`passage_prompt` prepended)."""
        return self._encode(check_texts(texts), prompt=self.passage_prompt, prompt_name=None)

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        """Query vectors (`query_prompt` or the model's `query_prompt_name` prompt)."""
        return self._encode(check_texts(texts), prompt=self.query_prompt, prompt_name=self.query_prompt_name)

    def _encode(self, texts: list[str], *, prompt: str | None, prompt_name: str | None) -> list[list[float]]:
        if not texts:
            return []
        options: dict[str, Any] = {}
        if prompt is not None:
            options["prompt"] = prompt
        if prompt_name is not None:
            options["prompt_name"] = prompt_name
        vectors = self._model.encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=self.normalize,
            convert_to_numpy=True,
            show_progress_bar=False,
            **options,
        )
        matrix = np.asarray(vectors, dtype=np.float32)
        if self.dim is None:
            self.dim = int(matrix.shape[1])
        return to_lists(matrix)

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbeddingBackend(model_path={self.model_path!r})"


def _dimension(model: Any) -> int | None:
    for name in ("get_sentence_embedding_dimension", "get_embedding_dimension"):
        method = getattr(model, name, None)
        if callable(method):
            value = method()
            return int(value) if value else None
    return None


def _model_name(model_path: str) -> str:
    """The folder's name and a fingerprint of its files (names and sizes), or the name as given."""
    folder = Path(model_path)
    if not folder.is_dir():
        return model_path
    listing = sorted(
        f"{p.relative_to(folder).as_posix()}:{p.stat().st_size}" for p in folder.rglob("*") if p.is_file()
    )
    digest = hashlib.sha256("\n".join(listing).encode("utf-8")).hexdigest()[:12]
    return f"{folder.name}@{digest}"
