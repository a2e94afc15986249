"""`DeterministicEmbeddingBackend`: hashed bag-of-tokens vectors, for tests and demos.

Invariants: the vector of a text depends only on the text, `dim` and `seed`: the same in every
process, on every machine and Python version that tokenizes the text alike (tokens are hashed
with BLAKE2b, never with the salted built-in `hash`). Tokens are those of the lexical channel's
`tokenize` (CJK unigrams + bigrams), so texts that share tokens have positive cosine. Vectors
are L2-normalised; a text without tokens gives the all-zero vector. It is not a semantic model.
"""

from __future__ import annotations

import hashlib

import numpy as np

from ragspine.retrieval.lexical.tokenize import tokenize
from ragspine.retrieval.vector.embeddings.support import check_texts
from ragspine.retrieval.vector.arrays import to_lists, unit_rows

DEFAULT_DETERMINISTIC_DIM = 256


class DeterministicEmbeddingBackend:
    """Feature-hashed token counts with a hashed sign, normalised.

    >>> backend = DeterministicEmbeddingBackend(dim=8)
    >>> a, b = backend.embed_texts(["营收下滑", "营收下滑"])
    >>> a == b and len(a) == 8
    True
    """

    is_remote = False

    def __init__(self, dim: int = DEFAULT_DETERMINISTIC_DIM, *, seed: str = "") -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise ValueError(f"dim must be a positive integer, got {dim!r}")
        self.dim = dim
        self.seed = seed
        self._person = hashlib.blake2b(seed.encode("utf-8"), digest_size=16).digest()
        suffix = f";seed={seed}" if seed else ""
        self.model_id = f"deterministic:blake2b-tokens-v1;dim={dim}{suffix}"

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        texts = check_texts(texts)
        matrix = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for token in tokenize(text):
                digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8, person=self._person)
                value = int.from_bytes(digest.digest(), "little")
                matrix[row, value % self.dim] += 1.0 if (value >> 63) & 1 else -1.0
        return to_lists(unit_rows(matrix))

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        """Same as `embed_texts` (the model is symmetric)."""
        return self.embed_texts(texts)

    def __repr__(self) -> str:
        return f"DeterministicEmbeddingBackend(dim={self.dim})"
