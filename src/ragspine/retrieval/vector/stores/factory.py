"""The one way to pick a vector store: `make_vector_store(spec, **options)`.

    from ragspine.retrieval.vector.stores.factory import make_vector_store

    # spec (case-insensitive; None → RAGSPINE_VECTOR_STORE, default "in_process"):
    #   "in_process" → InProcessVectorStore(dim=None, *, model_id=None)           (numpy, no extra)
    #   "pgvector"   → PgVectorStore(url, table, dim, model_id=None)              [postgres]
    #   "qdrant"     → QdrantVectorStore(collection, dim, *, model_id, url | location | path, ...) [qdrant]
    store = make_vector_store("qdrant", collection="chunks", url="http://127.0.0.1:6333", model_id="e5")

Invariants:
- The valid names, and the error for an unknown one, come from the VECTOR_STORES registry (built
  from `ragspine.catalog.VECTOR_STORES`, whose names RAGSPINE_VECTOR_STORE accepts); the
  options a name accepts come from its class's constructor signature. An unknown name or option
  is a ValueError listing the valid ones.
- An implementation's module is imported only when its name is built, so a bare install never
  imports a database driver; a missing driver raises the implementation's error naming the extra.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ragspine import catalog
from ragspine.registry import check_options, closed_lookup, spec_from_env
from ragspine.retrieval.vector.stores.inprocess import VectorStore


@dataclass(frozen=True)
class StoreEntry:
    """Where one registry name's class lives ("package.module:Class") and what it needs."""

    target: str
    about: str

    def load(self, name: str) -> type:
        """The class, imported now; ImportError saying so when its module is not installed."""
        module_name, _, class_name = self.target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            raise ImportError(
                f"vector store {name!r} is registered, but its module {module_name} is not part of "
                "this installation of ragspine; upgrade ragspine or pick another vector store"
            ) from exc
        cls: type = getattr(module, class_name)
        return cls


VECTOR_STORES: Mapping[str, StoreEntry] = {
    name: StoreEntry(target, about) for name, (target, about) in catalog.VECTOR_STORES.items()
}


def make_vector_store(spec: str | None = None, **options: Any) -> VectorStore:
    """The vector store named `spec`, built with `options` (its constructor's arguments).
    `spec=None` reads the RAGSPINE_VECTOR_STORE environment variable (default in_process).

    >>> make_vector_store("in_process", dim=3, model_id="demo")
    InProcessVectorStore(count=0, dim=3, model_id='demo')
    >>> try:
    ...     make_vector_store("faiss")
    ... except ValueError as exc:
    ...     print(exc)
    unknown vector store 'faiss'; valid: in_process, pgvector, qdrant
    """
    if spec is None:
        spec = spec_from_env(("RAGSPINE_VECTOR_STORE",), "in_process")
    name, entry = closed_lookup("vector store", VECTOR_STORES, spec)
    cls = entry.load(name)
    check_options(f"vector store {name!r}", cls, options)
    store: VectorStore = cls(**options)
    return store
