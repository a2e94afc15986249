"""`VisualChannel`: a query's page ranking from the page index (a self-contained channel).

Invariants: the query is embedded once by the same embedder that built the index (the index
refuses another model); the filter narrows the pages before any scoring; the answer is
(page key, MaxSim) pairs, best first, ties by key; RESTRICTED pages are not in the index, and a
record carrying that label is never returned. The channel knows nothing of chunks or fusion:
`retrieval.link.visual` turns its ranking into page pointers and fuses it with the text ranking.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ragspine.retrieval.filters import Filter
from ragspine.retrieval.visual.index import VisualIndex
from ragspine.retrieval.visual.protocol import PageRecord, VisualEmbedder

CHANNEL = "visual"


class VisualChannel:
    """Embed the query, rank the indexed pages by MaxSim.

    >>> import numpy as np
    >>> from ragspine.retrieval.visual.tiny import TinyVisualEmbedder
    >>> embedder = TinyVisualEmbedder()
    >>> channel = VisualChannel(embedder, VisualIndex(None, model_id=embedder.model_id, dim=embedder.dim))
    >>> channel.search("revenue", k=3)
    []
    """

    name = CHANNEL

    def __init__(self, embedder: VisualEmbedder, index: VisualIndex) -> None:
        if (index.model_id, index.dim) != (embedder.model_id, embedder.dim):
            raise ValueError(
                f"the page index is for {index.model_id!r} (dim {index.dim}), the embedder is "
                f"{embedder.model_id!r} (dim {embedder.dim})"
            )
        self.embedder, self.index = embedder, index

    def search(
        self, query: str, k: int, filters: Filter | None = None, *, accept: Callable[[PageRecord], bool] | None = None
    ) -> list[tuple[str, float]]:
        """The `k` best (page key, score) pairs for `query` among the pages `filters` allow
        (and `accept` accepts: `VisualIndex.search`)."""
        if not len(self.index):
            self.index.refresh()
            if not len(self.index):
                return []
        (vectors,) = self.embedder.embed_queries([query])
        return self.index.search(vectors, k, filters, accept=accept)

    def record(self, key: str) -> PageRecord | None:
        """The page record behind a key this channel returned."""
        return self.index.record(key)

    def stats(self) -> dict[str, Any]:
        """The page index's counts and the embedder, for /stats."""
        return self.index.stats()
