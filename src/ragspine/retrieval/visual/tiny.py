"""`TinyVisualEmbedder`: a small deterministic late-interaction model with fixed-seed random
weights, so the visual path (render → embed → index → MaxSim → fused hits) runs on any CPU
with nothing to download. It has no retrieval quality: use it for tests and benchmarks only.

Invariants: a page image is resampled (nearest pixel) to a `grid`×`grid` layout of
`patch`×`patch` pixel patches; each patch's pixels (scaled to [-0.5, 0.5]) times a fixed random
projection, plus a fixed random position vector, is one unit vector. A query's tokens (the BM25
tokenizer's: CJK unigrams and bigrams, ASCII words) each get a unit vector seeded by the token's
BLAKE2b digest. Same seed, same vectors, on every machine.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from ragspine.retrieval.lexical.tokenize import tokenize
from ragspine.retrieval.vector.arrays import unit_rows


class TinyVisualEmbedder:
    """Random-weight patch projector (pages) and hashed token vectors (queries).

    >>> a, b = TinyVisualEmbedder(seed=1), TinyVisualEmbedder(seed=1)
    >>> page = np.zeros((100, 80, 3), dtype=np.uint8)
    >>> bool(np.array_equal(a.embed_pages([page])[0], b.embed_pages([page])[0]))
    True
    """

    def __init__(self, *, dim: int = 32, grid: int = 8, patch: int = 8, seed: int = 0) -> None:
        if dim < 2 or grid < 1 or patch < 1:
            raise ValueError(f"TinyVisualEmbedder needs dim >= 2, grid >= 1, patch >= 1; got {dim}, {grid}, {patch}")
        self.dim, self.grid, self.patch, self.seed = dim, grid, patch, seed
        rng = np.random.default_rng(seed)
        features = patch * patch * 3
        self._projection = (rng.standard_normal((features, dim)) / np.sqrt(features)).astype(np.float32)
        self._positions = (0.1 * rng.standard_normal((grid * grid, dim))).astype(np.float32)
        self.model_id = f"tiny-visual:dim={dim}:grid={grid}:patch={patch}:seed={seed}"

    def embed_pages(self, images: Sequence[np.ndarray]) -> list[np.ndarray]:
        return [self._page(image) for image in images]

    def embed_queries(self, queries: Sequence[str]) -> list[np.ndarray]:
        return [self._query(query) for query in queries]

    def _page(self, image: np.ndarray) -> np.ndarray:
        pixels = np.asarray(image)
        if pixels.ndim != 3 or pixels.shape[2] != 3 or not pixels.shape[0] or not pixels.shape[1]:
            raise ValueError(f"a page image must be (height, width, 3) RGB, got shape {pixels.shape}")
        side = self.grid * self.patch
        rows = (np.arange(side) * pixels.shape[0]) // side
        cols = (np.arange(side) * pixels.shape[1]) // side
        sampled = pixels[rows][:, cols].astype(np.float32) / 255.0 - 0.5  # (side, side, 3)
        patches = sampled.reshape(self.grid, self.patch, self.grid, self.patch, 3).transpose(0, 2, 1, 3, 4)
        flat = patches.reshape(self.grid * self.grid, -1)
        return unit_rows(flat @ self._projection + self._positions)

    def _query(self, query: str) -> np.ndarray:
        tokens = tokenize(query)
        out = np.zeros((len(tokens), self.dim), dtype=np.float32)
        for i, token in enumerate(tokens):
            digest = hashlib.blake2b(f"{self.seed}:{token}".encode(), digest_size=8).digest()
            out[i] = np.random.default_rng(int.from_bytes(digest, "little")).standard_normal(self.dim)
        return unit_rows(out)

    def __repr__(self) -> str:
        return f"TinyVisualEmbedder(dim={self.dim}, grid={self.grid}, patch={self.patch}, seed={self.seed})"
